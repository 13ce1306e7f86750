package supervisor

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/supervisor/ringbuf"
)

// syncBuffer is a bytes.Buffer safe for the passthrough goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

func devNull(t *testing.T) *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func runChild(t *testing.T, noPty bool, args ...string) (*Result, *syncBuffer, *syncBuffer, *ringbuf.Ring) {
	t.Helper()
	var out, errb syncBuffer
	ring := ringbuf.New(1 << 20)
	c, err := Start(Options{Args: args, Env: os.Environ(), NoPty: noPty, Stdin: devNull(t), Stdout: &out, Stderr: &errb, Ring: ring})
	if err != nil {
		t.Fatalf("Start(%q): %v", args, err)
	}
	done := make(chan *Result, 1)
	go func() { done <- c.Wait() }()
	select {
	case r := <-done:
		return r, &out, &errb, ring
	case <-time.After(30 * time.Second):
		c.Kill()
		t.Fatalf("%q did not finish", args)
	}
	return nil, nil, nil, nil
}

func TestExitStatusMatrix(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		status int
		sig    syscall.Signal
	}{
		{"exit0", []string{"sh", "-c", "exit 0"}, 0, 0},
		{"exit1", []string{"sh", "-c", "exit 1"}, 1, 0},
		{"exit2", []string{"sh", "-c", "exit 2"}, 2, 0},
		{"exit42", []string{"sh", "-c", "exit 42"}, 42, 0},
		{"exit255", []string{"sh", "-c", "exit 255"}, 255, 0},
		{"SIGSEGV", []string{"sh", "-c", "kill -SEGV $$"}, 128 + 11, syscall.SIGSEGV},
		{"SIGABRT", []string{"sh", "-c", "kill -ABRT $$"}, 128 + 6, syscall.SIGABRT},
		{"SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9, syscall.SIGKILL},
		{"SIGTERM", []string{"sh", "-c", "kill -TERM $$"}, 128 + 15, syscall.SIGTERM},
		{"SIGBUS", []string{"sh", "-c", "kill -BUS $$"}, 128 + 7, syscall.SIGBUS},
		{"SIGFPE", []string{"sh", "-c", "kill -FPE $$"}, 128 + 8, syscall.SIGFPE},
	}
	if _, err := exec.LookPath("python3"); err == nil {
		cases = append(cases,
			struct {
				name   string
				args   []string
				status int
				sig    syscall.Signal
			}{"python-abort", []string{"python3", "-c", "import os; os.abort()"}, 128 + 6, syscall.SIGABRT},
			struct {
				name   string
				args   []string
				status int
				sig    syscall.Signal
			}{"python-segfault", []string{"python3", "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)"}, 128 + 11, syscall.SIGSEGV},
		)
	}
	for _, mode := range []struct {
		name  string
		noPty bool
	}{{"pty", false}, {"pipes", true}} {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				r, _, _, _ := runChild(t, mode.noPty, tc.args...)
				if r.ExitStatus() != tc.status || r.Signal != tc.sig {
					t.Fatalf("status %d signal %v, want %d %v", r.ExitStatus(), r.Signal, tc.status, tc.sig)
				}
			})
		}
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := dir + "/script.sh"
	os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644)
	badInterp := dir + "/bad.sh"
	os.WriteFile(badInterp, []byte("#!/nonexistent/interpreter\n"), 0o755)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"kcrash-no-such-command-xyz"}, 127, `cannot run "kcrash-no-such-command-xyz": executable file not found in $PATH`},
		{[]string{dir + "/missing"}, 127, "no such file or directory"},
		{[]string{notExec}, 126, "permission denied"},
		{[]string{dir}, 126, "is a directory"},
		{[]string{badInterp}, 127, "no such file or directory"},
	} {
		_, err := Start(Options{Args: tc.args, Env: os.Environ(), Stdin: devNull(t), Stdout: &bytes.Buffer{}})
		se, ok := err.(*StartError)
		if !ok || se.Code != tc.code || !strings.Contains(se.Error(), tc.msg) {
			t.Errorf("%q: got %v (%T), want code %d with %q", tc.args, err, err, tc.code, tc.msg)
		}
	}
}

// The last bytes before a crash are the most valuable: a final line with no
// newline, written just before dying, must reach both stdout and the ring.
func TestPtyDrainsLastBytes(t *testing.T) {
	r, out, _, ring := runChild(t, false, "sh", "-c", `printf 'line1\nno newline at the end'; kill -SEGV $$`)
	want := "line1\nno newline at the end"
	if r.Signal != syscall.SIGSEGV {
		t.Fatalf("signal %v", r.Signal)
	}
	if got := string(out.Bytes()); got != want {
		t.Fatalf("stdout %q, want %q (batch pty must not add \\r)", got, want)
	}
	if got := string(ring.Bytes()); got != want {
		t.Fatalf("ring %q, want %q", got, want)
	}
}

