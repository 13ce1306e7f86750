package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The secret of the killed run: no token shape, so only the stage's record
// of the run's secrets (their prints) lets a later kcrash redact it.
const killedRunSecret = "tok-run-only-5e0c9a2d7b41"

// killWhileCollecting runs `kcrash run` whose child crashes while a GPU tool
// hangs at collection (an nvidia-smi stand-in that blocks once a stage
// exists), and SIGKILLs kcrash once the stage's writer record and
// output.log are on disk and the tool hangs: what a scheduler's SIGKILL
// after KillWait does. It returns the --out directory and the killed pid.
func killWhileCollecting(t *testing.T) (string, int) {
	t.Helper()
	out, bin := t.TempDir(), t.TempDir()
	smi := fmt.Sprintf(`#!/bin/sh
for s in %[1]q/.kcrash-stage-*/output.log; do
  if [ -e "$s" ]; then echo $$ > %[2]q/smi.pid; exec sleep 1000; fi
done
exit 1
`, out, bin)
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(bin, "smi.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	child := `echo "step 40 ok"; echo "downloading with $HF_TOKEN"; echo "step 41 ok"; ` +
		`echo "RuntimeError: CUDA error: an illegal memory access was encountered"; kill -SEGV $$`
	cmd := exec.Command(kcrashBin(t), "run", "--no-pty", "--out", out, "--collector-timeout", "60s",
		"--skip-collectors", "stacks", "--", "sh", "-c", child)
	cmd.Env = append(envWithout("HF_TOKEN", "PATH", "KCRASH_AGENT_SOCKET"), "PATH="+bin+":"+os.Getenv("PATH"),
		"HF_TOKEN="+killedRunSecret, "KCRASH_AGENT_SOCKET="+filepath.Join(bin, "no-agent.sock"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := func() bool {
		rec, _ := filepath.Glob(filepath.Join(out, ".kcrash-stage-*", ".kcrash-writer.json"))
		log, _ := filepath.Glob(filepath.Join(out, ".kcrash-stage-*", "output.log"))
		_, err := os.Stat(filepath.Join(bin, "smi.pid"))
		return len(rec) == 1 && len(log) == 1 && err == nil
	}
	for deadline := time.Now().Add(60 * time.Second); !ready(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("kcrash never got to a hung collection; stderr:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if bundles, _ := filepath.Glob(filepath.Join(out, "kcrash-*.tar.gz")); len(bundles) != 0 {
		t.Fatalf("a bundle was written before the kill: %v", bundles)
	}
	return out, cmd.Process.Pid
}

func envWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+k+" ") {
			env = append(env, kv)
		}
	}
	return env
}

// A kcrash SIGKILLed while it collects loses no evidence: the next kcrash
// command on its --out (show DIR, or run) makes the bundle from its stage,
// incomplete, redacted, with the child's last lines and a verdict.
func TestRecoverKilledWhileCollecting(t *testing.T) {
	for _, next := range []string{"show", "run"} {
		t.Run(next, func(t *testing.T) {
			out, pid := killWhileCollecting(t)
			args := []string{"show", out}
			if next == "run" {
				args = []string{"run", "--no-pty", "-q", "--out", out, "--", "true"}
			}
			r := runKcrash(t, 60*time.Second, []string{"HF_TOKEN="}, args...)
			if r.code != 0 {
				t.Fatalf("kcrash %s: exit %d; stderr:\n%s", next, r.code, r.stderr)
			}
			b := oneBundle(t, out)
			line := fmt.Sprintf("kcrash: recovered the bundle of a kcrash killed while collecting (pid %d): ", pid)
			if !strings.Contains(r.stderr, line) || !strings.Contains(r.stderr, filepath.Base(b.Path)+" (incomplete)") {
				t.Errorf("stderr lacks %q…%s (incomplete):\n%s", line, filepath.Base(b.Path), r.stderr)
			}
			if next == "show" && !strings.Contains(r.stdout, "Incomplete bundle") {
				t.Errorf("show printed:\n%s", r.stdout)
			}
			if left, _ := filepath.Glob(filepath.Join(out, ".kcrash-*")); len(left) != 0 {
				t.Errorf("left in --out: %v", left)
			}
			m := b.Manifest
			notes := strings.Join(m.Notes, "\n")
			if !m.Incomplete || !strings.Contains(notes, "killed while it collected") || !strings.Contains(notes, "collectors that finished: ") ||
				!strings.Contains(notes, "not collected (unfinished when kcrash was killed): gpu") {
				t.Errorf("manifest incomplete %v, notes:\n%s", m.Incomplete, notes)
			}
			if m.Mode != "run" || m.Exit.Signal == nil || *m.Exit.Signal != "SIGSEGV" || len(m.Command) != 3 {
				t.Errorf("manifest mode %q exit %+v command %q", m.Mode, m.Exit, m.Command)
			}
			tri := triageOf(t, b)
			if tri.Verdict.Kind != "gpu_illegal_memory_access" {
				t.Errorf("verdict %q, want the output's gpu_illegal_memory_access", tri.Verdict.Kind)
			}
			logb, ok := b.File("output.log")
			if !ok || !strings.Contains(string(logb), "step 41 ok\nRuntimeError: CUDA error: an illegal memory access") {
				t.Errorf("output.log:\n%s", logb)
			}
			for _, n := range b.Names() {
				data, _ := b.File(n)
				if strings.Contains(string(data), killedRunSecret) || strings.Contains(n, ".kcrash-") {
					t.Errorf("%s: holds the run's secret or is the stage's own", n)
				}
			}
			if !strings.Contains(string(logb), "downloading with [REDACTED]") {
				t.Errorf("the secret's line is not masked in output.log:\n%s", logb)
			}
		})
	}
}
