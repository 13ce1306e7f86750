package collectors

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/procfs"
)

func TestAttributionRules(t *testing.T) {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := start.Add(d); return &v }
	proc := t.TempDir()
	// 7001 is a live worker thread of process 700 (the tracker records processes).
	if err := os.MkdirAll(filepath.Join(proc, "7001"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(proc, "7001", "status"), []byte("Name:\tpt_autograd_0\nTgid:\t700\nPid:\t7001\n"), 0o644)
	os.MkdirAll(filepath.Join(proc, "9001"), 0o755)
	os.WriteFile(filepath.Join(proc, "9001", "status"), []byte("Name:\tother\nTgid:\t9000\nPid:\t9001\n"), 0o644)

	env := NewEnv()
	env.ProcRoot = proc
	env.Start = start
	env.Since = start.Add(-30 * time.Second)
	env.RootPid = 600
	env.Tree = kmsgTree{
		{Pid: 600, StartTime: start, LastSeen: start.Add(time.Hour)},
		{Pid: 700, PPid: 600, StartTime: start.Add(10 * time.Second), LastSeen: start.Add(time.Hour)},
		// A worker that died at 5 min: the kernel's line about its death
		// comes a little after the last sample.
		{Pid: 800, PPid: 600, StartTime: start.Add(time.Minute), LastSeen: start.Add(5 * time.Minute), Exited: true},
	}
	a := newAttributor(env, start.Add(10*time.Minute), nil)

	cases := []struct {
		name string
		f    evidence.Finding
		want string
	}{
		{"child's page fault", evidence.Finding{Kind: evidence.GPUPageFault, Pid: 700, GPU: "0000:c6:00.0", Time: at(time.Minute)}, AttrPidInTree},
		{"root pid", evidence.Finding{Kind: evidence.NativeCrash, Pid: 600, Time: at(time.Minute)}, AttrPidInTree},
		{"dead descendant, at its death", evidence.Finding{Kind: evidence.HostOOM, Pid: 800, Time: at(5*time.Minute + 2*time.Second)}, AttrPidInTree},
		{"dead descendant's pid reused much later", evidence.Finding{Kind: evidence.NativeCrash, Pid: 800, Time: at(9 * time.Minute)}, AttrUnrelated},
		{"pid before its process started", evidence.Finding{Kind: evidence.NativeCrash, Pid: 700, Time: at(0)}, AttrUnrelated},
		{"thread of a tree process", evidence.Finding{Kind: evidence.NativeCrash, Pid: 7001, Time: at(time.Minute)}, AttrPidInTree},
		{"thread of another process", evidence.Finding{Kind: evidence.NativeCrash, Pid: 9001, Time: at(time.Minute)}, AttrUnrelated},
		{"no time: pid decides", evidence.Finding{Kind: evidence.NativeCrash, Pid: 800}, AttrPidInTree},
		{"another process's Xid", evidence.Finding{Kind: evidence.GPUIllegalMemoryAccess, Pid: 4242, Xid: 13, GPU: "0000:cb:00.0", Time: at(time.Minute)}, AttrUnrelated},
		{"Xid without pid in the window", evidence.Finding{Kind: evidence.GPUIllegalMemoryAccess, Xid: 13, GPU: "0000:cb:00.0", Time: at(time.Minute)}, AttrDeviceInWindow},
		{"GPU reset in the margin before the start", evidence.Finding{Kind: evidence.GPUHang, GPU: "0000:0c:00.0", Time: at(-10 * time.Second)}, AttrDeviceInWindow},
		{"GPU reset before the window", evidence.Finding{Kind: evidence.GPUHang, GPU: "0000:0c:00.0", Time: at(-time.Hour)}, AttrUnrelated},
		{"GPU reset after collection", evidence.Finding{Kind: evidence.GPUHang, GPU: "0000:0c:00.0", Time: at(time.Hour)}, AttrUnrelated},
		{"ECC error tripped by another process", evidence.Finding{Kind: evidence.GPUHardwareError, Pid: 4242, Xid: 48, GPU: "0000:07:00.0", Time: at(time.Minute)}, AttrDeviceInWindow},
		{"device event without time", evidence.Finding{Kind: evidence.GPUHardwareError, Xid: 79}, AttrDeviceInWindow},
		{"another process's segfault", evidence.Finding{Kind: evidence.NativeCrash, Pid: 4242, Time: at(time.Minute)}, AttrUnrelated},
		{"host event without pid", evidence.Finding{Kind: evidence.Unknown, Text: "watchdog: BUG: soft lockup - CPU#3 stuck for 22s!", Time: at(time.Minute)}, AttrUnrelated},
	}
	for _, c := range cases {
		if got := a.attribute(c.f); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}

	// `kcrash collect`: no tree, no root; only device-wide events tie.
	bare := NewEnv()
	bare.Since = env.Since
	b := newAttributor(bare, start.Add(10*time.Minute), nil)
	if got := b.attribute(evidence.Finding{Kind: evidence.NativeCrash, Pid: 600, Time: at(time.Minute)}); got != AttrUnrelated {
		t.Errorf("no tree: pid finding %s", got)
	}
	if got := b.attribute(evidence.Finding{Kind: evidence.GPUHang, GPU: "0000:0c:00.0", Time: at(time.Minute)}); got != AttrDeviceInWindow {
		t.Errorf("no tree: device finding %s", got)
	}
}

