package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A SIGINT sent to kcrash repro reaches the run in progress (through the
// run's own kcrash), the run ends as an interrupt, and the series stops there
// with 130 instead of starting the next run.
func TestReproInterruptStopsSeries(t *testing.T) {
	dir := t.TempDir()
	script := `if [ -n "$REPRO_TEST_SLEEP" ]; then touch started; exec sleep 60; fi; exit 3`
	r := kcrashIn(t, dir, time.Minute, "run", "-q", "--profile", "none", "--out", "orig", "--", "sh", "-c", script)
	if r.code != 3 {
		t.Fatalf("original: exit %d: %s", r.code, r.stderr)
	}
	b := oneBundle(t, filepath.Join(dir, "orig"))

	cmd := exec.Command(kcrashBin(t), "repro", b.Path, "--times", "3", "--out", filepath.Join(dir, "rep"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "REPRO_TEST_SLEEP=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never started; stderr:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	begin := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if took := time.Since(begin); took > 20*time.Second {
		t.Errorf("repro took %s to stop", took)
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d, want 130\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "stopped after run 1 of 3: interrupted") || !strings.Contains(out.String(), "0 of 1 runs crashed") || strings.Contains(errb.String(), "run 2 of 3") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
}
