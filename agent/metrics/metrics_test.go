package metrics

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
)

var update = flag.Bool("update", false, "rewrite testdata/*.prom from what Render gives")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update after checking):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var base = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// rec is a kernel record (facility 0) arriving at base+at.
func rec(at time.Duration, text string) *journal.Entry {
	return &journal.Entry{Boot: "boot", Wall: base.Add(at), Rec: api.Record{Level: 3, Text: text}}
}

// Records as the kernel writes them (texts from the corpus in
// testdata/corpus, without the dmesg/syslog prefixes).
func observeCorpus(m *Metrics) {
	ms := time.Millisecond
	for _, e := range []*journal.Entry{
		// an amdgpu fault: two records of one report, one event
		rec(0, "amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)"),
		rec(1*ms, "amdgpu 0000:c6:00.0: amdgpu:   in page starting at address 0x0000ae8570611000 from IH client 0x1b (UTCL2)"),
		// the same GPU faulting again two seconds later: a second event
		rec(2*time.Second, "amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)"),
		// an Xid 13 burst (one), then Xid 109 on the same GPU
		rec(10*time.Second, "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"),
		rec(10*time.Second+ms, "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Global Exception on (GPC 7, TPC 7, SM 0): Multiple Warp Errors"),
		rec(10*time.Second+2*ms, "NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005"),
		rec(11*time.Second, "NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fdd60000 partition"),
		// one record of three lines
		rec(12*time.Second, "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\nNVRM: fallen off the bus and is not responding to commands."),
		// a ring timeout names no GPU; the reset that follows does
		rec(20*time.Second, "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=16060, emitted seq=16062"),
		rec(20*time.Second+ms, "amdgpu 0000:0a:00.0: amdgpu: GPU reset begin!"),
		rec(21*time.Second, "amdgpu 0000:03:00.0: amdgpu: 1 uncorrectable hardware errors detected in umc block"),
		// an OOM report: one kill, however many lines say so
		rec(30*time.Second, "pool invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0"),
		rec(30*time.Second+ms, "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-21417.slice/user@21417.service,task=perl,pid=1440763,uid=21417"),
		rec(30*time.Second+ms, "Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, anon-rss:60356340kB, file-rss:0kB, shmem-rss:0kB, UID:21417 pgtables:169956kB oom_score_adj:0"),
		rec(35*time.Second, "oom_reaper: reaped process 1440763 (perl), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB"),
		// not GPU or memory trouble
		rec(40*time.Second, "python2[4598]: segfault at da84cf8 ip 00007f7b2cbac94d sp 00007ffe4e250b60 error 4 in libc-2.27.so[7f7b2cb15000+1e7000]"),
		rec(41*time.Second, "usb 1-1: new high-speed USB device number 2 using xhci_hcd"),
		// written by a user-space process (facility 1): never counted
		{Boot: "boot", Wall: base.Add(50 * time.Second), Rec: api.Record{Facility: 1, Text: "NVRM: Xid (PCI:0000:cb:00): 79, pid=1, name=x, GPU has fallen off the bus."}},
		// a gap is the journal's number, not an event
		{Boot: "boot", Wall: base.Add(51 * time.Second), Gap: &journal.GapInfo{From: 10, To: 20, Why: "overwritten"}},
		nil,
	} {
		m.Observe(e)
	}
	for _, v := range []string{"gpu_page_fault", "gpu_page_fault", "host_oom", "not-a-kind", ""} {
		m.Crash(api.CrashNotice{Verdict: v})
	}
}

func TestRenderGolden(t *testing.T) {
	m := New(Config{
		Journal: func() api.JournalStats {
			return api.JournalStats{Records: 123456, Bytes: 45 << 20, Gaps: 2, Lost: 17, Newest: base.Add(41*time.Second + 250*time.Millisecond)}
		},
		GPU: func() api.GPUStats {
			return api.GPUStats{Tools: []string{"nvidia-smi"}, Samples: 1800, LastSample: base.Add(42 * time.Second)}
		},
	})
	observeCorpus(m)
	golden(t, "corpus.prom", m.Render())
}

