// gen-fleet writes N bundles for bench/fleet.sh with kcrash's own writer
// (fleet/fleettest): corpus evidence rotated over GPU faults, software bugs,
// collective timeouts and runs without evidence, on 2,048 hosts of 8 GPUs,
// with pids, addresses and times varied.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kcrash/kcrash/fleet/fleettest"
)

func main() {
	n := flag.Int("n", 1000, "bundles to write")
	out := flag.String("out", "", "directory to write them under (one subdirectory per host)")
	corpus := flag.String("corpus", "testdata/corpus", "the evidence corpus")
	seed := flag.Uint64("seed", 1, "varies hosts, times, pids and addresses")
	now := flag.String("now", "2026-12-03T00:00:00Z", "the newest bundle's time (RFC 3339); bundles span the 7 days before")
	flag.Parse()
	end, err := time.Parse(time.RFC3339, *now)
	if *out == "" || err != nil {
		fmt.Fprintln(os.Stderr, "usage: gen-fleet -out DIR [-n N] [-seed S] [-now TIME]", err)
		os.Exit(2)
	}
	kinds := []string{
		"3-nvidia-xid/xid13-xid109-pt_main_thread-dmesg-ctime.txt",
		"3-nvidia-xid/xid119-gsp-rpc-timeout-h100-full-dump.txt",
		"3-nvidia-xid/xid48-dbe-syslog-gpu-operator-TRUNCATED.txt",
		"1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt",
		"2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt",
		"6-program-log/device-side-assert-kernel-assertion-lines-indexkernel.txt",
		"6-program-log/nccl-watchdog-collective-timeout-new-format.txt",
		"",
	}
	logs := make([]string, len(kinds))
	for i, k := range kinds {
		if k == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(*corpus, k))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		s := string(b)
		for range 2 {
			if strings.HasPrefix(s, "source:") || strings.HasPrefix(s, "expect:") {
				_, s, _ = strings.Cut(s, "\n")
			}
		}
		logs[i] = s
	}
	buses := []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}
	r := rand.New(rand.NewPCG(*seed, 7))
	for i := range *n {
		host, slot := fmt.Sprintf("node%04d", 1+r.IntN(2048)), r.IntN(8)
		k := r.IntN(len(kinds))
		spec := fleettest.Spec{Out: filepath.Join(*out, host), Host: host, Time: end.Add(-time.Duration(r.Int64N(int64(7 * 24 * time.Hour)))),
			Job: fmt.Sprint(r.IntN(500)), Log: logs[k], BusID: buses[slot], Seed: *seed<<32 | uint64(i),
			Stack: map[string]string{"torch": "2.9.1", "sglang": []string{"0.5.2", "0.5.3"}[r.IntN(2)], "nvidia-driver": "570.158.01"}}
		spec.Rank, spec.LocalRank = slot, slot
		if err := os.MkdirAll(spec.Out, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if _, err := fleettest.WriteErr(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
