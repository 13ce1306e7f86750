package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/internal/testlock"
)

type triageOut struct {
	Verdict struct {
		Kind evidence.Kind `json:"kind"`
	} `json:"verdict"`
	Findings []evidence.Finding `json:"findings"`
}

func triageOf(t *testing.T, b *bundle.Bundle) triageOut {
	t.Helper()
	var tr triageOut
	if err := json.Unmarshal(b.Manifest.Triage, &tr); err != nil {
		t.Fatalf("manifest.triage: %v", err)
	}
	return tr
}

// A child whose process faults on the GPU: the kernel's amdgpu fault block,
// written into the real /dev/kmsg naming the child's pid (as the driver
// would), comes back parsed in the bundle, tied to the run by its pid, and
// makes the verdict.
func TestRunKernelFaultAttributed(t *testing.T) {
	testlock.KmsgQuiet(t, 6*time.Second) // sets KCRASH_TEST_MARK, which kcrash inherits
	out := t.TempDir()
	// The head of the block as amdgpu prints it (corpus 1-amdgpu-page-fault/
	// mi300x-mmhub0-sdma-no-retry-fault.txt) with this child's pid, marked
	// as a kcrash test's: the fewest lines that carry the fault, the pid and
	// the address. One open per line, as the kernel rate-limits a writer.
	script := `pid=$$
k() { printf '%s\n' "kcrash-test[$KCRASH_TEST_MARK]: $1" > /dev/kmsg; }
k "amdgpu 0000:3d:00.0: amdgpu: [mmhub0] no-retry page fault (src_id:0 ring:160 vmid:3 pasid:32790)"
k "amdgpu 0000:3d:00.0: amdgpu:  for process python3.12 pid $pid thread python3.12 pid $pid)"
k "amdgpu 0000:3d:00.0: amdgpu:   in page starting at address 0x0000709843600000 from IH client 0x12 (VMC)"
echo "Memory access fault by GPU node-2 (Agent handle: 0x55d5e0b0a2c0) on address 0x709843600000. Reason: Page not present or supervisor privilege."
kill -ABRT $$`
	r := runKcrash(t, 60*time.Second, nil, "run", "-q", "--out", out, "--", "sh", "-c", script)
	if r.code != 134 {
		t.Fatalf("exit %d, want 134; stderr %s", r.code, r.stderr)
	}
	b := oneBundle(t, out)
	kmsg, _ := b.File("kmsg.log")
	if !strings.Contains(string(kmsg), "no-retry page fault (src_id:0 ring:160 vmid:3 pasid:32790)") {
		t.Fatalf("kmsg.log lacks the fault:\n%s", kmsg)
	}
	tr := triageOf(t, b)
	if tr.Verdict.Kind != evidence.GPUPageFault {
		t.Fatalf("verdict %s, want gpu_page_fault", tr.Verdict.Kind)
	}
	var found bool
	for _, f := range tr.Findings {
		if f.Source == evidence.SourceDmesg && f.Kind == evidence.GPUPageFault && f.Address == "0x0000709843600000" {
			found = true
			if f.Attribution != "pid-in-tree" {
				t.Errorf("fault attributed %q, want pid-in-tree", f.Attribution)
			}
		}
	}
	if !found {
		t.Fatalf("no parsed amdgpu fault among the findings: %+v", tr.Findings)
	}
}

