package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/internal/testenv"
)

// TestConcurrentRunsOneOut: many ranks writing into one shared --out at the
// same moment get distinct, complete bundles.
func TestConcurrentRunsOneOut(t *testing.T) {
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "run", "-q", "--out", out, "--skip-collectors", skipSlow(), "--", "sh", "-c", fmt.Sprintf("echo rank %d; exit 9", i))
			cmd.Env = append(os.Environ(), "SLURM_JOB_ID=77", fmt.Sprintf("SLURM_PROCID=%d", i%4))
			b, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 9 {
				errs <- fmt.Errorf("run %d: %v: %s", i, err, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*"))
	hidden, _ := filepath.Glob(filepath.Join(out, ".*"))
	if len(files) != n || len(hidden) != 0 {
		t.Fatalf("%d files and %d temporary files in --out, want %d bundles", len(files), len(hidden), n)
	}
	ranks := map[string]int{}
	for _, f := range files {
		b, err := bundle.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := b.File("output.log")
		ranks[strings.TrimSpace(string(out))]++
		if b.Manifest.Job == nil || b.Manifest.Job.JobID != "77" || !strings.Contains(f, "-r") {
			t.Errorf("%s: job identity missing: %+v", f, b.Manifest.Job)
		}
	}
	if len(ranks) != n {
		t.Fatalf("bundles hold %d distinct outputs, want %d", len(ranks), n)
	}
}

// skipSlow leaves out collectors that sample external tools, keeping this
// test about naming and atomicity.
func skipSlow() string {
	var skip []string
	for _, name := range []string{"gpu", "kmsg"} {
		if hasCollector(name) {
			skip = append(skip, name)
		}
	}
	if len(skip) == 0 {
		return ""
	}
	return strings.Join(skip, ",")
}

// TestNoLeaksOverManyRuns runs kcrash in-process 100 times: file descriptors
// (ptys above all) and goroutines must come back to where they started.
func TestNoLeaksOverManyRuns(t *testing.T) {
	out := t.TempDir()
	runOnce := func(i int) {
		in, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		s := &streams{In: in, Out: &strings.Builder{}, Err: &strings.Builder{}}
		args := []string{"run", "-q", "--out", out, "--collect", "always", "--", "sh", "-c", fmt.Sprintf("echo %d; exit %d", i, i%3)}
		if i%2 == 1 {
			args = append(args[:1], append([]string{"--no-pty"}, args[1:]...)...)
		}
		if code := run(args, s); code != i%3 {
			t.Fatalf("run %d: exit %d, want %d; stderr %s", i, code, i%3, s.Err)
		}
	}
	runOnce(0) // warm up lazily started runtime goroutines
	// The baseline is taken once the warm-up's goroutines and descriptors
	// have wound down: two readings alike, 20 ms apart (5 s at most).
	fds0, g0 := countFDs(t), runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		fds, g := countFDs(t), runtime.NumGoroutine()
		if fds == fds0 && g == g0 {
			break
		}
		fds0, g0 = fds, g
	}
	for i := 1; i <= 100; i++ {
		runOnce(i)
	}
	var fds, g int
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		fds, g = countFDs(t), runtime.NumGoroutine()
		if fds <= fds0 && g <= g0+2 {
			break
		}
	}
	if fds > fds0 || g > g0+2 {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("after 100 runs: fds %d → %d, goroutines %d → %d\n%s", fds0, fds, g0, g, buf[:n])
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*.tar.gz")); len(m) != 101 {
		t.Fatalf("%d bundles, want 101", len(m))
	}
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting open descriptors: %v", err)
	}
	return len(ents)
}

// startKcrash starts the kcrash binary with extra environment and waits until
// the child has printed "ready" on stdout (kcrash passes it through).
func startKcrash(t *testing.T, env []string, args ...string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), "ready") {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			t.Fatalf("the child never printed ready; stderr %s", stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the child never printed ready")
	}
	return cmd, &stderr
}

