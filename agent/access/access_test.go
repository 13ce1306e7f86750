package access

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/kernlog"
)

// corpusEntries reads lines from..to of a corpus file as journal entries of
// one boot, with their printk times, as the agent would have read them.
func corpusEntries(t *testing.T, file string, from, to int) []*journal.Entry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testcorpus.Dir(t), file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []*journal.Entry
	for n := from; n <= to; n++ {
		l := kernlog.SplitPrefix(lines[n-1], n, 0)
		e := &journal.Entry{Boot: "boot-1", Rec: api.Record{Seq: uint64(n), Text: l.Text}}
		if l.Mono != nil {
			e.Rec.Mono = *l.Mono
		}
		out = append(out, e)
	}
	return out
}

func annotateAll(a *Annotator, es []*journal.Entry) {
	var prev *journal.Entry
	for _, e := range es {
		a.Annotate(prev, e)
		prev = e
	}
}

// TestAnnotateAMDFault: the fault's process line names the process with
// its owner and cgroup; every line names the GPU with the processes that
// held its render node, /dev/kfd included.
func TestAnnotateAMDFault(t *testing.T) {
	p := newProcTree(t)
	p.process(12924, 1, 1000, 5000, "pt_main_thread", "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0")
	p.process(13000, 1, 1001, 5100, "python3", "/user.slice/user-1001.slice/session-3.scope")
	p.process(13100, 1, 1002, 5200, "rocm-smi", "/user.slice/user-1002.slice/session-4.scope")
	p.process(13200, 1, 1003, 5300, "bash", "/user.slice/user-1003.slice/session-5.scope")
	p.amdGPU("0000:c6:00.0", 1, 129)
	p.amdGPU("0000:c1:00.0", 0, 128)
	p.holds(12924, 5, "dri/renderD129")
	p.holds(13000, 7, "kfd")       // ROCm's compute path reaches every AMD GPU
	p.holds(13100, 3, "dri/card0") // another GPU
	p.holds(13200, 0, "pts/0")
	a := &Annotator{Tracker: &Tracker{ProcRoot: p.proc}, ProcRoot: p.proc, SysRoot: p.sys, DevRoot: p.dev}
	es := corpusEntries(t, "1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt", 4, 7)
	annotateAll(a, es)

	holders := []journal.Holder{
		{Pid: 12924, UID: 1000, Cgroup: "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0"},
		{Pid: 13000, UID: 1001, Cgroup: "/user.slice/user-1001.slice/session-3.scope"},
	}
	dev := []journal.Device{{BDF: "0000:c6:00.0", Holders: holders, Nodes: []string{"c 226:1", "c 226:129"}}}
	if got := es[0].Subject; !reflect.DeepEqual(got, journal.Subject{Devices: dev}) {
		t.Errorf("header line: %+v", got)
	}
	want := journal.Subject{
		Procs:   []journal.Proc{{Pid: 12924, UID: 1000, Cgroup: "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0"}},
		Devices: dev,
	}
	if got := es[1].Subject; !reflect.DeepEqual(got, want) {
		t.Errorf("process line: %+v\nwant %+v", got, want)
	}
	// The address and status lines after it name the device alone: they
	// are the faulting process's report too.
	for _, e := range es[2:] {
		if got := e.Subject; !reflect.DeepEqual(got.Procs, want.Procs) || !got.Inherited {
			t.Errorf("%q: %+v, want the process line's processes, inherited", e.Rec.Text, got)
		}
	}
}