// `kcrash collect` after the tests ran: a GPU falling off the bus that a
// test wrote into the kernel log (marked) is no evidence to a kcrash outside
// that test, on this GPU-less host; to the test's own kcrash it is.
func TestCollectIgnoresTestRecords(t *testing.T) {
	w := testlock.Kmsg(t)
	const gpu = "0000:e7:00.0" // no other test's record names it
	w.Write(t, 4, "NVRM: The NVIDIA GPU "+gpu+"\nNVRM: (PCI ID: 10de:26b5) installed in this system has\nNVRM: fallen off the bus and is not responding to commands.")
	for _, tc := range []struct {
		name, mark string
		want       bool
	}{{"outside the test", "", false}, {"the test's own kcrash", w.Token, true}} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			r := runKcrash(t, 60*time.Second, []string{"KCRASH_TEST_MARK=" + tc.mark}, "collect", "--since", "1m", "--out", out)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			b := oneBundle(t, out)
			if kmsg, _ := b.File("kmsg.log"); !strings.Contains(string(kmsg), w.Mark()+"NVRM: The NVIDIA GPU "+gpu) {
				t.Fatalf("kmsg.log lacks the marked record:\n%s", kmsg)
			}
			found := false
			for _, f := range triageOf(t, b).Findings {
				if f.GPU == gpu {
					found = true
					if f.Kind != evidence.GPUHardwareError {
						t.Errorf("finding %+v", f)
					}
				}
			}
			if found != tc.want {
				t.Fatalf("a finding for %s: %v, want %v", gpu, found, tc.want)
			}
		})
	}
}

// A real OOM kill: the child moves itself into a new cgroup-v1 memory cgroup
// limited to 64 MiB and allocates past it. The bundle holds the kernel's OOM
// record for the killed pid (a worker started and killed between two samples,
// so it is tied to the run by its memory cgroup), the cgroup's oom_kill count,
// and says host_oom.
func TestRunRealOOMKill(t *testing.T) {
	// No kmsg lock: the records other tests write are marked with their
	// own tokens, which this run's kcrash does not read as evidence.
	cg := testenv.MemoryCgroup(t, "creates a cgroup-v1 memory cgroup", fmt.Sprintf("kcrash-e2e-%d", os.Getpid()))
	if err := os.WriteFile(filepath.Join(cg, "memory.limit_in_bytes"), []byte("67108864"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(cg, "memory.swappiness"), []byte("0"), 0o644)
	out := t.TempDir()
	// The shell joins the cgroup, waits for kcrash's first samples, then a
	// worker it starts grows until the OOM killer takes it.
	script := fmt.Sprintf(`echo $$ > %s/cgroup.procs; sleep 1.5; tail /dev/zero & wait $!; echo "worker died with status $?"; exit 1`, cg)
	r := runKcrash(t, 90*time.Second, nil, "run", "-q", "--out", out, "--skip-collectors", "stacks", "--", "sh", "-c", script)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", r.code, r.stderr)
	}
	b := oneBundle(t, out)
	if o, _ := b.File("output.log"); !strings.Contains(string(o), "worker died with status 137") {
		t.Fatalf("output.log: %q", o)
	}
	tr := triageOf(t, b)
	if tr.Verdict.Kind != evidence.HostOOM {
		t.Fatalf("verdict %s, want host_oom", tr.Verdict.Kind)
	}
	var kernelRecord, cgroupCount bool
	for _, f := range tr.Findings {
		if f.Kind != evidence.HostOOM {
			continue
		}
		if f.Source == evidence.SourceDmesg && (f.Attribution == "pid-in-tree" || f.Attribution == "memcg-of-tree") && f.Pid != 0 {
			kernelRecord = true
		}
		if f.Source == evidence.SourceCgroup {
			cgroupCount = true
		}
	}
	if !kernelRecord || !cgroupCount {
		t.Fatalf("kernel OOM record tied to the tree: %v, cgroup oom_kill finding: %v\n%+v", kernelRecord, cgroupCount, tr.Findings)
	}
	mem, _ := b.File("memory.json")
	var m struct {
		Cgroup struct {
			OOMKillDelta int64 `json:"oom_kill_delta"`
		} `json:"cgroup"`
	}
	if err := json.Unmarshal(mem, &m); err != nil || m.Cgroup.OOMKillDelta < 1 {
		t.Fatalf("memory.json cgroup oom_kill_delta %d (%v)", m.Cgroup.OOMKillDelta, err)
	}
}