// Nothing seen and no health sources: every verdict at zero, nothing else.
func TestRenderEmptyGolden(t *testing.T) {
	golden(t, "empty.prom", New(Config{}).Render())
}

// GPUs past the cap count under gpu="other"; a journal that cannot read
// /dev/kmsg says so.
func TestRenderBoundsGolden(t *testing.T) {
	m := New(Config{MaxGPUs: 3, Journal: func() api.JournalStats { return api.JournalStats{ReadingErr: "open /dev/kmsg: permission denied"} }})
	for i := range 6 {
		m.Observe(rec(time.Duration(i)*time.Millisecond, fmt.Sprintf("NVRM: Xid (PCI:0000:%02x:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", i+1)))
	}
	golden(t, "bounds.prom", m.Render())
}

// The series cap folds new series into one, whatever the Xid numbers.
func TestEventSeriesCap(t *testing.T) {
	m := New(Config{})
	for i := range maxEventSeries + 50 {
		gpu, xid := i%DefaultMaxGPUs, 1+i/DefaultMaxGPUs
		m.Observe(rec(time.Duration(i)*time.Millisecond, fmt.Sprintf("NVRM: Xid (PCI:0000:%02x:00): %d, pid='<unknown>', name=<unknown>, x", gpu+1, xid)))
	}
	if n := len(m.events); n != maxEventSeries+1 {
		t.Fatalf("%d event series, want the cap %d and the fold", n, maxEventSeries)
	}
	if c := m.events[eventKey{GPUOther, KindOther}]; c != 50 {
		t.Errorf("folded %d events, want 50", c)
	}
}

func TestEscapes(t *testing.T) {
	for _, l := range strings.Split(string(New(Config{}).Render()), "\n") {
		if f := strings.Fields(l); len(f) > 2 && !strings.HasPrefix(l, "#") {
			t.Errorf("a timestamp or stray field: %q", l)
		}
	}
}

// The file is replaced whole: mode 0644, no temporary left, and Run writes
// again when the numbers change and a last time when stopped.
func TestWriteFileAndRun(t *testing.T) {
	dir := t.TempDir()
	m := New(Config{})
	if err := m.WriteFile(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("stat %v mode %v", err, fi.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left in the directory: %v", ents)
	}
	if err := m.WriteFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("write into a missing directory succeeded")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx, dir, 10*time.Millisecond); close(done) }()
	m.Crash(api.CrashNotice{Verdict: "gpu_hang"})
	read := func() string { b, _ := os.ReadFile(path); return string(b) }
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(read(), `kcrash_crashes_total{verdict="gpu_hang"} 1`); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the crash was not written:\n%s", read())
		}
	}
	// a change just before the stop is in the final write
	m.Crash(api.CrashNotice{Verdict: "hang"})
	cancel()
	<-done
	if !strings.Contains(read(), `kcrash_crashes_total{verdict="hang"} 1`) || m.WriteError() != nil {
		t.Errorf("final write: err %v\n%s", m.WriteError(), read())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left in the directory: %v", ents)
	}
}

// The cost per kernel record, which the agent pays for every record. An
// irrelevant record costs under a microsecond (kernlog's pre-filter); an
// Xid row tens, and those are rare.
func BenchmarkObserve(b *testing.B) {
	m := New(Config{})
	recs := []*journal.Entry{
		rec(0, "usb 1-1: new high-speed USB device number 2 using xhci_hcd"),
		rec(0, "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none."),
		rec(0, "audit: type=1400 audit(1700000000.000:42): apparmor=\"DENIED\" operation=\"open\" profile=\"snap\" name=\"/proc/1/environ\" pid=4242 comm=\"python3\""),
		rec(0, "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"),
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := recs[i%len(recs)]
		e.Wall = base.Add(time.Duration(i) * time.Millisecond)
		m.Observe(e)
		i++
	}
}