// TestAnnotateNVIDIAHolders: /dev/nvidiaN is found through the driver's
// Device Minor.
func TestAnnotateNVIDIAHolders(t *testing.T) {
	p := newProcTree(t)
	p.process(13332, 1, 1000, 100, "cuda_plot_k32_v", "/user.slice/user-1000.slice/session-1.scope")
	p.process(14000, 1, 1001, 200, "python", "/user.slice/user-1001.slice/session-2.scope")
	p.nvidiaGPU("0000:0a:00.0", 2)
	p.nvidiaGPU("0000:0b:00.0", 3)
	p.holds(13332, 4, "nvidia3")
	p.holds(14000, 4, "nvidia2")
	p.holds(14000, 5, "nvidiactl") // every CUDA process holds it: no GPU in particular
	a := &Annotator{Tracker: &Tracker{ProcRoot: p.proc}, ProcRoot: p.proc, SysRoot: p.sys, DevRoot: p.dev}
	es := corpusEntries(t, "3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt", 5, 6)
	annotateAll(a, es)
	want := journal.Subject{
		Procs: []journal.Proc{{Pid: 13332, UID: 1000, Cgroup: "/user.slice/user-1000.slice/session-1.scope"}},
		Devices: []journal.Device{{BDF: "0000:0a:00.0", Holders: []journal.Holder{{Pid: 14000, UID: 1001, Cgroup: "/user.slice/user-1001.slice/session-2.scope"}},
			Nodes: []string{"c 195:2"}}}, // NVIDIA's fixed major, the driver's Device Minor
	}
	if got := es[0].Subject; !reflect.DeepEqual(got, want) {
		t.Errorf("Xid 31: %+v\nwant %+v", got, want)
	}
	// Xid 62 names no process: the GPU and its holder only.
	if got := es[1].Subject; len(got.Procs) != 0 || len(got.Devices) != 1 || got.Inherited {
		t.Errorf("Xid 62: %+v", got)
	}
}

// TestAnnotateOOMGoneAndContinuation: the OOM victim is gone before the
// record is read; the text's uid= and task_memcg= are its owner. The OOM
// report's unnamed lines continue the line before them, within 50 ms only.
func TestAnnotateOOMGoneAndContinuation(t *testing.T) {
	p := newProcTree(t)
	p.process(940, 1, 1000, 100, "sunloginclient", "/user.slice/user-1000.slice/session-1.scope")
	a := &Annotator{Tracker: &Tracker{ProcRoot: p.proc}, ProcRoot: p.proc, SysRoot: p.sys, DevRoot: p.dev}

	es := corpusEntries(t, "4-oom-killer/global-oom-python-then-next-invocation-calltrace.txt", 4, 12)
	es[0].Rec.Mono = es[1].Rec.Mono // the paste lost this line's time; the kernel printed it just before
	annotateAll(a, es)
	victim := journal.Subject{Procs: []journal.Proc{{Pid: 698405, UID: 1000, Cgroup: "/user.slice/user-1000.slice/user@1000.service"}}}
	if got := es[0].Subject; !reflect.DeepEqual(got, victim) {
		t.Errorf("oom-kill: %+v", got)
	}
	if got := es[1].Subject.Procs; len(got) != 1 || got[0].Pid != 698405 || got[0].UID != 1000 {
		t.Errorf("Killed process: %+v", got)
	}
	if got := es[3].Subject; len(got.Procs) != 0 || got.Inherited {
		t.Errorf("'invoked oom-killer' names nothing and comes long after the reaper: %+v", got)
	}
	trigger := []journal.Proc{{Pid: 940, UID: 1000, Cgroup: "/user.slice/user-1000.slice/session-1.scope"}}
	if got := es[4].Subject; !reflect.DeepEqual(got.Procs, trigger) || got.Inherited {
		t.Errorf("CPU: PID: line: %+v", got)
	}
	for _, e := range es[5:] {
		if !e.Subject.Inherited || !reflect.DeepEqual(e.Subject.Procs, trigger) {
			t.Errorf("%q: %+v, want the trigger's subject inherited", e.Rec.Text, e.Subject)
		}
	}

	// Past the window, or across a boot, nothing is inherited.
	late := *es[5]
	late.Subject = journal.Subject{}
	late.Rec.Mono = es[4].Rec.Mono + ContinuationWindow + time.Millisecond
	a.Annotate(es[4], &late)
	other := *es[5]
	other.Subject = journal.Subject{}
	other.Boot = "boot-2"
	a.Annotate(es[4], &other)
	if late.Subject.Inherited || late.Subject.Procs != nil || other.Subject.Procs != nil {
		t.Errorf("late %+v, other boot %+v", late.Subject, other.Subject)
	}
}

