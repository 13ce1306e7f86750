package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/procfs"
	"golang.org/x/sys/unix"
)

// A shell's job control treats `kcrash run -- CMD` as it treats CMD: these
// tests drive a real interactive bash on a pty, as a user's terminal would,
// in each of kcrash's three ways of running the child.

var jobModes = []struct {
	name     string
	flags    string
	redirect string // where the job's output goes
}{
	{"interactive", "", ""},
	{"batch", "", " >OUT"},
	{"no-pty", " --no-pty", ""},
}

// shell is an interactive bash on a pty, at a prompt "$ ".
type shell struct {
	t   *testing.T
	tm  *termReader
	m   *os.File
	pid int
}

func newShell(t *testing.T) *shell {
	t.Helper()
	m, _, cmd := onTerminalRun(t, false, nil, "bash", "--norc", "--noprofile", "-i")
	sh := &shell{t: t, tm: &termReader{t: t, m: m}, m: m, pid: cmd.Process.Pid}
	t.Cleanup(func() {
		// Everything in the shell's session goes: jobs left stopped would
		// make bash refuse to exit.
		pids, _ := procfs.FS{}.Pids()
		for _, pid := range pids {
			if st, err := (procfs.FS{}).Stat(pid); err == nil && st.Session == cmd.Process.Pid {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		cmd.Wait()
		m.Close()
	})
	sh.send("PS1='$ '; HISTFILE=/dev/null; TERM=dumb\r")
	sh.tm.expect("\r$ ")
	return sh
}

func (sh *shell) send(s string) { sh.m.Write([]byte(s)) }

// fg brings the job to the foreground and waits until the shell has given
// it the terminal: what is typed before, the shell may read itself (with
// the bare command too).
func (sh *shell) fg() {
	sh.t.Helper()
	sh.send("fg\r")
	waitFor(sh.t, func() bool {
		pgrp, err := unix.IoctlGetInt(int(sh.m.Fd()), unix.TIOCGPGRP)
		return err == nil && pgrp != sh.pid
	})
}

// run types line and waits for want, then for the next prompt (want may
// be the prompt itself).
func (sh *shell) run(line, want string) {
	sh.t.Helper()
	sh.send(line + "\r")
	sh.tm.expect(want)
	if want != "$ " {
		sh.tm.expect("$ ")
	}
}

// TestBackgroundJobRuns: `kcrash run -- CMD &` runs in the background until
// the job reads the terminal, as `CMD &` does (kcrash used to stop at once,
// "Stopped (tty input)", touching the terminal from the background), and a
// job that reads stops then and gets its input after fg.
func TestBackgroundJobRuns(t *testing.T) {
	for _, mode := range jobModes {
		t.Run(mode.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			redirect := strings.ReplaceAll(mode.redirect, "OUT", out)
			sh := newShell(t)
			sh.run(fmt.Sprintf(`kcrash run -q --collect never%s -- sh -c 'echo bg-$((6*7))'%s &`, mode.flags, redirect), "$ ")
			sh.run("wait; jobs; echo waited", "waited")
			if mode.redirect != "" {
				sh.run("cat "+out, "bg-42")
			} else if !strings.Contains(sh.tm.seen(), "bg-42") {
				t.Fatalf("the background job never wrote:\n%s", sh.tm.seen())
			}
			if s := sh.tm.seen(); strings.Contains(s, "Stopped") {
				t.Fatalf("the background job stopped:\n%s", s)
			}

			sh.run(fmt.Sprintf(`kcrash run -q --collect never%s -- sh -c 'read x; echo got-$x'%s &`, mode.flags, redirect), "$ ")
			if mode.name != "batch" {
				// With a pty between them, the child never meets the terminal:
				// kcrash waits to be in the foreground to read it.
				sh.send("sleep 0.5; jobs\r")
				sh.tm.expect("$ ")
			}
			sh.fg()
			sh.send("hello\r")
			if mode.redirect != "" {
				sh.tm.expect("$ ")
				sh.run("cat "+out, "got-hello")
			} else {
				sh.tm.expect("got-hello")
				sh.tm.expect("$ ")
			}
		})
	}
}

// TestBackgroundReaderStops: a --no-pty job that reads the terminal from the
// background stops as the bare command would ("Stopped (tty input)"), with
// kcrash, so that the shell sees it and fg resumes it.
func TestBackgroundReaderStops(t *testing.T) {
	sh := newShell(t)
	sh.run(`kcrash run -q --collect never --no-pty -- sh -c 'read x; echo got-$x' &`, "$ ")
	for i := 0; !strings.Contains(sh.tm.seen(), "Stopped (tty input)"); i++ {
		if i == 100 {
			t.Fatalf("the job never showed as stopped:\n%s", sh.tm.seen())
		}
		sh.run("sleep 0.1; jobs -l", "$ ")
	}
	sh.fg()
	sh.send("hello\r")
	sh.tm.expect("got-hello")
	sh.run("echo status-$?", "status-0")
}

// TestCtrlZSuspendsJob: ^Z typed while kcrash runs suspends the job and
// gives the shell its prompt back, with the job shown as stopped, as for the
// bare command; fg resumes the child where it was, and ^C then ends it.
// (Under the pty the kernel drops the child's SIGTSTP, its group being
// orphaned: the job used to go on running with the shell waiting.)
//
// The job is bash, not sh: dash starts each sleep with vfork(2), and a ^Z
// that lands between the vfork and the exec stops the new child while dash
// waits for that exec in the kernel, unable to stop: nothing the job's
// parent can wait for ever stops, and bash would wait for the bare
// command as it waits for kcrash (1 run in about 20 here).
func TestCtrlZSuspendsJob(t *testing.T) {
	for _, mode := range jobModes {
		t.Run(mode.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			redirect := strings.ReplaceAll(mode.redirect, "OUT", out)
			sh := newShell(t)
			sh.send(fmt.Sprintf(`kcrash run -q --collect never%s -- bash -c 'echo started; i=0; while :; do i=$((i+1)); echo tick-$i; sleep 0.05; done'%s`+"\r", mode.flags, redirect))
			waitFor(t, func() bool { return strings.Contains(sh.tm.seen(), "tick-3") || fileHas(out, "tick-3") })
			sh.send("\x1a")
			sh.tm.expect("Stopped")
			sh.tm.expect("$ ")
			// While stopped, the child writes nothing more.
			last := lastTick(sh.tm.seen() + readFile(out))
			sh.run("sleep 0.3; jobs", "Stopped")
			if now := lastTick(sh.tm.seen() + readFile(out)); now != last {
				t.Fatalf("the child went on while stopped (tick-%d, then tick-%d):\n%s", last, now, sh.tm.seen())
			}
			sh.fg()
			waitFor(t, func() bool { return lastTick(sh.tm.seen()+readFile(out)) > last+3 })
			sh.send("\x03")
			sh.tm.expect("$ ") // typed ahead, it would be flushed with the ^C
			sh.run("echo status-$?", "status-130")
		})
	}
}