// A visible-devices setting the driver lets us map proves a device event
// on another GPU unrelated; anything else leaves it device-in-window.
func TestAttributionNvidiaVisibleDevices(t *testing.T) {
	proc := t.TempDir()
	gpus := map[string]string{
		"0000:3b:00.0": "GPU-760d0170-b7c5-6817-9414-6cc7112645de",
		"0000:86:00.0": "GPU-1a2b3c4d-0000-1111-2222-333344445555",
		"0000:af:00.0": "GPU-1a2b9999-0000-1111-2222-333344445555",
	}
	for pci, uuid := range gpus {
		d := filepath.Join(proc, "driver", "nvidia", "gpus", pci)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "information"), []byte("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 123\nGPU UUID: \t "+uuid+"\nVideo BIOS: \t 96.00.74.00.01\n"), 0o644)
	}
	usable := func(s *attrGPUScope, gpu string) bool { return s.usable(gpu) }
	cases := []struct {
		name    string
		env     []string
		nilOK   bool // the setting cannot be mapped: every GPU
		visible []string
		hidden  []string
	}{
		{"unset", []string{"PATH=/bin"}, true, nil, nil},
		{"uuid", []string{"CUDA_VISIBLE_DEVICES=GPU-760d0170-b7c5-6817-9414-6cc7112645de"}, false,
			[]string{"0000:3b:00.0", "PCI:0000:3b:00", "0000:c6:00.0" /* not NVIDIA's */}, []string{"0000:86:00.0", "0000:af:00.0"}},
		{"uuid prefix", []string{"CUDA_VISIBLE_DEVICES=GPU-760d,GPU-1a2b3c"}, false,
			[]string{"0000:3b:00.0", "0000:86:00.0"}, []string{"0000:af:00.0"}},
		{"ambiguous prefix", []string{"CUDA_VISIBLE_DEVICES=GPU-1a2b"}, true, nil, nil},
		{"indices in PCI order", []string{"CUDA_VISIBLE_DEVICES=2", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}, false,
			[]string{"0000:af:00.0"}, []string{"0000:3b:00.0", "0000:86:00.0"}},
		{"indices in CUDA's default order", []string{"CUDA_VISIBLE_DEVICES=2"}, true, nil, nil},
		{"stops at an invalid entry", []string{"CUDA_VISIBLE_DEVICES=0,-1,2", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}, false,
			[]string{"0000:3b:00.0"}, []string{"0000:86:00.0", "0000:af:00.0"}},
		{"MIG", []string{"CUDA_VISIBLE_DEVICES=MIG-0c7bd0e4-6a7f-5e9c-8d3b-1f2e3d4c5b6a"}, true, nil, nil},
		{"none", []string{"CUDA_VISIBLE_DEVICES="}, false, []string{"0000:c6:00.0"}, []string{"0000:3b:00.0", "0000:86:00.0"}},
	}
	for _, c := range cases {
		s := attrNvidiaScope(proc, c.env)
		if (s == nil) != c.nilOK {
			t.Errorf("%s: scope %+v, want nil %v", c.name, s, c.nilOK)
			continue
		}
		for _, g := range c.visible {
			if !usable(s, g) {
				t.Errorf("%s: %s not usable", c.name, g)
			}
		}
		for _, g := range c.hidden {
			if usable(s, g) {
				t.Errorf("%s: %s usable", c.name, g)
			}
		}
	}

	env := NewEnv()
	env.Since = time.Now().Add(-time.Minute)
	a := newAttributor(env, time.Now(), attrNvidiaScope(proc, []string{"CUDA_VISIBLE_DEVICES=GPU-760d"}))
	now := time.Now()
	for gpu, want := range map[string]string{"0000:3b:00.0": AttrDeviceInWindow, "0000:86:00.0": AttrUnrelated} {
		if got := a.attribute(evidence.Finding{Kind: evidence.GPUHardwareError, Xid: 79, GPU: gpu, Time: &now}); got != want {
			t.Errorf("Xid 79 on %s: %s, want %s", gpu, got, want)
		}
	}
	// Without a driver listing nothing can be proven.
	if s := attrNvidiaScope(t.TempDir(), []string{"CUDA_VISIBLE_DEVICES=0"}); s != nil {
		t.Errorf("scope without /proc/driver/nvidia: %+v", s)
	}
}