// --health-url: a chatty server whose health endpoint stops answering is a
// hang, although it keeps printing.
func TestRunHealthURLHang(t *testing.T) {
	// Healthy for kcrash's first probe (so the endpoint is known to work),
	// dead from the second on.
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probes.Add(1) > 1 {
			http.Error(w, "engine dead", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	out := t.TempDir()
	r := runKcrash(t, 60*time.Second, nil, "run", "-q", "--out", out, "--skip-collectors", "kmsg",
		"--hang-timeout", "1s", "--health-url", srv.URL, "--kill-after", "1s",
		"--", "sh", "-c", "while :; do echo tick; sleep 0.1; done")
	if r.code != 128+15 && r.code != 128+9 {
		t.Fatalf("exit %d, want the child stopped by SIGTERM/SIGKILL; stderr %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "looks hung (no health answer from "+srv.URL+" for 1s)") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	b := oneBundle(t, out)
	if tr := triageOf(t, b); tr.Verdict.Kind != evidence.Hang {
		t.Fatalf("verdict %s, want hang", tr.Verdict.Kind)
	}
}

// The health endpoint is probed once per --health-interval (1 s by
// default), not several times a second: each probe is a line in the
// server's access log.
func TestRunHealthInterval(t *testing.T) {
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { probes.Add(1) }))
	defer srv.Close()
	begin := time.Now()
	r := runKcrash(t, 60*time.Second, nil, "run", "-q", "--collect", "never", "--hang-timeout", "2s", "--health-url", srv.URL,
		"--", "sh", "-c", "sleep 3.5")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	secs := time.Since(begin).Seconds()
	if n := probes.Load(); n < 2 || float64(n) > secs+1 {
		t.Errorf("%d probes in %.1f s, want about one a second", n, secs)
	}
}

// A failed run that writes no bundle (--collect never) leaves no work
// directory behind, even one that holds the child's kernel-API log: the user
// asked for no evidence (--keep-workdir keeps it).
func TestRunWorkdirWithoutBundle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		kept   bool
	}{{"nothing written", "exit 3", false}, {"a kernel-API log", `f=$(echo "$SGLANG_KERNEL_API_LOGDEST" | sed "s/%i/$$/"); echo call > "$f"; exit 3`, false}} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			r := runKcrash(t, 60*time.Second, []string{"TMPDIR=" + tmp}, "run", "-q", "--collect", "never", "--", "sh", "-c", tc.script)
			if r.code != 3 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			left, _ := filepath.Glob(filepath.Join(tmp, "kcrash-run-*"))
			if (len(left) == 1) != tc.kept || len(left) > 1 {
				t.Fatalf("work directories left: %v, want kept=%v", left, tc.kept)
			}
			if said := strings.Contains(r.stderr, "kcrash: the work directory "+strings.Join(left, "")+" is kept"); said != tc.kept {
				t.Fatalf("stderr %q", r.stderr)
			}
		})
	}
}

// After a crash the work directory goes when the bundle holds all of it, and
// stays, named in the manifest, when the kernel-API log outgrew the tail.
func TestRunWorkdirKeptOnlyWhenNeeded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes int
		kept  bool
	}{{"small log", 1000, false}, {"log beyond the tail", 9 << 20, true}} {
		t.Run(tc.name, func(t *testing.T) {
			tmp, out := t.TempDir(), t.TempDir()
			script := fmt.Sprintf(`f=$(echo "$SGLANG_KERNEL_API_LOGDEST" | sed "s/%%i/$$/"); head -c %d /dev/zero | tr '\0' x > "$f"; exit 3`, tc.bytes)
			r := runKcrash(t, 60*time.Second, []string{"TMPDIR=" + tmp}, "run", "-q", "--out", out, "--skip-collectors", "kmsg", "--", "sh", "-c", script)
			if r.code != 3 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			left, _ := filepath.Glob(filepath.Join(tmp, "kcrash-run-*"))
			if (len(left) == 1) != tc.kept {
				t.Fatalf("work directories left: %v, want kept=%v", left, tc.kept)
			}
			b := oneBundle(t, out)
			noted := strings.Contains(strings.Join(b.Manifest.Notes, "\n"), "is kept")
			if noted != tc.kept {
				t.Fatalf("notes %v", b.Manifest.Notes)
			}
		})
	}
}
