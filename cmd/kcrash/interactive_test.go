package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// TestInteractiveTerminal gives kcrash a pty as its terminal, as a user's
// shell would: keys reach the child, the window size follows, the terminal
// is raw while the child runs and restored afterwards.
func TestInteractiveTerminal(t *testing.T) {
	m, before, cmd := onTerminal(t, false, "run", "-q", "--collect", "never", "--", "sh", "-c",
		`stty size; read a; echo "got:$a"; read b; echo "got:$b"; stty size; exit 4`)
	defer m.Close()
	var seen bytes.Buffer
	expect := func(s string) {
		t.Helper()
		buf := make([]byte, 4096)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(seen.String(), s) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %q; terminal showed %q", s, seen.String())
			}
			m.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, _ := m.Read(buf)
			seen.Write(buf[:n])
		}
	}
	expect("30 90")
	// While the child runs, kcrash's terminal is raw: no echo, no line editing.
	if cur, _ := unix.IoctlGetTermios(int(m.Fd()), unix.TCGETS); cur != nil && cur.Lflag&unix.ICANON != 0 {
		t.Error("terminal still canonical while the child runs")
	}
	m.Write([]byte("first\r"))
	expect("got:first")
	pty.Setsize(m, &pty.Winsize{Rows: 40, Cols: 100})
	time.Sleep(200 * time.Millisecond) // SIGWINCH is asynchronous
	m.Write([]byte("second\r"))
	expect("got:second")
	expect("40 100")
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

// TestInteractiveTerminalRestoredOnSignal: kcrash killed by SIGTERM twice
// (the second kills the child) still restores the terminal.
func TestInteractiveTerminalRestoredOnSignal(t *testing.T) {
	m, before, cmd := onTerminal(t, true, "run", "-q", "--collect", "never", "--", "sh", "-c", `trap "" TERM; echo ready; sleep 30`)
	defer m.Close()
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+9 {
		t.Fatalf("kcrash ended with %v, want 137 (child SIGKILLed)", err)
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
		if got := cmd.ProcessState.ExitCode(); got != tc.want {
			t.Errorf("%s: kcrash exited %d, want %d", tc.script, got, tc.want)
		}
	}
}

// onTerminal starts kcrash with a new pty as its controlling terminal, as a
// user's shell would. It returns the master side and the tty's termios before
// the start; with drain, the master is read and discarded in the background.
func onTerminal(t *testing.T, drain bool, args ...string) (*os.File, *unix.Termios, *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	m, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	pty.Setsize(m, &pty.Winsize{Rows: 30, Cols: 90})
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
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