func TestAttributionPCISpellings(t *testing.T) {
	for in, want := range map[string]string{
		"PCI:0000:3B:00":      "0000:3b:00",
		"0000:3b:00.0":        "0000:3b:00",
		"3b:00.0":             "0000:3b:00",
		"0000:01:00 GPU-I:05": "0000:01:00",
		"0003:00:00":          "0003:00:00",
	} {
		if got := attrPCI(in); got != want {
			t.Errorf("attrPCI(%q) = %q, want %q", in, got, want)
		}
	}
}

// observeTree reads the tree's environments and memory cgroups under the
// Env's proc root: the root process's own, once; a process whose environ
// cannot be read (gone, or not ours) is tried again later.
func TestKmsgObserveTreeProcRoot(t *testing.T) {
	proc := t.TempDir()
	for pid, files := range map[string]map[string]string{
		"100": {"environ": "A=1\x00CUDA_VISIBLE_DEVICES=0,1\x00\x00", "cgroup": "9:memory:/slurm/uid_0/job_12/step_0\n0::/\n"},
		"101": {"cgroup": "0::/worker\n"},
	} {
		os.MkdirAll(filepath.Join(proc, pid), 0o755)
		for name, data := range files {
			os.WriteFile(filepath.Join(proc, pid, name), []byte(data), 0o644)
		}
	}
	env := NewEnv()
	env.ProcRoot, env.SysRoot, env.RootPid = proc, t.TempDir(), 100
	env.Tree = kmsgTree{{Pid: 100}, {Pid: 101}}
	var k kmsgCollector
	k.observeTree(env)
	if !k.scopes.seen[100] || k.scopes.seen[101] {
		t.Errorf("seen %v, want 100 only", k.scopes.seen)
	}
	if len(k.memcgs) != 2 || !k.memcgs["/slurm/uid_0/job_12/step_0"] || !k.memcgs["/worker"] {
		t.Errorf("memcgs %v", k.memcgs)
	}
}

// The tree's scopes merge: a descendant that may use another GPU widens the
// run's; one without any restriction makes every GPU the run's.
func TestAttributionScopesMerge(t *testing.T) {
	mk := func(vis ...string) *attrGPUScope {
		s := &attrGPUScope{known: map[string]bool{"0000:3b:00": true, "0000:86:00": true, "0000:af:00": true}, visible: map[string]bool{}}
		for _, v := range vis {
			s.visible[v] = true
		}
		return s
	}
	var s attrScopes
	if s.scope() != nil {
		t.Fatal("no environment read: want every GPU")
	}
	s.add(1, mk("0000:3b:00"))
	s.add(2, mk("0000:86:00"))
	got := s.scope()
	if got == nil || !got.usable("0000:3b:00.0") || !got.usable("0000:86:00.0") || got.usable("0000:af:00.0") {
		t.Errorf("merged scope %+v", got)
	}
	s.add(3, nil)
	s.add(4, mk("0000:3b:00"))
	if s.scope() != nil || !s.seen[4] {
		t.Errorf("an unrestricted process leaves scope %+v", s.scope())
	}
}