func readFile(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}

func fileHas(name, s string) bool { return strings.Contains(readFile(name), s) }

// lastTick is the highest tick-N in s.
func lastTick(s string) int {
	last := 0
	for _, f := range strings.Split(s, "tick-")[1:] {
		var n int
		if _, err := fmt.Sscanf(f, "%d", &n); err == nil && n > last {
			last = n
		}
	}
	return last
}

// waitFor polls cond for up to 10 s: what it waits on (a file a child writes,
// a process's state) sends no event.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
	}
}

// TestTostopStopsBackgroundWriter: with `stty tostop`, a background job that
// writes to the terminal stops ("Stopped (tty output)") as the bare command
// does, kcrash with it, and writes once brought to the foreground. (kcrash's
// own write used to restart for ever at full CPU, the job shown running.)
func TestTostopStopsBackgroundWriter(t *testing.T) {
	for _, mode := range []string{"", " --no-pty"} {
		sh := newShell(t)
		sh.run("stty tostop", "$ ")
		sh.run(`kcrash run -q --collect never`+mode+` -- sh -c 'echo out-$((6*7))' &`, "$ ")
		for i := 0; !strings.Contains(sh.tm.seen(), "Stopped (tty output)"); i++ {
			if i == 100 {
				t.Fatalf("%q: the job never showed as stopped:\n%s", mode, sh.tm.seen())
			}
			sh.run("sleep 0.1; jobs -l", "$ ")
		}
		if strings.Contains(sh.tm.seen(), "out-42") {
			t.Fatalf("%q: the job wrote while in the background:\n%s", mode, sh.tm.seen())
		}
		sh.send("fg\r")
		sh.tm.expect("out-42")
		sh.tm.expect("$ ") // typed ahead, the job would take it
		sh.run("echo status-$?", "status-0")
	}
}
