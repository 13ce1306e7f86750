package supervisor

import (
	"github.com/kcrash/kcrash/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needRoot skips a test that needs CAP_SYS_PTRACE over a process kcrash did
// not start, except in CI, where a skipped ptrace test would hide a regression.
func needRoot(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "CAP_SYS_PTRACE over a process this test did not start")
}

func stopped(pid int) bool { st := procState(pid); return st == 'T' || st == 't' }

// orphan starts script as a process that is not the test's child (its
// parent exits at once), like the server `kcrash attach` is pointed at.
func orphan(t *testing.T, script string) int {
	t.Helper()
	out, err := exec.Command("sh", "-c", `setsid sh -c "$0" </dev/null >/dev/null 2>&1 & echo $!`, script).Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

func waitWatch(t *testing.T, w *Watcher) ExitStatus {
	t.Helper()
	select {
	case <-w.Done():
		return w.Wait()
	case <-time.After(20 * time.Second):
		t.Fatalf("pid %d: watch did not end", w.Pid())
		return ExitStatus{}
	}
}

func mustWatch(t *testing.T, pid int, o WatchOptions) *Watcher {
	t.Helper()
	w, err := Watch(pid, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestPtraceExitCode(t *testing.T) {
	needRoot(t)
	w := mustWatch(t, orphan(t, "sleep 0.3; exit 42"), WatchOptions{})
	if w.Method() != "ptrace" {
		t.Fatalf("method %q (%s), want ptrace", w.Method(), w.NotTracedReason())
	}
	r := waitWatch(t, w)
	if !r.Known || r.Code != 42 || r.Signal != 0 || r.Detached {
		t.Fatalf("got %+v, want exit code 42", r)
	}
}

func TestPtraceSegfault(t *testing.T) {
	needRoot(t)
	w := mustWatch(t, orphan(t, "sleep 0.3; kill -SEGV $$"), WatchOptions{})
	r := waitWatch(t, w)
	if !r.Known || r.Signal != syscall.SIGSEGV {
		t.Fatalf("got %+v, want SIGSEGV", r)
	}
}

// A traced process must still receive its signals: the tracer sees each one
// first and has to pass it on.
func TestPtraceReinjectsSignals(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	pid := orphan(t, `trap 'echo usr1 > `+got+`; exit 3' USR1; touch `+ready+`; while :; do sleep 0.05; done`)
	waitFile(t, ready)
	w := mustWatch(t, pid, WatchOptions{})
	waitFor(t, func() bool { return tracerPid(pid) != 0 }, "the trace to start")
	syscall.Kill(pid, syscall.SIGUSR1)
	r := waitWatch(t, w)
	if !r.Known || r.Code != 3 {
		t.Fatalf("got %+v, want exit 3 from the USR1 trap", r)
	}
	if _, err := os.Stat(got); err != nil {
		t.Fatalf("the trap did not run: %v", err)
	}
}

// SIGSTOP must stop a traced process as it would an untraced one, and
// SIGCONT resume it.
func TestPtraceGroupStop(t *testing.T) {
	needRoot(t)
	f := filepath.Join(t.TempDir(), "ticks")
	pid := orphan(t, `while :; do echo x >> `+f+`; sleep 0.02; done`)
	w := mustWatch(t, pid, WatchOptions{})
	waitFile(t, f)
	syscall.Kill(pid, syscall.SIGSTOP)
	waitFor(t, func() bool { return stopped(pid) }, "the stop")
	a := fileSize(f)
	// That it does nothing while stopped can only be seen over some time:
	// ten of its ticks.
	time.Sleep(200 * time.Millisecond)
	if b := fileSize(f); b != a {
		t.Fatalf("still running after SIGSTOP: %d -> %d bytes", a, b)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	waitFor(t, func() bool { return fileSize(f) != a }, "ticks again after SIGCONT")
	syscall.Kill(pid, syscall.SIGTERM)
	if r := waitWatch(t, w); !r.Known || r.Signal != syscall.SIGTERM {
		t.Fatalf("got %+v, want SIGTERM", r)
	}
}

func TestPtraceDetach(t *testing.T) {
	needRoot(t)
	f := filepath.Join(t.TempDir(), "ticks")
	pid := orphan(t, `while :; do echo x >> `+f+`; sleep 0.02; done`)
	w := mustWatch(t, pid, WatchOptions{})
	waitFile(t, f)
	w.Detach()
	r := waitWatch(t, w)
	if !r.Detached || r.Known {
		t.Fatalf("got %+v, want detached", r)
	}
	if tp := tracerPid(pid); tp != 0 {
		t.Fatalf("still traced by %d after detach", tp)
	}
	a := fileSize(f)
	waitFor(t, func() bool { return fileSize(f) != a }, "the target to tick after the detach")
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the target is not running after detach")
	}
}

// Detaching from a stopped (^Z) process leaves it stopped, as it was.
func TestPtraceDetachWhileStopped(t *testing.T) {
	needRoot(t)
	pid := orphan(t, "while :; do sleep 0.05; done")
	w := mustWatch(t, pid, WatchOptions{})
	syscall.Kill(pid, syscall.SIGSTOP)
	waitFor(t, func() bool { return stopped(pid) }, "the stop")
	w.Detach()
	if r := waitWatch(t, w); !r.Detached {
		t.Fatalf("got %+v, want detached", r)
	}
	// A SIGSTOP handed back on detach is delivered when the target next
	// runs: give a loaded machine a moment before reading its state.
	st := procState(pid)
	for deadline := time.Now().Add(2 * time.Second); st != 'T' && time.Now().Before(deadline); st = procState(pid) {
		time.Sleep(10 * time.Millisecond)
	}
	if st != 'T' {
		t.Fatalf("state %q after detach, want T (stopped)", st)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	waitFor(t, func() bool { return !stopped(pid) && procState(pid) != 0 }, "running again after SIGCONT")
}

func TestPtraceNotUsed(t *testing.T) {
	pid := orphan(t, "sleep 0.3; kill -SEGV $$")
	w := mustWatch(t, pid, WatchOptions{NoPtrace: "--no-ptrace"})
	if w.Method() != "pidfd" {
		t.Fatalf("method %q, want pidfd", w.Method())
	}
	r := waitWatch(t, w)
	if r.Known || !strings.Contains(r.Reason, "not traced: --no-ptrace") {
		t.Fatalf("got %+v, want unknown, not traced: --no-ptrace", r)
	}
}

// A second tracer is refused: the watch falls back and says why.
func TestPtraceSeizeFails(t *testing.T) {
	needRoot(t)
	pid := orphan(t, "sleep 0.5; exit 7")
	first := mustWatch(t, pid, WatchOptions{})
	second := mustWatch(t, pid, WatchOptions{})
	if second.Method() == "ptrace" {
		t.Fatal("a second PTRACE_SEIZE succeeded")
	}
	if !strings.Contains(second.NotTracedReason(), "already traced by pid") {
		t.Fatalf("reason %q does not name the other tracer", second.NotTracedReason())
	}
	r2 := waitWatch(t, second)
	if r2.Known || !strings.HasPrefix(r2.Reason, "not traced: PTRACE_SEIZE: operation not permitted") {
		t.Fatalf("second: %+v", r2)
	}
	if r1 := waitWatch(t, first); !r1.Known || r1.Code != 7 {
		t.Fatalf("first: %+v, want exit 7", r1)
	}
}

func TestWatchPollFallback(t *testing.T) {
	pid := orphan(t, "sleep 0.3")
	start, err := procStartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	w := &Watcher{pid: pid, method: "poll", why: "test", done: make(chan struct{}), detach: make(chan struct{})}
	go w.pollWait(start, 20*time.Millisecond)
	r := waitWatch(t, w)
	if r.Known || !strings.Contains(r.Reason, "(poll)") {
		t.Fatalf("got %+v", r)
	}
}

func TestWatchNoSuchPid(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Watch(cmd.Process.Pid, WatchOptions{}); err == nil || !strings.Contains(err.Error(), "no process") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Watch(os.Getpid(), WatchOptions{}); err == nil {
		t.Fatal("watching itself succeeded")
	}
}

func TestProcStartTime(t *testing.T) {
	cmd := exec.Command("sleep", "5")
	before := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	st, err := ProcStartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// ticks are 10ms; uptime is read a moment after the clock
	if d := st.Sub(before); d < -50*time.Millisecond || d > time.Second {
		t.Fatalf("start time %v is %v from when it was started", st, d)
	}
}

func waitFile(t *testing.T, p string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear", p)
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return st.Size()
}
