package collectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testenv"
)

// coreTestProc is a fake /proc with the given core_pattern.
func coreTestProc(t *testing.T, pattern string, usesPid bool) string {
	t.Helper()
	proc := t.TempDir()
	k := filepath.Join(proc, "sys", "kernel")
	os.MkdirAll(k, 0o755)
	memTestWrite(t, filepath.Join(k, "core_pattern"), pattern+"\n")
	v := "0\n"
	if usesPid {
		v = "1\n"
	}
	memTestWrite(t, filepath.Join(k, "core_uses_pid"), v)
	return proc
}

func coreTestEnv(proc, cwd string) *Env {
	env := NewEnv()
	env.ProcRoot = proc
	env.RootPid = 4242
	env.Cwd = cwd
	env.ExitSignal = "SIGSEGV"
	env.CoreDumped = true
	env.Start = time.Now().Add(-2 * time.Second)
	env.Tree = gpuTestTree{{Pid: 4242, Name: "python3"}}
	return env
}

func newCoreTestCollector() *coredumpCollector {
	return &coredumpCollector{coredumpDir: "/nonexistent", lookPath: func(string) (string, error) { return "", exec.ErrNotFound }}
}

func coreRun(t *testing.T, c *coredumpCollector, env *Env) (CoreDump, []evidence.Finding) {
	t.Helper()
	out := t.TempDir()
	if err := c.Collect(context.Background(), env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "raw", "coredump.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d CoreDump
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var fs []evidence.Finding
	for _, f := range env.Findings() {
		if f.Kind == evidence.NativeCrash {
			fs = append(fs, f)
		}
	}
	return d, fs
}

func TestCoredumpExpand(t *testing.T) {
	env := coreTestEnv(t.TempDir(), "/w")
	host, _ := os.Hostname()
	for pat, want := range map[string]string{
		"core":                        "core",
		"/var/cores/core.%e.%p.%s.%t": "/var/cores/core.python3.4242.11.*",
		"core.%%p.%P.%u.%g.%h":        "core.%p.4242.*.*." + host,
		"/tmp/[x]/core.%E":            "/tmp/[x]/core.*",
	} {
		if got := coreExpand(pat, env, syscall.SIGSEGV); got != want {
			t.Errorf("coreExpand(%q) = %q, want %q", pat, got, want)
		}
	}
	for in, want := range map[string]syscall.Signal{"SIGSEGV": syscall.SIGSEGV, "SEGV": syscall.SIGSEGV, "segmentation fault": syscall.SIGSEGV, "6": syscall.SIGABRT, "SIGKILL": syscall.SIGKILL, "": 0} {
		if got := coreSignal(in); got != want {
			t.Errorf("coreSignal(%q) = %v, want %v", in, got, want)
		}
	}
}

// A plain file pattern with specifiers: the newest matching file written
// during the run is the core; an older one is not.
func TestCoredumpFilePattern(t *testing.T) {
	dumps := t.TempDir()
	proc := coreTestProc(t, dumps+"/core.%e.%p.%t", false)
	old := filepath.Join(dumps, "core.python3.4242.1000")
	memTestWrite(t, old, "old")
	past := time.Now().Add(-time.Hour)
	os.Chtimes(old, past, past)
	core := filepath.Join(dumps, "core.python3.4242.1796204170")
	memTestWrite(t, core, strings.Repeat("x", 4096))
	memTestWrite(t, filepath.Join(dumps, "core.python3.999.1796204170"), "other pid")

	d, fs := coreRun(t, newCoreTestCollector(), coreTestEnv(proc, "/"))
	if !d.Found || d.Path != core || d.SizeBytes != 4096 || d.Kind != "file" || d.Pattern != dumps+"/core.%e.%p.%t" {
		t.Errorf("%+v", d)
	}
	if len(fs) != 1 || fs[0].Source != evidence.SourceExit || fs[0].Text != fmt.Sprintf("core dumped: %s (4096 bytes)", core) || fs[0].Details["path"] != core {
		t.Errorf("findings %+v", fs)
	}

	// core_uses_pid appends .<pid> to a pattern without %p; relative
	// patterns land in the child's cwd.
	cwd := t.TempDir()
	memTestWrite(t, filepath.Join(cwd, "core.4242"), "core")
	d, _ = coreRun(t, newCoreTestCollector(), coreTestEnv(coreTestProc(t, "core", true), cwd))
	if !d.Found || d.Path != filepath.Join(cwd, "core.4242") {
		t.Errorf("core_uses_pid: %+v", d)
	}

	// Only an old file: not this crash's core.
	d, _ = coreRun(t, newCoreTestCollector(), coreTestEnv(coreTestProc(t, dumps+"/core.%e.%p.1000", false), "/"))
	if d.Found || !strings.Contains(d.Note, "predate this run") {
		t.Errorf("stale: %+v", d)
	}
}

func TestCoredumpPipeHandlers(t *testing.T) {
	// A handler that is not installed: said plainly, the core is lost.
	env := coreTestEnv(coreTestProc(t, "|/nonexistent/kcrash-core-handler %p %s", false), "/")
	d, fs := coreRun(t, newCoreTestCollector(), env)
	if d.Found || d.Kind != "pipe" || d.Handler != "/nonexistent/kcrash-core-handler" || d.HandlerOK == nil || *d.HandlerOK ||
		!strings.Contains(d.Note, "not installed") {
		t.Errorf("%+v", d)
	}
	if len(fs) != 1 || !strings.HasPrefix(fs[0].Text, "core dumped to the pipe handler /nonexistent/kcrash-core-handler; ") {
		t.Errorf("findings %+v", fs)
	}

	// systemd-coredump: found in its store by pid.
	tmp := t.TempDir()
	handler := filepath.Join(tmp, "lib", "systemd", "systemd-coredump")
	os.MkdirAll(filepath.Dir(handler), 0o755)
	memTestWrite(t, handler, "#!/bin/sh\n")
	store := filepath.Join(tmp, "coredump")
	os.MkdirAll(store, 0o755)
	core := filepath.Join(store, "core.python3.0.6a1f0c3e5b9d4a7c8e2f1b0d9c8a7b6e.4242.1796204170000000.zst")
	memTestWrite(t, core, "zstd core")
	c := newCoreTestCollector()
	c.coredumpDir = store
	d, _ = coreRun(t, c, coreTestEnv(coreTestProc(t, "|"+handler+" %P %u %g %s %t %c %h", false), "/"))
	if !d.Found || d.Path != core || d.Kind != "pipe" || d.HandlerOK == nil || !*d.HandlerOK {
		t.Errorf("systemd: %+v", d)
	}
}

func TestCoredumpSkip(t *testing.T) {
	env := coreTestEnv(t.TempDir(), "/")
	env.CoreDumped, env.ExitSignal = false, ""
	if err := newCoreTestCollector().Collect(context.Background(), env, NewOutput(t.TempDir())); !errors.Is(err, ErrSkipped) {
		t.Errorf("clean exit: %v", err)
	}
	env.ExitSignal = "SIGKILL"
	err := newCoreTestCollector().Collect(context.Background(), env, NewOutput(t.TempDir()))
	if !errors.Is(err, ErrSkipped) || !strings.Contains(err.Error(), "SIGKILL") {
		t.Errorf("SIGKILL: %v", err)
	}
}

// A real segfault with the core limit raised, located through this host's
// own core_pattern. The pattern is left as it is: a file pattern must lead
// to the core; a pipe handler must be reported for what it is.
func TestCoredumpRealSegfault(t *testing.T) {
	sh := gpuTestLook(t, "sh")
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_CORE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Max == 0 {
		testenv.Skip(t, "hard core size limit is 0: no core can be written")
	}
	raised := syscall.Rlimit{Cur: old.Max, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &raised); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_CORE, &old) })

	pattern, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	start := time.Now()
	cmd := exec.Command(sh, "-c", "kill -SEGV $$")
	cmd.Dir = cwd
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGSEGV {
		t.Fatalf("child ended %v", ee)
	}
	env := NewEnv()
	env.RootPid, env.Cwd, env.Start = cmd.Process.Pid, cwd, start
	env.ExitSignal, env.CoreDumped = "SIGSEGV", ws.CoreDump()
	env.Tree = gpuTestTree{{Pid: int32(cmd.Process.Pid), Name: filepath.Base(sh)}}
	d, fs := coreRun(t, &coredumpCollector{coredumpDir: "/var/lib/systemd/coredump", lookPath: exec.LookPath, wait: 3 * time.Second}, env)
	t.Logf("core_pattern %q: %+v", strings.TrimSpace(string(pattern)), d)
	if d.Pattern != strings.TrimRight(string(pattern), "\n") {
		t.Errorf("pattern %q", d.Pattern)
	}
	if strings.HasPrefix(d.Pattern, "|") {
		handler := strings.Fields(d.Pattern[1:])[0]
		_, statErr := os.Stat(handler)
		if d.Kind != "pipe" || d.Handler != handler || d.HandlerOK == nil || *d.HandlerOK != (statErr == nil) || (!d.Found && d.Note == "") {
			t.Errorf("pipe handler reported as %+v", d)
		}
		return
	}
	if !ws.CoreDump() {
		t.Fatalf("no core dumped with RLIMIT_CORE %d and core_pattern %q", raised.Cur, d.Pattern)
	}
	if !d.Found || d.SizeBytes <= 0 || d.Kind != "file" {
		t.Fatalf("core not found: %+v", d)
	}
	if !filepath.IsAbs(d.Pattern) && filepath.Dir(d.Path) != cwd {
		t.Errorf("relative pattern %q: core at %s, want it in the child's cwd %s", d.Pattern, d.Path, cwd)
	}
	if !strings.HasPrefix(d.Path, cwd) {
		os.Remove(d.Path) // ours, written outside the temp dir by an absolute pattern
	}
	if len(fs) != 1 || fs[0].Pid != cmd.Process.Pid || !strings.Contains(fs[0].Text, d.Path) {
		t.Errorf("findings %+v", fs)
	}
}