func TestTrackerExitedKeptAndBounded(t *testing.T) {
	p := newProcTree(t)
	p.process(100, 1, 1000, 10, "a", "/x/y/a")
	p.process(101, 100, 1000, 11, "b", "/x/y/a")
	p.process(102, 101, 1001, 12, "c", "/x/y/c")
	p.process(200, 1, 1001, 20, "d", "/x/y/d")
	tr := &Tracker{ProcRoot: p.proc, Keep: time.Hour, Max: 10}
	tr.Scan()
	if tr.Len() != 4 {
		t.Fatalf("tracked %d, want 4", tr.Len())
	}
	p.exit(102)
	p.exit(200)
	tr.Scan()
	if info, ok := tr.Lookup(102); !ok || info.UID != 1001 || info.PPid != 101 || info.Exited.IsZero() {
		t.Errorf("exited 102: %+v %v", info, ok)
	}
	if !tr.IsDescendant(102, 100) || !tr.IsDescendant(101, 100) || !tr.IsDescendant(100, 100) {
		t.Error("102 → 101 → 100 not a descendant chain")
	}
	if tr.IsDescendant(200, 100) || tr.IsDescendant(100, 101) {
		t.Error("unrelated or upward pids taken as descendants")
	}
	// pid 101 is reused by a process started after 102: 102's parent is gone.
	p.exit(101)
	p.process(101, 1, 1002, 50, "new", "/x/y/new")
	tr.Scan()
	if tr.IsDescendant(102, 100) {
		t.Error("a reused parent pid kept the chain")
	}
	// Max: the longest-exited goes first, the living stay.
	p.exit(100)
	tr.mu.Lock()
	tr.scanLocked(time.Now().Add(time.Minute)) // 100 exits a minute after 102 and 200
	tr.mu.Unlock()
	tr.Max = 3
	tr.Scan()
	if tr.Len() != 3 {
		t.Errorf("tracked %d, want Max 3", tr.Len())
	}
	if _, ok := tr.Lookup(100); !ok {
		t.Error("the most recently exited process dropped first")
	}
	if _, ok := tr.Lookup(101); !ok {
		t.Error("a living process dropped")
	}
	// Keep: exited entries past it are forgotten.
	tr.mu.Lock()
	tr.scanLocked(time.Now().Add(2 * time.Hour))
	tr.mu.Unlock()
	for _, pid := range []int{100, 102, 200} {
		if _, ok := tr.Lookup(pid); ok {
			t.Errorf("%d kept past Keep", pid)
		}
	}
	if _, ok := tr.Lookup(101); !ok {
		t.Error("a living process forgotten")
	}
}

func TestPeerJobAndSubtree(t *testing.T) {
	for _, c := range []struct{ path, job string }{
		{"/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0", "1234"},
		{"/slurm/uid_1000/job_77/step_batch/task_0", "77"},
		{"/user.slice/user-1000.slice/session-3.scope", ""},
		{"/job_x/job_", ""},
	} {
		if got := JobFromCgroup(c.path); got != c.job {
			t.Errorf("JobFromCgroup(%q) = %q, want %q", c.path, got, c.job)
		}
	}
	for _, c := range []struct {
		path, parent string
		in           bool
	}{
		{"/a/b/c", "/a/b", true},
		{"/a/b", "/a/b", true},
		{"/a/bc", "/a/b", false},
		{"/user.slice/x", "/user.slice", false}, // a top-level slice is everyone's
		{"/a", "/", false},
	} {
		if got := InSubtree(c.path, c.parent); got != c.in {
			t.Errorf("InSubtree(%q, %q) = %v", c.path, c.parent, got)
		}
	}
}

