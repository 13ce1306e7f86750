package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/kcrash/kcrash/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestInteractiveTerminal gives kcrash a pty as its terminal, as a user's
// shell would: keys reach the child, the window size follows, the terminal
// is raw while the child runs and restored afterwards.
func TestInteractiveTerminal(t *testing.T) {
	// The second `stty size` waits for the new size: SIGWINCH is asynchronous.
	m, before, cmd := onTerminal(t, false, "run", "-q", "--collect", "never", "--", "sh", "-c",
		`stty size; read a; echo "got:$a"; read b; echo "got:$b"; while [ "$(stty size)" = "30 90" ]; do sleep 0.02; done; stty size; exit 4`)
	defer m.Close()
	tm := &termReader{t: t, m: m}
	tm.expect("30 90")
	// While the child runs, kcrash's terminal is raw: no echo, no line editing.
	if cur, _ := unix.IoctlGetTermios(int(m.Fd()), unix.TCGETS); cur != nil && cur.Lflag&unix.ICANON != 0 {
		t.Error("terminal still canonical while the child runs")
	}
	m.Write([]byte("first\r"))
	tm.expect("got:first")
	pty.Setsize(m, &pty.Winsize{Rows: 40, Cols: 100})
	m.Write([]byte("second\r"))
	tm.expect("got:second")
	tm.expect("40 100")
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 {
		t.Fatalf("kcrash ended with %v, want exit status 4", err)
	}
	after, err := unix.IoctlGetTermios(int(m.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Fatalf("terminal not restored: lflag %#x→%#x iflag %#x→%#x oflag %#x→%#x",
			before.Lflag, after.Lflag, before.Iflag, after.Iflag, before.Oflag, after.Oflag)
	}
}

// termReader collects what a pty's master shows, for expect.
type termReader struct {
	t    *testing.T
	m    *os.File
	once sync.Once
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{}
	off  int // expect looks after its last match
}

func (r *termReader) start() {
	r.once.Do(func() {
		r.more = make(chan struct{}, 1)
		go func() {
			b := make([]byte, 4096)
			for {
				n, err := r.m.Read(b)
				r.mu.Lock()
				r.buf.Write(b[:n])
				r.mu.Unlock()
				select {
				case r.more <- struct{}{}:
				default:
				}
				if err != nil {
					return
				}
			}
		}()
	})
}

func (r *termReader) seen() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// expect waits until the terminal has shown s after the last match (10 s
// at most).
func (r *termReader) expect(s string) {
	r.t.Helper()
	r.start()
	deadline := time.After(10 * time.Second)
	for {
		if i := strings.Index(r.seen()[r.off:], s); i >= 0 {
			r.off += i + len(s)
			return
		}
		select {
		case <-r.more:
		case <-deadline:
			r.t.Fatalf("waiting for %q; terminal showed %q", s, r.seen())
		}
	}
}

// exitStatus is a finished process's status as a shell's $? shows it:
// 128+N for a death by signal N (kcrash dies of its child's signal).
func exitStatus(cmd *exec.Cmd) int {
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// TestInteractiveTerminalRestoredOnSignal: kcrash sent SIGTERM twice (both
// forwarded; the child ends in its handler of the second) still restores
// the terminal.
func TestInteractiveTerminalRestoredOnSignal(t *testing.T) {
	m, before, cmd := onTerminal(t, false, "run", "-q", "--collect", "never", "--", "sh", "-c", `n=0; trap 'n=$((n+1)); echo got-term-$n; [ $n -ge 2 ] && exit 3' TERM; echo ready; while :; do sleep 0.05; done`)
	defer m.Close()
	tm := &termReader{t: t, m: m}
	tm.expect("ready")
	cmd.Process.Signal(syscall.SIGTERM)
	tm.expect("got-term-1")
	cmd.Process.Signal(syscall.SIGTERM)
	tm.expect("got-term-2")
	cmd.Wait()
	if got := exitStatus(cmd); got != 3 {
		t.Fatalf("kcrash ended with %v, want 3 (the child's own exit after the second SIGTERM)", cmd.ProcessState)
	}
	after, _ := unix.IoctlGetTermios(int(m.Fd()), unix.TCGETS)
	if after.Lflag != before.Lflag {
		t.Fatalf("terminal not restored: lflag %#x→%#x", before.Lflag, after.Lflag)
	}
}

// TestInteractiveExitStatusMatrix: with a terminal, the child's status comes
// back exactly as in batch mode.
func TestInteractiveExitStatusMatrix(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0}, {"exit 1", 1}, {"exit 2", 2}, {"exit 42", 42}, {"exit 255", 255},
		{"kill -SEGV $$", 139}, {"kill -ABRT $$", 134}, {"kill -KILL $$", 137},
		{"kill -TERM $$", 143}, {"kill -BUS $$", 135}, {"kill -FPE $$", 136},
	} {
		m, _, cmd := onTerminal(t, true, "run", "-q", "--collect", "never", "--", "sh", "-c", tc.script)
		cmd.Wait()
		m.Close()
		if got := exitStatus(cmd); got != tc.want {
			t.Errorf("%s: kcrash exited %d, want %d", tc.script, got, tc.want)
		}
	}
}