// The pipe case for real: core_pattern pointed at a handler that does not
// exist for as long as one child takes to crash, then restored. Every
// process of the host that crashes meanwhile loses its core, so it runs
// only when asked (KCRASH_TEST_MUTATE_HOST=1, which .ci/run sets; under
// CI=true without it the test fails) and as root.
func TestCoredumpRealMissingPipeHandler(t *testing.T) {
	testenv.MutateHost(t, "points the host's core_pattern at a missing handler for a moment")
	testenv.NeedRoot(t, "writing /proc/sys/kernel/core_pattern")
	const file = "/proc/sys/kernel/core_pattern"
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := os.WriteFile(file, orig, 0o644); err != nil {
			t.Errorf("restoring core_pattern to %q: %v", orig, err)
		}
	}
	cmd := exec.Command(gpuTestLook(t, "sh"), "-c", "kill -SEGV $$")
	cmd.Dir = t.TempDir()
	handler := "/nonexistent/kcrash-test-handler"
	if err := os.WriteFile(file, []byte("|"+handler+" %p"), 0o644); err != nil {
		testenv.Skip(t, "core_pattern not writable: %v", err)
	}
	t.Cleanup(restore) // also on a failure below; writing it twice is harmless
	start := time.Now()
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) {
		t.Fatalf("child: %v", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	env := NewEnv()
	env.RootPid, env.Cwd, env.Start = cmd.Process.Pid, cmd.Dir, start
	env.ExitSignal, env.CoreDumped = "SIGSEGV", ws.CoreDump()
	d, _ := coreRun(t, newCoreTestCollector(), env)
	restore() // the collector has read the pattern: give the host its own back now
	t.Logf("wait status core dumped=%v: %+v", ws.CoreDump(), d)
	if d.Kind != "pipe" || d.Handler != handler || d.HandlerOK == nil || *d.HandlerOK || d.Found || !strings.Contains(d.Note, "not installed") {
		t.Errorf("%+v", d)
	}
}