func TestVisibleRules(t *testing.T) {
	p := newProcTree(t)
	p.process(500, 1, 1000, 10, "kcrash", "/user.slice/user-1000.slice/session-1.scope/run")
	p.process(501, 500, 1003, 11, "job", "/user.slice/user-1000.slice/session-1.scope/run2")
	tr := &Tracker{ProcRoot: p.proc}
	tr.Scan()

	alice := Peer{UID: 1000, GID: 1000, PID: 500, StartTime: 10, Cgroup: "/system.slice/slurmstepd.scope/job_9/step_0/user/task_0", Job: "9"}
	bob := Peer{UID: 1001, GID: 1001}
	root := Peer{UID: 0}
	proc := func(pid, uid int, cg string) journal.Subject {
		return journal.Subject{Procs: []journal.Proc{{Pid: pid, UID: uid, Cgroup: cg}}}
	}
	gpu := func(uid int, cg string) journal.Subject {
		return journal.Subject{Devices: []journal.Device{{BDF: "0000:0a:00.0", Holders: []journal.Holder{{Pid: 9, UID: uid, Cgroup: cg}}}}}
	}
	kern := func(text string, s journal.Subject) *journal.Entry {
		return &journal.Entry{Rec: api.Record{Text: text}, Subject: s}
	}
	user := func(text string) *journal.Entry {
		return &journal.Entry{Rec: api.Record{Text: text, Facility: 1}}
	}
	cases := []struct {
		name string
		peer Peer
		e    *journal.Entry
		mark string
		want bool
	}{
		{"own uid", alice, kern("x", proc(7, 1000, "")), "", true},
		{"another uid", alice, kern("x", proc(7, 1001, "/user.slice/user-1001.slice/s.scope")), "", false},
		{"unknown owner", alice, kern("x", proc(7, -1, "")), "", false},
		{"own Slurm job, other uid", alice, kern("x", proc(7, 1002, "/system.slice/slurmstepd.scope/job_9/step_1/user/task_0")), "", true},
		{"another Slurm job", alice, kern("x", proc(7, 1002, "/system.slice/slurmstepd.scope/job_10/step_0/user/task_0")), "", false},
		{"own cgroup subtree", alice, kern("x", proc(7, 1002, "/system.slice/slurmstepd.scope/job_9/step_0/user/task_0/sub")), "", true},
		{"another uid in the caller's shared cgroup", Peer{UID: 1000, Cgroup: "/process_api/abc"}, kern("x", proc(7, 1001, "/process_api/abc")), "", false},
		{"unknown owner in the caller's cgroup", Peer{UID: 1000, Cgroup: "/process_api/abc"}, kern("x", proc(7, -1, "/process_api/abc/x")), "", true},
		{"descendant of the peer's pid", alice, kern("x", proc(501, 1003, "")), "", true},
		{"descendant, but the peer's pid was reused", Peer{UID: 1000, PID: 500, StartTime: 99}, kern("x", proc(501, 1003, "")), "", false},
		{"one of two processes is the peer's", alice, kern("x", journal.Subject{Procs: []journal.Proc{{Pid: 7, UID: 1001}, {Pid: 8, UID: 1000}}}), "", true},
		{"GPU held by own uid", alice, kern("x", gpu(1000, "")), "", true},
		{"GPU held by own job", alice, kern("x", gpu(1004, "/slurm/uid_1004/job_9/step_0")), "", true},
		{"GPU held by another user", alice, kern("x", gpu(1001, "")), "", false},
		{"GPU held by nobody", alice, kern("x", journal.Subject{Devices: []journal.Device{{BDF: "0000:0a:00.0"}}}), "", false},
		{"kernel, naming nothing", bob, kern("x", journal.Subject{}), "", true},
		{"user-space writer", bob, user("hello from a script"), "", false},
		{"root: another user's process", root, kern("x", proc(7, 1001, "")), "", true},
		{"root: a user-space writer", root, user("x"), "", true},
		{"marked, another token", alice, user(kernlog.TestMark("B") + "amdgpu ..."), "A", false},
		{"marked, another token, root", root, kern(kernlog.TestMark("B")+"x", journal.Subject{}), "A", false},
		{"marked, no token asked", root, kern(kernlog.TestMark("B")+"x", journal.Subject{}), "", false},
		{"marked, own token, naming nothing (facility 1)", bob, user(kernlog.TestMark("A") + "amdgpu: hello"), "A", true},
		{"marked, own token, another user's process", bob, &journal.Entry{Rec: api.Record{Text: kernlog.TestMark("A") + "x", Facility: 1}, Subject: proc(7, 1000, "")}, "A", false},
		{"gap", bob, &journal.Entry{Gap: &journal.GapInfo{From: 1, To: 2}}, "", true},
	}
	for _, c := range cases {
		got, why := Visible(c.peer, c.e, c.mark, tr)
		if got != c.want || why == "" {
			t.Errorf("%s: Visible = %v (%s), want %v", c.name, got, why, c.want)
		}
	}
}

// TestTrackerRefreshInterval: Refresh scans at most every Interval; a
// process that appears in between is still found by Lookup, live.
func TestTrackerRefreshInterval(t *testing.T) {
	p := newProcTree(t)
	p.process(10, 1, 1000, 5, "a", "/x/y/a")
	tr := &Tracker{ProcRoot: p.proc, Interval: time.Hour}
	tr.Refresh()
	p.process(11, 1, 1001, 6, "b", "/x/y/b")
	tr.Refresh()
	if tr.Len() != 1 {
		t.Errorf("a second Refresh within Interval scanned: %d tracked", tr.Len())
	}
	if info, ok := tr.Lookup(11); !ok || info.UID != 1001 {
		t.Errorf("Lookup of a process born since the scan: %+v %v", info, ok)
	}
	tr.Scan()
	if tr.Len() != 2 {
		t.Errorf("Scan: %d tracked", tr.Len())
	}
}