// diedOf reports the signal a finished process died of (0: it exited).
func diedOf(cmd *exec.Cmd) syscall.Signal {
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// TestUserInterruptIsNotACrash: a run stopped by the user's SIGINT or
// SIGTERM writes no bundle and kcrash dies of the child's signal (a shell
// sees a signal death, no core of kcrash); with --collect always the bundle's
// verdict is "killed", not the KeyboardInterrupt traceback the ^C caused.
// A scheduler's SIGTERM (here: under Slurm) still gets a bundle.
func TestUserInterruptIsNotACrash(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Skip(t, "needs python3")
	}
	py := []string{"python3", "-c", "import time; print('ready', flush=True); time.sleep(60)"}
	for _, tc := range []struct {
		name    string
		sig     syscall.Signal
		collect string
		env     []string
		bundles int
	}{
		{"sigint", syscall.SIGINT, "crash", nil, 0},
		{"sigterm", syscall.SIGTERM, "crash", nil, 0},
		{"sigint-always", syscall.SIGINT, "always", nil, 1},
		{"slurm-sigterm", syscall.SIGTERM, "crash", []string{"SLURM_JOB_ID=4242"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			tmp := t.TempDir()
			env := append([]string{"TMPDIR=" + tmp, "SLURM_JOB_ID=", "PBS_JOBID=", "LSB_JOBID=", "KUBERNETES_SERVICE_HOST="}, tc.env...)
			args := append([]string{"run", "-q", "--out", out, "--collect", tc.collect, "--skip-collectors", skipSlow(), "--"}, py...)
			cmd, stderr := startKcrash(t, env, args...)
			cmd.Process.Signal(tc.sig)
			cmd.Wait()
			if got := diedOf(cmd); got != tc.sig {
				t.Fatalf("kcrash ended with %v (died of %v), want death by %v; stderr %s", cmd.ProcessState, got, tc.sig, stderr)
			}
			if cmd.ProcessState.Sys().(syscall.WaitStatus).CoreDump() {
				t.Error("kcrash dumped core")
			}
			files, _ := filepath.Glob(filepath.Join(out, "*.tar.gz"))
			if len(files) != tc.bundles {
				t.Fatalf("%d bundles, want %d; stderr %s", len(files), tc.bundles, stderr)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("left in $TMPDIR: %v", left)
			}
			if tc.bundles == 0 {
				if strings.Contains(stderr.String(), "kcrash:") {
					t.Errorf("kcrash printed %q for a run the user stopped", stderr)
				}
				return
			}
			b, err := bundle.Open(files[0])
			if err != nil {
				t.Fatal(err)
			}
			var tri struct {
				Verdict struct{ Kind, Summary string }
			}
			json.Unmarshal(b.Manifest.Triage, &tri)
			if tc.name == "sigint-always" {
				if tri.Verdict.Kind != "killed" || !strings.Contains(tri.Verdict.Summary, "stopped by the user") || strings.Contains(tri.Verdict.Summary, "KeyboardInterrupt") {
					t.Fatalf("verdict of a ^C run: %s", b.Manifest.Triage)
				}
			} else if strings.Contains(tri.Verdict.Summary, "stopped by the user") {
				t.Fatalf("a scheduler's SIGTERM taken for the user's: %s", b.Manifest.Triage)
			}
		})
	}
}

// asInit runs kcrash as PID 1 of a new PID namespace, as a container's
// entrypoint would be.
func asInit(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	testenv.NeedRoot(t, "unshare --pid for a PID namespace with kcrash as its init")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.Skip(t, "unshare not found: %v", err)
	}
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(unshare, append([]string{"--pid", "--fork", "--mount-proc", bin}, args...)...)
}

// TestInitReapsOrphans: kcrash as PID 1 reaps the orphans reparented to it
// (tini's subreaper test: 100 orphaned sleeps leave no zombie).
func TestInitReapsOrphans(t *testing.T) {
	// The child orphans 100 sleeps, waits for them to end, then counts the
	// zombies left until there are none (kcrash reaps on SIGCHLD).
	script := `for i in $(seq 100); do (sleep 0.1 &); done
		while cat /proc/[0-9]*/stat 2>/dev/null | awk '$2=="(sleep)" && $3!="Z"' | grep -q .; do sleep 0.05; done
		for i in $(seq 100); do
			n=$(cat /proc/[0-9]*/stat 2>/dev/null | awk '$3=="Z"' | wc -l)
			[ "$n" = 0 ] && break
			sleep 0.05
		done
		echo "zombies=$n pid1=$(cat /proc/1/comm)"`
	cmd := asInit(t, "run", "-q", "--collect", "never", "--", "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "zombies=0 pid1=kcrash") {
		t.Fatalf("kcrash as PID 1: %v\n%s", err, out)
	}
}