// onTerminal starts kcrash with a new pty as its controlling terminal, as a
// user's shell would. It returns the master side and the tty's termios before
// the start; with drain, the master is read and discarded in the background.
func onTerminal(t *testing.T, drain bool, args ...string) (*os.File, *unix.Termios, *exec.Cmd) {
	t.Helper()
	return onTerminalRun(t, drain, nil, "kcrash", args...)
}

// onTerminalRun is onTerminal for any program; setup, when given, adjusts
// the terminal (and the command's streams) before the program starts.
func onTerminalRun(t *testing.T, drain bool, setup func(m, tty *os.File, cmd *exec.Cmd), name string, args ...string) (*os.File, *unix.Termios, *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		testenv.Skip(t, "%s not found: %v", name, err)
	}
	m, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	pty.Setsize(m, &pty.Winsize{Rows: 30, Cols: 90})
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	if setup != nil {
		setup(m, tty, cmd)
	}
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	if drain {
		go io.Copy(io.Discard, m)
	}
	return m, before, cmd
}

// TestCtrlCStopsShellLoop: ^C typed while a `for` loop of an interactive
// bash runs kcrash stops the loop, as it would stop the bare command: kcrash
// dies of the SIGINT its child died of.
func TestCtrlCStopsShellLoop(t *testing.T) {
	m, _, cmd := onTerminalRun(t, false, nil, "bash", "--norc", "--noprofile", "-i")
	defer m.Close()
	tm := &termReader{t: t, m: m}
	m.Write([]byte("PS1='$ '; HISTFILE=/dev/null; TERM=dumb\r"))
	tm.expect("\r$ ")
	m.Write([]byte(`for i in 1 2 3; do kcrash run -q --collect never -- sh -c "echo ready-$i; exec sleep 351"; echo "iter-$i"; done` + "\r"))
	tm.expect("ready-1")
	// ^C once the sleep runs: a shell that gets SIGINT between its echo
	// and the sleep's start lets the sleep run on.
	waitProc(t, "sleep\x00351\x00")
	m.Write([]byte{3})
	tm.expect("$ ") // typed ahead before the prompt, it would be flushed with the ^C
	m.Write([]byte("echo end-$((40+2))\r"))
	tm.expect("end-42")
	m.Write([]byte("exit\r"))
	cmd.Wait()
	if out := tm.seen(); strings.Contains(out, "ready-2") || strings.Contains(out, "iter-1") {
		t.Fatalf("the loop went on after ^C:\n%s", out)
	}
}

// TestChildPtyStartsWithUserTermios: the child's pty starts with the user's
// terminal settings (dumb-init's tty_test: echo and output processing off)
// and window size.
func TestChildPtyStartsWithUserTermios(t *testing.T) {
	m, _, cmd := onTerminalRun(t, false, func(m, tty *os.File, _ *exec.Cmd) {
		tios, _ := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		tios.Lflag &^= unix.ECHO
		tios.Oflag &^= unix.OPOST
		tios.Cc[unix.VINTR] = 7 // ^G
		unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, tios)
	}, "kcrash", "run", "-q", "--collect", "never", "--", "sh", "-c", "stty -a; echo done")
	defer m.Close()
	tm := &termReader{t: t, m: m}
	tm.expect("done")
	cmd.Wait()
	out := tm.seen()
	for _, want := range []string{" -echo ", "-opost ", "rows 30; columns 90", "intr = ^G"} {
		if !strings.Contains(out, want) {
			t.Errorf("the child's pty lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\r\n") {
		t.Errorf("output processed (\\r\\n) though the user's terminal has it off: %q", out)
	}
}

// TestEOFTypedBeforeRaw: an end of file typed before kcrash put the
// terminal in raw mode still reaches the child (dumb-init's test_tty).
func TestEOFTypedBeforeRaw(t *testing.T) {
	m, _, cmd := onTerminalRun(t, false, func(m, _ *os.File, _ *exec.Cmd) {
		m.Write([]byte("1\n2\n3\n\x04\x04"))
	}, "kcrash", "run", "-q", "--collect", "never", "--", "tac")
	defer m.Close()
	tm := &termReader{t: t, m: m}
	tm.expect("3\r\n2\r\n1\r\n")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kcrash: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("tac never saw its end of file")
	}
}

