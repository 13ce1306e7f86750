package bucket

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// A synthetic fleet from Llama 3's Table 5 (54 days, 16,384 GPUs, 419
// unexpected interruptions: GPU 268, software 56, network 35, host
// maintenance 32, host 21, unknown 7), written as bundles by kcrash's own
// writer from real corpus evidence with pids, addresses and times varied:
// GPU events concentrated on a few GPUs, software events spread over many
// hosts after one upgrade. The class must be right for at least 95% of
// buckets and of GPUs. "Right" is hardware-suspect for GPU faults,
// software-suspect for software bugs, and anything but hardware-suspect for
// network, host and unknown interruptions (counts cannot tell a switch from
// a software bug; neither may drain a GPU).
func TestLlama3Fleet(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 419 bundles")
	}
	corpus := testcorpus.Dir(t)
	log := func(rel string) string { return fleettest.Corpus(t, corpus, rel) }
	xid31 := log("3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt")
	ev := map[string]string{
		"xid13":  log("3-nvidia-xid/xid13-xid109-pt_main_thread-dmesg-ctime.txt"),
		"xid31":  strings.SplitAfterN(xid31, "\n", 4)[0] + strings.SplitAfterN(xid31, "\n", 4)[1] + strings.SplitAfterN(xid31, "\n", 4)[2],
		"xid62":  xid31,
		"xid119": log("3-nvidia-xid/xid119-gsp-rpc-timeout-h100-full-dump.txt"),
		"xid48":  log("3-nvidia-xid/xid48-dbe-syslog-gpu-operator-TRUNCATED.txt"),
		"xid94":  log("3-nvidia-xid/xid94-95-format-from-nvidia-driver-source.txt"),
		"xid79":  log("3-nvidia-xid/xid79-modal-gpu-health-wrapped.txt"),
		"hip":    log("2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt"),
		"assert": log("6-program-log/device-side-assert-kernel-assertion-lines-indexkernel.txt"),
		"cublas": log("6-program-log/cublas-status-execution-failed-gemmex.txt"),
		"nccl":   log("6-program-log/nccl-watchdog-collective-timeout-new-format.txt"),
		"none":   "",
	}
	if !strings.Contains(ev["xid31"], "): 31, ") {
		t.Fatalf("the Xid 31 excerpt lost its line:\n%s", ev["xid31"])
	}

	const days = 54
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	start := now.Add(-days * 24 * time.Hour)
	upgrade := start.Add(27 * 24 * time.Hour)
	stackAt := func(at time.Time) map[string]string {
		if at.Before(upgrade) {
			return map[string]string{"torch": "2.4.0", "sglang": "0.5.2", "nvidia-driver": "550.54.15"}
		}
		return map[string]string{"torch": "2.4.0", "sglang": "0.5.3", "nvidia-driver": "550.54.15"}
	}
	r := rand.New(rand.NewPCG(3, 405))
	buses := []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}
	dir := t.TempDir()
	category := map[string]string{} // bundle path → Table 5 category
	expectGPU := map[string]string{}
	usedSlot := map[string]bool{}
	seed := uint64(0)
	write := func(cat, kind, host string, slot int, uuid string, at time.Time) {
		seed++
		spec := fleettest.Spec{Out: filepath.Join(dir, host), Host: host, Time: at, Job: fmt.Sprintf("llama3-%d", at.Unix()/86400),
			Rank: slot, LocalRank: slot, Log: ev[kind], Stack: stackAt(at), Kernel: "5.19.0", Seed: seed}
		if strings.HasPrefix(kind, "xid") {
			spec.BusID, spec.UUID = buses[slot], uuid
		}
		category[fleettest.Write(t, spec)] = cat
	}
	// A bad GPU: its own host and slot, never reused by another category.
	nextBad := 0
	badGPU := func() (host string, slot int, uuid string) {
		nextBad++
		host, slot = fmt.Sprintf("node%04d", 1+nextBad*13%2048), nextBad%8
		uuid = fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", nextBad, nextBad)
		usedSlot[fmt.Sprint(host, slot)] = true
		expectGPU[uuid], expectGPU[host+"/"+buses[slot]] = Hardware, Hardware
		return
	}
	anyTime := func() time.Time { return start.Add(time.Duration(r.Int64N(int64(days * 24 * time.Hour)))) }
	half := func(second bool) time.Time {
		d := time.Duration(r.Int64N(int64(26 * 24 * time.Hour)))
		if second {
			return upgrade.Add(d)
		}
		return start.Add(d)
	}
	gpuEvents := 0
	faulty := []string{"xid13", "xid31", "xid62", "xid119"}
	for i := range 37 { // Faulty GPU: 148 = 37 GPUs x 4, each under rotating signatures
		h, s, u := badGPU()
		for j := range 4 {
			write("gpu", faulty[(i+j)%4], h, s, u, anyTime())
			gpuEvents++
		}
	}
	for range 24 { // GPU HBM3 memory: 72 = 24 x 3 double-bit ECC (Xid 48)
		h, s, u := badGPU()
		for range 3 {
			write("gpu", "xid48", h, s, u, anyTime())
			gpuEvents++
		}
	}
	for i := range 6 { // GPU SRAM: 19 contained/uncontained ECC (Xid 94/95)
		h, s, u := badGPU()
		for range 3 + i/5 {
			write("gpu", "xid94", h, s, u, anyTime())
			gpuEvents++
		}
	}
	for i := range 4 { // GPU system processor: 17 GSP timeouts on 4 GPUs, before and after the upgrade
		h, s, u := badGPU()
		for j := range 4 + i/3 {
			write("gpu", "xid119", h, s, u, half(j%2 == 1))
			gpuEvents++
		}
	}
	for range 2 { // silent data corruption: 6, surfacing as SM exceptions and MMU faults
		h, s, u := badGPU()
		for j := range 3 {
			write("gpu", []string{"xid13", "xid31", "xid13"}[j], h, s, u, anyTime())
			gpuEvents++
		}
	}
	for range 6 { // thermal interface + sensor: 6 GPUs fell off the bus
		h, s, u := badGPU()
		write("gpu", "xid79", h, s, u, anyTime())
		gpuEvents++
	}
	if gpuEvents != 268 {
		t.Fatalf("%d GPU events", gpuEvents)
	}
	// Everything else lands on healthy GPUs: a random host and slot no bad
	// GPU uses. Software bugs come after the upgrade.
	healthy := func() (string, int) {
		for {
			h, s := fmt.Sprintf("node%04d", 1+r.IntN(2048)), r.IntN(8)
			if !usedSlot[fmt.Sprint(h, s)] {
				return h, s
			}
		}
	}
	other := 0
	for _, c := range []struct {
		cat, kind string
		n         int
		after     bool
	}{
		{"software", "hip", 30, true}, {"software", "assert", 16, true}, {"software", "cublas", 10, true},
		{"network", "nccl", 35, false}, {"unknown", "nccl", 7, false},
		{"maintenance", "none", 32, false}, {"host", "none", 21, false},
	} {
		for range c.n {
			h, s := healthy()
			at := anyTime()
			if c.after {
				at = half(true)
			}
			write(c.cat, c.kind, h, s, "", at)
			other++
		}
	}
	if gpuEvents+other != 419 {
		t.Fatalf("%d bundles", gpuEvents+other)
	}

	begin := time.Now()
	sums := walk(t, dir)
	readTook := time.Since(begin)
	begin = time.Now()
	rep := Group(sums, Options{Now: now, Window: days * 24 * time.Hour})
	groupTook := time.Since(begin)
	t.Logf("419 bundles read in %v, grouped in %v: %d buckets, %d GPUs", readTook, groupTook, len(rep.Buckets), len(rep.GPUs))

	// What each bucket should be, from its members' categories.
	cats := map[string]map[string]int{}
	for _, s := range sums {
		if cats[s.Fine] == nil {
			cats[s.Fine] = map[string]int{}
		}
		cats[s.Fine][category[s.Path]]++
	}
	right := func(want, got string) bool {
		switch want {
		case Hardware, Software:
			return got == want
		}
		return got != Hardware
	}
	okB := 0
	for _, b := range rep.Buckets {
		want := "not-hardware"
		switch c := cats[b.Signature]; {
		case c["gpu"] > 0:
			want = Hardware
		case c["software"] > 0:
			want = Software
		}
		if c := cats[b.Signature]; (c["gpu"] > 0 || c["software"] > 0) && len(c) > 1 {
			t.Errorf("bucket %q mixes categories %v", b.Title, c)
		}
		if right(want, b.Class) {
			okB++
		} else {
			t.Logf("bucket %s %q: %s, want %s (%s)", b.Signature, b.Title, b.Class, want, b.Reason)
		}
	}
	okG := 0
	for _, g := range rep.GPUs {
		want := expectGPU[g.ID]
		if want == "" {
			want = "not-hardware"
			if g.Guessed && len(g.Buckets) == 1 && cats[g.Buckets[0]]["software"] > 0 {
				want = Software
			}
		}
		if right(want, g.Class) {
			okG++
		} else {
			t.Logf("GPU %s: %s, want %s (%s)", g.ID, g.Class, want, g.Reason)
		}
	}
	bad := 0
	for _, g := range rep.GPUs {
		if expectGPU[g.ID] == Hardware {
			bad++
		}
	}
	t.Logf("buckets right: %d/%d; GPUs right: %d/%d (%d bad GPUs)", okB, len(rep.Buckets), okG, len(rep.GPUs), bad)
	if bad != 79 {
		t.Errorf("%d bad GPUs in the report, want 79 (one identity each)", bad)
	}
	if 100*okB < 95*len(rep.Buckets) || 100*okG < 95*len(rep.GPUs) {
		t.Errorf("right for %d/%d buckets and %d/%d GPUs: under 95%%", okB, len(rep.Buckets), okG, len(rep.GPUs))
	}
	var soft []Bucket
	for _, b := range rep.Buckets {
		if b.Class == Software && cats[b.Signature]["software"] > 0 {
			soft = append(soft, b)
		}
	}
	if len(soft) != 3 {
		t.Errorf("%d software buckets", len(soft))
	}
	for _, b := range soft {
		if b.Component != "sglang=0.5.3" {
			t.Errorf("software bucket %q names %q, want the upgrade sglang=0.5.3", b.Title, b.Component)
		}
	}
}