// A worker OOM-killed between two samples is named by the kernel with a pid
// the tracker never saw; its memory cgroup is the run's.
func TestAttributionMemcgOfTree(t *testing.T) {
	proc := t.TempDir()
	for pid, data := range map[string]string{"1": "12:pids:/x\n9:memory:/slurm/uid_0/job_12/step_0\n1:name=systemd:/x\n0::/x\n", "2": "9:memory:/\n0::/\n"} {
		os.MkdirAll(filepath.Join(proc, pid), 0o755)
		os.WriteFile(filepath.Join(proc, pid, "cgroup"), []byte(data), 0o644)
	}
	fs := procfs.FS{Root: proc}
	if got := attrMemcgs(fs, 1); len(got) != 2 || got[0] != "/slurm/uid_0/job_12/step_0" || got[1] != "/x" {
		t.Fatalf("attrMemcgs = %v", got)
	}
	if got := attrMemcgs(fs, 2); len(got) != 0 {
		t.Fatalf("root cgroup kept: %v", got)
	}
	if got := attrMemcgs(fs, 3); got != nil {
		t.Fatalf("a process that is gone: %v", got)
	}
	now := time.Now()
	env := &Env{Start: now.Add(-time.Minute), RootPid: 100}
	a := newAttributor(env, now.Add(time.Minute), nil)
	a.memcgs = map[string]bool{"/slurm/uid_0/job_12/step_0": true}
	in := evidence.Finding{Kind: evidence.HostOOM, Pid: 4242, Time: &now, Details: map[string]any{"task_memcg": "/slurm/uid_0/job_12/step_0"}}
	if got := a.attribute(in); got != AttrMemcgOfTree {
		t.Fatalf("attribute = %q, want %q", got, AttrMemcgOfTree)
	}
	other := in
	other.Details = map[string]any{"task_memcg": "/other"}
	if got := a.attribute(other); got != AttrUnrelated {
		t.Fatalf("other cgroup: %q", got)
	}
}

// AMD: ROCR_VISIBLE_DEVICES then HIP_VISIBLE_DEVICES select KFD GPU nodes in
// node order; a device-wide event on another card is not the run's.
func TestAttributionAMDVisibleDevices(t *testing.T) {
	sys := filepath.Join("testdata", "sys", "amd-8card")
	all := attrAMDScope(sys, []string{"HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"})
	if all == nil || len(all.known) != 8 || len(all.visible) != 8 {
		t.Fatalf("all GPUs: %+v", all)
	}
	// node 1 has location_id 3072 = bus 0x0c
	s := attrAMDScope(sys, []string{"ROCR_VISIBLE_DEVICES=2,0", "HIP_VISIBLE_DEVICES=1"})
	if s == nil || len(s.visible) != 1 || !s.visible["0000:0c:00"] {
		t.Fatalf("ROCR 2,0 then HIP 1 should leave the first GPU (bus 0c): %+v", s)
	}
	if !s.usable("0000:0c:00.0") || s.usable("0000:22:00.0") {
		t.Fatal("usable() disagrees with the visible set")
	}
	if !s.usable("0000:ff:00.0") {
		t.Fatal("a GPU the topology does not list must count as usable")
	}
	if attrAMDScope(sys, nil) != nil || attrAMDScope(sys, []string{"HIP_VISIBLE_DEVICES=GPU-unknown"}) != nil {
		t.Fatal("no restriction, or one that cannot be mapped, must mean every GPU")
	}
	if attrAMDScope(t.TempDir(), []string{"HIP_VISIBLE_DEVICES=0"}) != nil {
		t.Fatal("no KFD topology: no mapping")
	}
}
