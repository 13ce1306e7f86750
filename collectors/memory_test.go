package collectors

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/internal/testenv"
)

// memTestCopy copies a fixture tree into a fresh directory the test may
// change (counters move between the start and the end of a run).
func memTestCopy(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func memTestWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func memReadJSON(t *testing.T, dir string) memoryFile {
	t.Helper()
	return readJSON[memoryFile](t, dir, "memory.json")
}

func memHostOOM(env *Env) []evidence.Finding {
	var out []evidence.Finding
	for _, f := range env.Findings() {
		if f.Kind == evidence.HostOOM {
			out = append(out, f)
		}
	}
	return out
}

// A Slurm-style v1 hierarchy: the limit sits on the job, the child is in a
// task cgroup below it, and the child is gone by collection.
func TestMemoryCgroupV1Fixture(t *testing.T) {
	proc := memTestCopy(t, filepath.Join("testdata", "proc", "run-v1"))
	sys := memTestCopy(t, filepath.Join("testdata", "sys", "cgroup-v1"))
	env := NewEnv()
	env.ProcRoot, env.SysRoot, env.RootPid = proc, sys, 4242
	env.Tree = gpuTestTree{{Pid: 4242, Name: "python3"}, {Pid: 4243, PPid: 4242, Name: "python3"}, {Pid: 4244, Exited: true}}
	c := &memoryCollector{}
	c.watchOnce(env)

	task := filepath.Join(sys, "fs", "cgroup", "memory", "slurm_vm", "uid_0", "job_12", "step_0", "task_0")
	memTestWrite(t, filepath.Join(task, "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
	memTestWrite(t, filepath.Join(task, "memory.failcnt"), "77\n")
	if err := os.RemoveAll(filepath.Join(proc, "4242")); err != nil { // the child has exited
		t.Fatal(err)
	}
	c.watchOnce(env)
	out := t.TempDir()
	if err := c.Collect(context.Background(), env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	f := memReadJSON(t, out)
	if len(f.Samples) != 2 || f.Snapshot == nil {
		t.Fatalf("samples %d snapshot %v", len(f.Samples), f.Snapshot)
	}
	s := f.Samples[0]
	if want := uint64(1048576+262144) * uint64(os.Getpagesize()); s.TreeRSSBytes != want || s.TreeProcs != 2 {
		t.Errorf("tree rss %d over %d procs, want %d over 2", s.TreeRSSBytes, s.TreeProcs, want)
	}
	if s.Meminfo["MemTotal"] == 0 || s.Meminfo["MemAvailable"] == 0 || s.Meminfo["MemTotal"]%1024 != 0 {
		t.Errorf("meminfo %v", s.Meminfo)
	}
	if s.CgroupUsageBytes == nil || *s.CgroupUsageBytes != 323584 {
		t.Errorf("cgroup usage %v", s.CgroupUsageBytes)
	}
	cg := f.Cgroup
	if cg == nil || cg.Version != 1 || cg.Path != "/slurm_vm/uid_0/job_12/step_0/task_0" {
		t.Fatalf("cgroup %+v", cg)
	}
	if cg.Start == nil || *cg.Start.OOMKill != 0 || *cg.End.OOMKill != 1 || cg.OOMKillDelta == nil || *cg.OOMKillDelta != 1 || *cg.FailcntDelta != 77 {
		t.Errorf("start %+v end %+v delta %v", cg.Start, cg.End, cg.OOMKillDelta)
	}
	if cg.End.LimitBytes != nil || cg.EffectiveLimitBytes == nil || *cg.EffectiveLimitBytes != 52428800 || cg.EffectiveLimitPath != "/slurm_vm/uid_0/job_12" {
		t.Errorf("limits: own %v effective %v at %q", cg.End.LimitBytes, cg.EffectiveLimitBytes, cg.EffectiveLimitPath)
	}
	oom := memHostOOM(env)
	if len(oom) != 1 || oom[0].Source != evidence.SourceCgroup ||
		oom[0].Text != "cgroup /slurm_vm/uid_0/job_12/step_0/task_0: oom_kill 0 → 1 during the run (limit 50 MiB at /slurm_vm/uid_0/job_12)" {
		t.Fatalf("findings %+v", env.Findings())
	}
}

// cgroup v2 with the corpus' memory.events: the first capture has many
// "max" hits and no kill, the second is a kill.
func TestMemoryCgroupV2Corpus(t *testing.T) {
	corpus := filepath.Join(testcorpus.Dir(t), "4-oom-killer")
	noKill := gpuTestCorpus(t, filepath.Join(corpus, "cgroupv2-memory-events-max-hits-no-oom-kill.txt"))
	kill := gpuTestCorpus(t, filepath.Join(corpus, "cgroupv2-memory-events-oom-kill-1-five-keys.txt"))
	if kv := memParseKV(noKill); kv["max"] != 13693 || kv["oom_kill"] != 0 || kv["oom_group_kill"] != 0 || len(kv) != 6 {
		t.Errorf("no-kill events %v", kv)
	}
	if kv := memParseKV(kill); kv["oom"] != 1 || kv["oom_kill"] != 1 || len(kv) != 5 {
		t.Errorf("kill events %v", kv)
	}

	proc := memTestCopy(t, filepath.Join("testdata", "proc", "run-v2"))
	sys := memTestCopy(t, filepath.Join("testdata", "sys", "cgroup-v2"))
	scope := filepath.Join(sys, "fs", "cgroup", "kubepods.slice", "kubepods-pod1.slice", "cri-containerd-abc.scope")
	memTestWrite(t, filepath.Join(scope, "memory.events"), string(noKill))
	env := NewEnv()
	env.ProcRoot, env.SysRoot, env.RootPid = proc, sys, 4242
	c := &memoryCollector{}
	c.watchOnce(env)
	memTestWrite(t, filepath.Join(scope, "memory.events"), string(kill))
	os.RemoveAll(filepath.Join(proc, "4242"))
	out := t.TempDir()
	if err := c.Collect(context.Background(), env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	cg := memReadJSON(t, out).Cgroup
	if cg == nil || cg.Version != 2 || cg.Path != "/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope" {
		t.Fatalf("cgroup %+v", cg)
	}
	if cg.Start.Events["max"] != 13693 || *cg.OOMKillDelta != 1 || *cg.OOMDelta != 1 || *cg.End.UsageBytes != 394907648 || *cg.End.MaxUsageBytes != 402649088 {
		t.Errorf("start %+v end %+v", cg.Start, cg.End)
	}
	if cg.End.LimitBytes != nil || cg.EffectiveLimitBytes == nil || *cg.EffectiveLimitBytes != 402653184 {
		t.Errorf("limit %v effective %v", cg.End.LimitBytes, cg.EffectiveLimitBytes)
	}
	if oom := memHostOOM(env); len(oom) != 1 || !strings.HasPrefix(oom[0].Text, "cgroup /kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope: oom_kill 0 → 1 during the run") {
		t.Errorf("findings %+v", env.Findings())
	}
}

// No kill during the run, and a child that died before the first sample:
// no finding, no invented delta.
func TestMemoryNoDelta(t *testing.T) {
	proc := memTestCopy(t, filepath.Join("testdata", "proc", "run-v1"))
	sys := memTestCopy(t, filepath.Join("testdata", "sys", "cgroup-v1"))
	env := NewEnv()
	env.ProcRoot, env.SysRoot, env.RootPid = proc, sys, 4242
	c := &memoryCollector{}
	c.watchOnce(env)
	out := t.TempDir()
	if err := c.Collect(context.Background(), env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	if f := memReadJSON(t, out); f.Cgroup == nil || f.Cgroup.OOMKillDelta == nil || *f.Cgroup.OOMKillDelta != 0 {
		t.Errorf("cgroup %+v", f.Cgroup)
	}
	if len(env.Findings()) != 0 {
		t.Errorf("findings %+v", env.Findings())
	}

	env2 := NewEnv()
	env2.ProcRoot, env2.SysRoot, env2.RootPid = t.TempDir(), sys, 999999
	c2 := &memoryCollector{}
	c2.watchOnce(env2)
	out2 := t.TempDir()
	if err := c2.Collect(context.Background(), env2, NewOutput(out2)); err != nil {
		t.Fatal(err)
	}
	f := memReadJSON(t, out2)
	if f.Cgroup != nil || len(f.Errors) == 0 {
		t.Errorf("cgroup %+v errors %q", f.Cgroup, f.Errors)
	}
}

// A real memcg OOM kill: a 64 MiB cgroup v1 memory cgroup, a child that
// moves itself in and then grows without bound (tail keeps /dev/zero's
// endless line in memory). Needs root and the v1 memory controller.
func TestMemoryRealOOMCgroupV1(t *testing.T) {
	name := fmt.Sprintf("kcrash-test-%d", os.Getpid())
	dir := testenv.MemoryCgroup(t, "creates a cgroup-v1 memory cgroup", name)
	sh, tail := gpuTestLook(t, "sh"), gpuTestLook(t, "tail")
	var cmd *exec.Cmd
	t.Cleanup(func() {
		if cmd != nil && cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	memTestWrite(t, filepath.Join(dir, "memory.limit_in_bytes"), strconv.Itoa(64<<20))
	os.WriteFile(filepath.Join(dir, "memory.swappiness"), []byte("0"), 0o644) // a host with swap would page instead of killing

	// The child joins the cgroup, then waits for a line on stdin so that
	// the first sample sees it before it grows.
	cmd = exec.Command(sh, "-c", fmt.Sprintf(`echo $$ > %s/cgroup.procs && read go && exec %s /dev/zero`, dir, tail))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	in := false
	for i := 0; i < 100 && !in; i++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		in = strings.Contains(string(b), ":/"+name+"\n")
		if !in {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !in {
		t.Fatalf("child %d never joined %s", pid, dir)
	}

	env := NewEnv()
	env.RootPid = pid
	env.Start = time.Now()
	env.SampleInterval = 100 * time.Millisecond
	env.Tree = gpuTestTree{{Pid: int32(pid), Name: "sh"}}
	c := &memoryCollector{}
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { c.Watch(ctx, env); close(watched) }()
	waitFor(t, 10*time.Second, "the first sample with the cgroup's counters", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.start != nil
	})
	io.WriteString(stdin, "go\n")
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the child was not OOM-killed within 30s")
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("child ended %v, want SIGKILL", cmd.ProcessState)
	}
	waitSamples(t, "two samples after the death", c.samples, 2)
	cancel()
	<-watched

	out := t.TempDir()
	if err := c.Collect(context.Background(), env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	f := memReadJSON(t, out)
	cg := f.Cgroup
	if cg == nil || cg.Version != 1 || cg.Path != "/"+name || cg.Start == nil || cg.End == nil {
		t.Fatalf("cgroup %+v (errors %q)", cg, f.Errors)
	}
	if *cg.Start.OOMKill != 0 || *cg.End.OOMKill != 1 || *cg.OOMKillDelta != 1 {
		t.Errorf("oom_kill %d → %d", *cg.Start.OOMKill, *cg.End.OOMKill)
	}
	if cg.End.LimitBytes == nil || *cg.End.LimitBytes != 64<<20 || cg.End.MaxUsageBytes == nil || *cg.End.MaxUsageBytes < 60<<20 {
		t.Errorf("limit %v max usage %v", cg.End.LimitBytes, cg.End.MaxUsageBytes)
	}
	oom := memHostOOM(env)
	if len(oom) != 1 || oom[0].Text != fmt.Sprintf("cgroup /%s: oom_kill 0 → 1 during the run (limit 64 MiB)", name) {
		t.Fatalf("findings %+v", env.Findings())
	}
	t.Logf("%s: %s; %d samples, failcnt +%d", dir, oom[0].Text, len(f.Samples), *cg.FailcntDelta)
}

func TestMemoryParseMeminfo(t *testing.T) {
	m := memParseMeminfo([]byte("MemTotal:       24680000 kB\nMemFree: 1 kB\nHugePages_Total:       0\nCommitted_AS:   12 kB\nbogus line\n"))
	if m["MemTotal"] != 24680000*1024 || m["MemFree"] != 1024 || m["Committed_AS"] != 12*1024 || len(m) != 3 {
		t.Errorf("%v", m)
	}
}

// The cost of one memory sample on this host: meminfo, the child's statm
// and its cgroup usage (the cgroup path is re-read too, while it lives).
func BenchmarkMemorySample(b *testing.B) {
	env := NewEnv()
	env.RootPid = os.Getpid()
	env.Tree = gpuTestTree{{Pid: int32(os.Getpid())}}
	c := &memoryCollector{}
	b.ReportAllocs()
	for b.Loop() {
		c.watchOnce(env)
	}
}

// The child moved to another cgroup: follow it. Its pid now names another
// process: stop following.
func TestMemoryCgroupMoveAndPidReuse(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		proc := memTestCopy(t, filepath.Join("testdata", "proc", "run-v1"))
		sys := memTestCopy(t, filepath.Join("testdata", "sys", "cgroup-v1"))
		stat := filepath.Join(proc, "4242", "stat")
		memTestWrite(t, stat, "4242 (python3) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 1000 0 0\n")
		env := NewEnv()
		env.ProcRoot, env.SysRoot, env.RootPid = proc, sys, 4242
		c := &memoryCollector{}
		c.watchOnce(env)
		other := filepath.Join(sys, "fs", "cgroup", "memory", "other")
		os.MkdirAll(other, 0o755)
		memTestWrite(t, filepath.Join(other, "memory.oom_control"), "oom_kill 5\n")
		memTestWrite(t, filepath.Join(proc, "4242", "cgroup"), "4:memory:/other\n")
		if reuse {
			memTestWrite(t, stat, "4242 (bash) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 9999 0 0\n")
		}
		c.watchOnce(env)
		c.mu.Lock()
		path, moves, gone := c.cg.path, len(c.moves), c.rootGone
		c.mu.Unlock()
		if reuse && (path != "/slurm_vm/uid_0/job_12/step_0/task_0" || moves != 0 || !gone) ||
			!reuse && (path != "/other" || moves != 1 || gone || *c.start.OOMKill != 5) {
			t.Errorf("reuse=%v: path %s moves %d gone %v", reuse, path, moves, gone)
		}
	}
}

// An exited child that is not reaped yet reads as the root cgroup in
// /proc/PID/cgroup (seen under load in CI, where the OOM test's victim was
// sampled as a zombie and its cgroup reported as "/"): that is the child
// gone, not moved. Needs root and the v1 memory controller.
func TestMemoryZombieIsNotAMove(t *testing.T) {
	name := fmt.Sprintf("kcrash-test-zombie-%d", os.Getpid())
	pid, exit := testenv.ChildInMemoryCgroup(t, "creates a cgroup-v1 memory cgroup", name)
	env := NewEnv()
	env.RootPid = pid
	c := &memoryCollector{}
	c.followRoot(env)
	if c.cg == nil || c.cg.path != "/"+name {
		t.Fatalf("cgroup %+v, want /%s (errors %q)", c.cg, name, c.errs)
	}
	exit() // the child exits; nobody reaps it yet
	waitFor(t, 10*time.Second, "the child a zombie", func() bool {
		_, dead := memStartTime(env, strconv.Itoa(pid))
		return dead
	})
	c.followRoot(env)
	if len(c.moves) != 0 || c.cg.path != "/"+name || !c.rootGone {
		t.Errorf("after the child's exit: cgroup %s, moves %q, gone %v; want /%s, none, gone", c.cg.path, c.moves, c.rootGone, name)
	}
}