func TestNoPtyKeepsStreamsApartAndExact(t *testing.T) {
	src := t.TempDir() + "/random"
	data := make([]byte, 64<<20)
	rand.Read(data)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Two pipes have no common order: the child writes to stderr only once
	// stdout has passed all through, so that the ring's order is the one written.
	in, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	defer inW.Close()
	var out, errb syncBuffer
	ring := ringbuf.New(1 << 20)
	c, err := Start(Options{Args: []string{"sh", "-c", "cat " + src + "; read go; echo to-stderr >&2"}, Env: os.Environ(), NoPty: true,
		Stdin: in, Stdout: &out, Stderr: &errb, Ring: ring})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(out.Bytes()) >= len(data) }, "all of stdout")
	inW.Write([]byte("go\n"))
	r := c.Wait()
	if r.ExitStatus() != 0 {
		t.Fatalf("status %d", r.ExitStatus())
	}
	if sha256.Sum256(out.Bytes()) != sha256.Sum256(data) {
		t.Fatalf("stdout differs from the 64 MiB written (got %d bytes)", len(out.Bytes()))
	}
	if string(errb.Bytes()) != "to-stderr\n" {
		t.Fatalf("stderr %q", errb.Bytes())
	}
	tail := ring.Bytes()
	if !bytes.HasSuffix(tail, []byte("to-stderr\n")) || !bytes.Equal(tail[:len(tail)-10], data[len(data)-(len(tail)-10):]) {
		t.Fatal("ring does not hold the last bytes of stdout followed by stderr")
	}
}