// Lookup reads a live process once per lookupFresh: a second lookup of the
// same process (its /proc directory unchanged) is answered from memory,
// while a reused pid (a new directory) is read again at once.
func TestLookupReusesFreshRead(t *testing.T) {
	p := newProcTree(t)
	p.process(50, 1, 1001, 7, "a", "/x/a")
	tr := &Tracker{ProcRoot: p.proc}
	if info, ok := tr.Lookup(50); !ok || info.UID != 1001 {
		t.Fatalf("first Lookup: %+v %v", info, ok)
	}
	// The same process's files change (a setuid, a cgroup move): within
	// lookupFresh the first read stands.
	p.process(50, 1, 1002, 7, "a", "/x/moved")
	if info, ok := tr.Lookup(50); !ok || info.UID != 1001 || info.Cgroup != "/x/a" {
		t.Errorf("second Lookup within %v read /proc again: %+v %v", lookupFresh, info, ok)
	}
	// The pid's process exits and the pid is reused: another directory.
	p.exit(50)
	p.process(50, 1, 1003, 9, "b", "/x/b")
	if info, ok := tr.Lookup(50); !ok || info.UID != 1003 || info.Start != 9 {
		t.Errorf("Lookup of a reused pid: %+v %v, want the new process (uid 1003)", info, ok)
	}
}

// TestDeviceRulesGrants: only a rule naming the node's major counts; a
// cgroup nobody restricted ("a *:* rwm") gives no GPU in particular.
func TestDeviceRulesGrants(t *testing.T) {
	slurm := DeviceRules{Allow: []string{"c 1:3 rwm", "c 195:255 rw", "c 195:2 rw", "c 226:128 rw", "b 8:0 r"}}
	wide := DeviceRules{Allow: []string{"c 226:* rwm"}}
	open := DeviceRules{Allow: []string{"a *:* rwm"}}
	mknodOnly := DeviceRules{Allow: []string{"c 226:129 m"}}
	for _, c := range []struct {
		r    DeviceRules
		node string
		want bool
	}{
		{slurm, "c 195:2", true},
		{slurm, "c 195:3", false},
		{slurm, "c 226:128", true},
		{slurm, "c 226:129", false},
		{slurm, "b 226:128", false},
		{wide, "c 226:129", true},
		{wide, "c 195:0", false},
		{open, "c 226:128", false},
		{mknodOnly, "c 226:129", false},
		{DeviceRules{}, "c 226:128", false},
		{slurm, "garbage", false},
	} {
		if got := c.r.Grants(c.node); got != c.want {
			t.Errorf("%v.Grants(%q) = %v, want %v", c.r.Allow, c.node, got, c.want)
		}
	}
}

// TestTrackerScanSeesReuseByInode: a process read long ago is not stat'ed
// again at each scan; a reused pid is still noticed, by the new inode
// number readdir gives its directory, and read again.
func TestTrackerScanSeesReuseByInode(t *testing.T) {
	p := newProcTree(t)
	p.process(101, 1, 1000, 11, "old", "/x/y/old")
	tr := &Tracker{ProcRoot: p.proc}
	tr.Scan()
	tr.mu.Lock()
	for _, pr := range tr.procs {
		pr.read = pr.read.Add(-time.Minute) // an old process now
	}
	tr.mu.Unlock()
	// The new process's directory exists before the old one goes, as
	// procfs makes one inode per process: it cannot get the old number.
	p.process(9101, 1, 1002, 50, "new", "/x/y/new")
	p.exit(101)
	if err := os.Rename(filepath.Join(p.proc, "9101"), filepath.Join(p.proc, "101")); err != nil {
		t.Fatal(err)
	}
	tr.Scan()
	tr.mu.Lock()
	got := tr.procs[101].ProcInfo
	tr.mu.Unlock()
	if got.UID != 1002 || got.Comm != "new" || !got.Exited.IsZero() {
		t.Errorf("pid 101 after reuse: %+v, want the new process (uid 1002)", got)
	}
}