// TestTerminalCombinations: which stream gets what. All three a terminal:
// one pty. Stdout a file: stdout on its own pty, stderr on a second pty
// (kcrash's stderr is a terminal), each where the user sent it, and the
// file has no \r.
func TestTerminalCombinations(t *testing.T) {
	script := `test -t 0 && echo in-tty; test -t 1 && echo out-tty; test -t 2 && echo err-tty >&2
		a=$(readlink /proc/$$/fd/1); b=$(readlink /proc/$$/fd/2)
		if [ "$a" = "$b" ]; then echo one-pty >&2; else echo apart >&2; fi
		stty size >&2; echo end >&2`
	m, _, cmd := onTerminalRun(t, false, nil, "kcrash", "run", "-q", "--collect", "never", "--", "sh", "-c", script)
	tm := &termReader{t: t, m: m}
	tm.expect("end")
	cmd.Wait()
	m.Close()
	for _, want := range []string{"in-tty", "out-tty", "err-tty", "one-pty", "30 90"} {
		if !strings.Contains(tm.seen(), want) {
			t.Errorf("all on a terminal: no %q in %q", want, tm.seen())
		}
	}

	outFile := filepath.Join(t.TempDir(), "out.txt")
	m, _, cmd = onTerminalRun(t, false, func(_, _ *os.File, cmd *exec.Cmd) {
		f, err := os.Create(outFile)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = f
	}, "kcrash", "run", "-q", "--collect", "never", "--", "sh", "-c", script)
	defer m.Close()
	tm = &termReader{t: t, m: m}
	tm.expect("end")
	cmd.Wait()
	got, _ := os.ReadFile(outFile)
	if string(got) != "in-tty\nout-tty\n" {
		t.Errorf("stdout to a file got %q, want the stdout lines only, no \\r", got)
	}
	for _, want := range []string{"err-tty", "apart", "30 90"} {
		if !strings.Contains(tm.seen(), want) {
			t.Errorf("stdout to a file: no %q on the terminal: %q", want, tm.seen())
		}
	}
	if strings.Contains(tm.seen(), "out-tty") {
		t.Errorf("stdout reached the terminal: %q", tm.seen())
	}
}

// waitProc waits up to 10 s for a process whose command line is cmdline
// (arguments NUL-terminated, as in /proc/PID/cmdline).
func waitProc(t *testing.T, cmdline string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		all, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, f := range all {
			if b, _ := os.ReadFile(f); string(b) == cmdline {
				return
			}
		}
	}
	t.Fatalf("no process %q", cmdline)
}

// TestTerminalLayout: on a terminal kcrash made raw, each line of kcrash's
// own ends in "\r\n" (a bare "\n" would start the child's first line in the
// column where the start line ended), and the end line starts on a line of
// its own after a child that left the cursor mid-line (a progress bar),
// naming the verdict before the bundle.
func TestTerminalLayout(t *testing.T) {
	out := t.TempDir()
	m, _, cmd := onTerminal(t, false, "run", "--out", out, "--", "sh", "-c", `printf 'first line\n'; printf 'progress 12.3it/s'; kill -SEGV $$`)
	defer m.Close()
	tm := &termReader{t: t, m: m}
	tm.expect("bundle ")
	cmd.Wait()
	tm.expect("\n")
	seen := tm.seen()
	// The start line is written before the child starts, on the terminal
	// as the user left it: it comes first, and its line ends where the
	// terminal's settings end it.
	if !regexp.MustCompile(`^kcrash: supervising sh \(profile sglang, level 3\); bundles go to [^\n]*\r?\nfirst line\r\n`).MatchString(seen) {
		t.Errorf("the start line does not come first, on a line of its own: %q", seen)
	}
	if !strings.Contains(seen, "\r\nfirst line\r\n") {
		t.Errorf("the child's first line does not start at column 0: %q", seen)
	}
	if !regexp.MustCompile(`progress 12\.3it/s\r\nkcrash: sh died of SIGSEGV after [^\n]*: [a-z_]+ \([^\n]*\); bundle /[^\n]*\r\n`).MatchString(seen) {
		t.Errorf("end line not on a line of its own, or without the verdict before the bundle: %q", seen)
	}
	if n := strings.Count(seen, "; bundle "); n != 1 {
		t.Errorf("%d end lines naming the bundle, want 1: %q", n, seen)
	}
}