// TestInitStopsOnSIGTERM: `docker stop` sends SIGTERM to the container's
// PID 1; kcrash passes it on and, not able to die of it as PID 1, exits
// 143 like tini.
func TestInitStopsOnSIGTERM(t *testing.T) {
	cmd := asInit(t, "run", "-q", "--collect", "never", "--", "sh", "-c", "echo ready; sleep 351 & wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.Contains(line, "ready") {
		cmd.Process.Kill()
		t.Fatalf("child said %q", line)
	}
	// kcrash's pid outside the namespace: unshare's only child.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
	var init int
	if _, err2 := fmt.Sscan(string(b), &init); err != nil || err2 != nil {
		cmd.Process.Kill()
		t.Fatalf("no child of unshare: %v %v", err, err2)
	}
	syscall.Kill(init, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		syscall.Kill(init, syscall.SIGKILL)
		t.Fatal("kcrash as PID 1 did not stop on SIGTERM")
	}
	if got := cmd.ProcessState.ExitCode(); got != 143 {
		t.Fatalf("exit %d (%v), want 143", got, cmd.ProcessState)
	}
}

// TestSubreaperReapsOrphans: tini's subreaper-proxy: a process that made
// itself a child subreaper execs kcrash; orphans of the job come to kcrash,
// which reaps them, and its exit status is still the child's.
func TestSubreaperReapsOrphans(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Skip(t, "needs python3 for prctl(PR_SET_CHILD_SUBREAPER)")
	}
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	// The zombies counted are children of kcrash's init (the subreaper).
	script := `for i in $(seq 100); do (sleep 0.1 &); done
		while cat /proc/[0-9]*/stat 2>/dev/null | awk '$2=="(sleep)" && $3!="Z"' | grep -q .; do sleep 0.05; done
		for i in $(seq 100); do
			n=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v p="$KC_INIT" '$3=="Z" && $4==p' | wc -l)
			[ "$n" = 0 ] && break
			sleep 0.05
		done
		echo "zombies=$n"; exit 7`
	proxy := `import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
os.environ["KC_INIT"] = str(os.getpid())
os.execv(sys.argv[1], sys.argv[1:])`
	cmd := exec.Command("python3", "-c", proxy, bin, "run", "-q", "--collect", "never", "--", "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 || !strings.Contains(string(out), "zombies=0") {
		t.Fatalf("kcrash as a subreaper: %v\n%s", err, out)
	}
}

// TestSignalsIgnoredOrBlockedAtStart (tini's sigconf, as far as a Go
// program can know its start: see supervisor.blockedAtStart): SIGINT and
// SIGHUP ignored and SIGUSR1 blocked when kcrash starts stay so for the
// child, and a SIGUSR1 sent to kcrash is not forwarded.
func TestSignalsIgnoredOrBlockedAtStart(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Skip(t, "needs python3 to start kcrash with signals ignored and blocked")
	}
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	launcher := `import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
os.execv(sys.argv[1], sys.argv[1:])`
	child := `import os, signal, time
def field(name):
    return int(open("/proc/self/status").read().split(name + ":")[1].split()[0], 16)
os.kill(os.getppid(), signal.SIGUSR1)
time.sleep(0.3)
print("blk=%x ign=%x pnd=%x" % (field("SigBlk"), field("SigIgn"), field("ShdPnd") | field("SigPnd")))`
	for _, mode := range []string{"--no-pty=false", "--no-pty"} {
		out, err := exec.Command("python3", "-c", launcher, bin, "run", "-q", "--collect", "never", mode, "--", "python3", "-c", child).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		var blk, ign, pnd uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "blk=%x ign=%x pnd=%x", &blk, &ign, &pnd); err != nil {
			t.Fatalf("%s: %q: %v", mode, out, err)
		}
		usr1 := uint64(1) << (syscall.SIGUSR1 - 1)
		if blk&usr1 == 0 || ign&3 != 3 || pnd&usr1 != 0 {
			t.Errorf("%s: child SigBlk %x (want SIGUSR1), SigIgn %x (want SIGHUP, SIGINT), pending %x (want no forwarded SIGUSR1)", mode, blk, ign, pnd)
		}
	}
}

// TestDiesOfChildSignalWithoutCore: kcrash dies of the signal the child
// died of, and leaves no core of its own (the child's is the one that matters).
func TestDiesOfChildSignalWithoutCore(t *testing.T) {
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGABRT, syscall.SIGTERM} {
		cmd := exec.Command(bin, "run", "-q", "--collect", "never", "--", "sh", "-c", fmt.Sprintf("kill -%d $$", sig))
		cmd.Dir = t.TempDir()
		cmd.Run()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != sig || ws.CoreDump() {
			t.Errorf("child died of %v: kcrash ended %v (core dumped: %v)", sig, cmd.ProcessState, ws.CoreDump())
		}
	}
}