func TestStdinReachesChildAndEOF(t *testing.T) {
	in, w, _ := os.Pipe()
	defer in.Close()
	go func() { w.Write([]byte("hello from stdin\npartial")); w.Close() }()
	for _, noPty := range []bool{false, true} {
		if noPty {
			in2, w2, _ := os.Pipe()
			go func() { w2.Write([]byte("hello from stdin\npartial")); w2.Close() }()
			in = in2
		}
		var out syncBuffer
		c, err := Start(Options{Args: []string{"sh", "-c", "cat; echo; echo done"}, Env: os.Environ(), NoPty: noPty, Stdin: in, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		r := c.Wait()
		if r.ExitStatus() != 0 || string(out.Bytes()) != "hello from stdin\npartial\ndone\n" {
			t.Fatalf("noPty=%v: status %d output %q", noPty, r.ExitStatus(), out.Bytes())
		}
	}
}

// blockingWriter never returns: a terminal paused with ^S, a stuck pipe.
type blockingWriter struct{ ch chan struct{} }

func (b blockingWriter) Write(p []byte) (int, error) { <-b.ch; return len(p), nil }

func TestSlowStdoutNeverBlocksChild(t *testing.T) {
	bw := blockingWriter{make(chan struct{})}
	defer close(bw.ch)
	ring := ringbuf.New(1 << 20)
	c, err := Start(Options{Args: []string{"sh", "-c", "head -c 20000000 /dev/zero; echo END"}, Env: os.Environ(), NoPty: true, Stdin: devNull(t), Stdout: bw, Stderr: bw, Ring: ring})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Result, 1)
	go func() { done <- c.Wait() }()
	select {
	case r := <-done:
		if r.StdoutDropped == 0 {
			t.Fatal("nothing reported as dropped")
		}
		if !bytes.HasSuffix(ring.Bytes(), []byte("END\n")) {
			t.Fatal("ring lost the tail")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stuck stdout blocked the child")
	}
}

// A second SIGTERM is forwarded like the first, never turned into SIGKILL:
// the child's shutdown handler runs for each.
func TestSecondTermForwarded(t *testing.T) {
	var out syncBuffer
	c, err := Start(Options{Args: []string{"sh", "-c", "n=0; trap 'n=$((n+1)); echo got-term-$n; [ $n -ge 2 ] && exit 7' TERM; echo ready; while :; do sleep 0.05; done"}, Env: os.Environ(), Stdin: devNull(t), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(string(out.Bytes()), "ready") }, "the child's trap")
	c.handleSignal(syscall.SIGTERM)
	waitFor(t, func() bool { return strings.Contains(string(out.Bytes()), "got-term-1") }, "the first SIGTERM")
	c.handleSignal(syscall.SIGTERM)
	r := c.Wait()
	if r.Signal != 0 || r.Code != 7 || r.Escalated {
		t.Fatalf("child ended with signal %v code %d escalated %v, want exit 7 from its own handler of the second SIGTERM", r.Signal, r.Code, r.Escalated)
	}
	if !strings.Contains(string(out.Bytes()), "got-term-2") {
		t.Fatalf("second SIGTERM not forwarded: %q", out.Bytes())
	}
}

func TestKillAfter(t *testing.T) {
	var out syncBuffer
	c, err := Start(Options{Args: []string{"sh", "-c", "trap '' TERM; echo ready; sleep 30"}, Env: os.Environ(), Stdin: devNull(t), Stdout: &out, KillAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(string(out.Bytes()), "ready") }, "the child's trap")
	begin := time.Now()
	c.handleSignal(syscall.SIGTERM)
	r := c.Wait()
	if r.Signal != syscall.SIGKILL || time.Since(begin) > 5*time.Second {
		t.Fatalf("signal %v after %s", r.Signal, time.Since(begin))
	}
}

func TestTrackerRemembersExitedDescendants(t *testing.T) {
	// The child starts a sleep, and ends it when told to: the tracker samples
	// it alive, then gone.
	in, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	defer inW.Close()
	var out syncBuffer
	c, err := Start(Options{Args: []string{"sh", "-c", "sleep 30 & echo started; read a; kill $!; wait; echo gone; read b"}, Env: os.Environ(), Stdin: in, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(c.Pid())
	tr.Seed([]string{"sh"}, time.Now())
	waitFor(t, func() bool { return strings.Contains(string(out.Bytes()), "started") }, "the sleep")
	// sh echoes "started" once it forked for the sleep, which may not have
	// exec'd yet: sample until the tracker has seen the sleep itself.
	waitFor(t, func() bool {
		tr.Sample(t.Context())
		for _, p := range tr.Processes() {
			if p.Name == "sleep" {
				return true
			}
		}
		return false
	}, "the sleep sampled alive")
	inW.Write([]byte("\n"))
	waitFor(t, func() bool { return strings.Contains(string(out.Bytes()), "gone") }, "the sleep's end")
	tr.Sample(t.Context())
	inW.Write([]byte("\n"))
	c.Wait()
	tr.MarkExited(c.Pid())
	var sawSleep, sleepExited bool
	for _, p := range tr.Processes() {
		if p.Name == "sleep" && p.PPid == int32(c.Pid()) {
			sawSleep = true
			sleepExited = sleepExited || p.Exited
		}
	}
	if !sawSleep || !sleepExited {
		t.Fatalf("tracker lost the exited child: %+v", tr.Processes())
	}
}

// waitFor waits up to 20 s for cond, the event what names.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A worker that starts and dies between two samples is still in the tree,
// with how it died, when the kernel's process events can be read (root).
func TestTrackerEventsCatchShortLivedWorker(t *testing.T) {
	testenv.NeedRoot(t, "the process events connector")
	c, err := Start(Options{Args: []string{"sh", "-c", `sleep 0.3; sh -c 'kill -SEGV $$'; sleep 0.3`}, Env: os.Environ(), Stdin: devNull(t), Stdout: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(c.Pid())
	tr.Seed([]string{"sh"}, time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Events(ctx) }()
	c.Wait()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Events: %v", err)
	}
	var found bool
	for _, p := range tr.Processes() {
		if p.PPid == int32(c.Pid()) && p.ExitSignal == "SIGSEGV" && p.Exited {
			found = true
		}
	}
	if !found {
		t.Fatalf("no exited child with SIGSEGV recorded: %+v", tr.Processes())
	}
}

// A daemonized grandchild that keeps the child's stdout (pty or pipe) open
// does not keep Wait from returning once the output has gone quiet, and the
// last bytes written before the child's exit are there.
func TestGrandchildHoldingOutputDoesNotBlockWait(t *testing.T) {
	for _, noPty := range []bool{false, true} {
		begin := time.Now()
		r, out, _, _ := runChild(t, noPty, "sh", "-c", "trap '' HUP; sleep 30 & echo last words")
		syscall.Kill(-r.Pid, syscall.SIGKILL) // the grandchild, in the child's group
		if r.ExitStatus() != 0 || !strings.Contains(string(out.Bytes()), "last words") {
			t.Fatalf("noPty=%v: status %d output %q", noPty, r.ExitStatus(), out.Bytes())
		}
		if d := time.Since(begin); d > 4*time.Second {
			t.Fatalf("noPty=%v: Wait took %s while a grandchild held the output", noPty, d)
		}
	}
}
