package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/calldiff"
	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/repro"
	"github.com/kcrash/kcrash/triage"
)

// torchPython is Debian's python3 with python3-torch (the default python3
// of a developer's machine may be another one, without torch).
const torchPython = "/usr/bin/python3"

func needTorch(t *testing.T) {
	t.Helper()
	out, err := exec.Command(torchPython, "-c", "import torch; print(torch.__version__)").CombinedOutput()
	if err != nil {
		testenv.Skip(t, "needs %s with torch (apt-get install python3-torch): %v: %s", torchPython, err, bytes.TrimSpace(out))
	}
}

// tinyModel copies the test model (testdata/tinymodel: ops wrapped by a
// stand-in of SGLang's kernel-API logger) into a fresh directory.
func tinyModel(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src, _ := filepath.Glob(filepath.Join("testdata", "tinymodel", "*.py"))
	if len(src) == 0 {
		t.Fatal("testdata/tinymodel is empty")
	}
	for _, f := range src {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// kcrashIn runs the kcrash binary in dir.
func kcrashIn(t *testing.T, dir string, timeout time.Duration, args ...string) kcrashRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcrashBin(t), args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Run()
	r := kcrashRun{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
	if ctx.Err() != nil {
		t.Fatalf("kcrash %s: still running after %s; stderr:\n%s", strings.Join(args, " "), timeout, r.stderr)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.code = 128 + int(ws.Signal())
	}
	return r
}

// The debugging loop end to end, with real parts: a small model on Debian's
// CPU torch whose ops write the SGLang kernel-API format. A bad run takes the
// code path that skips qk_norm and meets a batch of 288 rows, at which
// gate_up aborts inside the call (it never returns, as on a GPU fault);
// `kcrash run` at level 3 bundles it. `kcrash repro` re-runs it three times:
// each crashes with the same verdict and suspect, dumps only gate_up's calls,
// and leaves a repro.py beside the dump that never returned, which fails at
// M=288 and passes at M=1 on its own. `kcrash diff` of a good run and the bad
// one names the skipped op and the first shape jump.
func TestDebugLoopRunReproDiff(t *testing.T) {
	needTorch(t)
	dir := tinyModel(t)
	const secret = "hf_abcdefghijklmnopqrstuvwxyz0123456789"

	good := kcrashIn(t, dir, 2*time.Minute, "run", "-q", "--collect", "always", "--out", "good", "--",
		torchPython, "run_model.py", "default", "4,1,1,1")
	if good.code != 0 {
		t.Fatalf("good run: exit %d; stderr:\n%s", good.code, good.stderr)
	}
	bad := kcrashIn(t, dir, 2*time.Minute, "run", "-q", "--out", "bad", "--env", "TINY_FAIL_MODE=abort", "--env", "HF_TOKEN="+secret, "--",
		torchPython, "run_model.py", "aiter", "4,1,1,288")
	if bad.code != 128+int(syscall.SIGABRT) {
		t.Fatalf("bad run: exit %d, want SIGABRT; stderr:\n%s", bad.code, bad.stderr)
	}
	goodB, badB := oneBundle(t, filepath.Join(dir, "good")), oneBundle(t, filepath.Join(dir, "bad"))
	var tr triage.Result
	if err := json.Unmarshal(badB.Manifest.Triage, &tr); err != nil {
		t.Fatal(err)
	}
	if api := triage.SuspectAPI(tr); api != "tinymodel.gate_up" {
		t.Fatalf("bad run: suspect %q (verdict %s), want tinymodel.gate_up", api, tr.Verdict.Kind)
	}

	// The dry run says what would run, restores no secret, and runs nothing.
	dry := kcrashIn(t, t.TempDir(), time.Minute, "repro", badB.Path, "--times", "3", "--dry-run")
	if dry.code != 0 {
		t.Fatalf("dry run: exit %d: %s", dry.code, dry.stderr)
	}
	for _, want := range []string{"directory: " + dir, "--level 10", "--env SGLANG_KERNEL_API_DUMP_INCLUDE=tinymodel.gate_up",
		"--env TINY_FAIL_MODE=abort", "SGLANG_KERNEL_API_LOGLEVEL=10", "HF_TOKEN is not set from the bundle", "not an SGLang launch"} {
		if !strings.Contains(dry.stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, dry.stdout)
		}
	}
	if strings.Contains(dry.stdout, secret) || strings.Contains(dry.stdout, "HF_TOKEN=") {
		t.Errorf("dry run sets the redacted secret:\n%s", dry.stdout)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "kcrash-repro")); len(m) != 0 {
		t.Errorf("the dry run made %v", m)
	}

	// Three escalated runs.
	rep := kcrashIn(t, t.TempDir(), 5*time.Minute, "repro", badB.Path, "--times", "3", "--out", filepath.Join(dir, "rep"))
	if rep.code != 0 {
		t.Fatalf("repro: exit %d\nstdout:\n%s\nstderr:\n%s", rep.code, rep.stdout, rep.stderr)
	}
	if !strings.Contains(rep.stdout, "reproduced: 3 of 3 runs crashed; verdict as the original's in 3/3, suspect call as the original's in 3/3") {
		t.Fatalf("repro summary:\n%s", rep.stdout)
	}
	var script string
	for i := 1; i <= 3; i++ {
		run := filepath.Join(dir, "rep", "run-"+string(rune('0'+i)))
		b := oneBundle(t, run)
		if b.Manifest.Env.Set["SGLANG_KERNEL_API_LOGLEVEL"] != "10" || b.Manifest.Env.Set["TINY_FAIL_MODE"] != "abort" {
			t.Errorf("run %d env %v", i, b.Manifest.Env.Set)
		}
		if _, ok := b.Manifest.Env.Set["HF_TOKEN"]; ok {
			t.Errorf("run %d: HF_TOKEN restored from the bundle", i)
		}
		dumps, _ := filepath.Glob(filepath.Join(run, "work", "sglang_kernel_api_dumps_*", "*"))
		if len(dumps) != 7 {
			t.Errorf("run %d: %d dump dirs, want gate_up's 7 calls: %v", i, len(dumps), dumps)
		}
		never := 0
		for _, d := range dumps {
			m, err := repro.ReadMeta(d)
			if err != nil || m.FunctionName != "tinymodel.gate_up" {
				t.Fatalf("run %d: dump %s of %q (%v): only the suspect call is dumped", i, d, m.FunctionName, err)
			}
			if m.ExecutionStatus == "inputs_saved" {
				never++
				script = filepath.Join(d, "repro.py")
				if _, err := os.Stat(script); err != nil {
					t.Errorf("run %d: no repro.py beside the dump that never returned: %v", i, err)
				}
			}
		}
		if never != 1 {
			t.Errorf("run %d: %d dumps never returned, want 1", i, never)
		}
	}

	// repro.py, standalone, from another directory.
	py := func(args ...string) (string, int) {
		cmd := exec.Command(torchPython, append([]string{script}, args...)...)
		cmd.Dir = t.TempDir()
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := py("--case", "m1"); code != 0 {
		t.Errorf("repro.py --case m1: exit %d\n%s", code, out)
	}
	if out, code := py("--case", "full"); code == 0 {
		t.Errorf("repro.py --case full passed\n%s", out)
	}
	out, code := py()
	if code != 1 || !strings.Contains(out, "reproduced: tinymodel.gate_up fails at M=288 and passes at M=1") ||
		!strings.Contains(out, "M=288 (as dumped): FAILED: killed by SIGABRT") || !strings.Contains(out, "arg[0] shape=(288, 32) dtype=torch.float32") {
		t.Errorf("repro.py: exit %d\n%s", code, out)
	}

	// The good run against the bad one.
	d := kcrashIn(t, dir, time.Minute, "diff", "--json", goodB.Path, badB.Path)
	if d.code != 0 {
		t.Fatalf("diff: exit %d: %s", d.code, d.stderr)
	}
	var r calldiff.Result
	if err := json.Unmarshal([]byte(d.stdout), &r); err != nil {
		t.Fatalf("diff --json: %v\n%s", err, d.stdout)
	}
	if len(r.Pairs) != 1 {
		t.Fatalf("diff: %d pairs", len(r.Pairs))
	}
	p := r.Pairs[0]
	if fd := p.FirstDivergence; fd == nil || fd.ACount != 1 || fd.A[0].API != "tinymodel.qk_norm" {
		t.Errorf("first divergence %+v, want qk_norm only in the good run", fd)
	}
	if len(p.Missing) == 0 || p.Missing[0].API != "tinymodel.qk_norm" || p.Missing[0].B != 0 {
		t.Errorf("missing %+v", p.Missing)
	}
	if j := p.FirstShapeJump(); j == nil || j.A != "(1, 32)" || j.B != "(288, 32)" {
		t.Errorf("first shape jump %+v", j)
	}
	if r.A.Verdict == nil || r.A.Verdict.Kind != "clean_exit" || r.B.Verdict == nil || r.B.Verdict.Suspect != "tinymodel.gate_up" {
		t.Errorf("verdicts %+v / %+v", r.A.Verdict, r.B.Verdict)
	}
	text := kcrashIn(t, dir, time.Minute, "diff", goodB.Path, badB.Path)
	for _, want := range []string{"missing in B: tinymodel.qk_norm", "first shape jump between the runs: tinymodel.rms_norm arg[0] (1, 32) in A",
		"B ended at tinymodel.gate_up", "verdict clean_exit", "verdict native_crash"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("diff text lacks %q:\n%s", want, text.stdout)
		}
	}
}

// The other two ways the test model's gate_up fails at M=288: a Python
// exception inside the call (its dump is left at "exception", repro.py beside
// it fails at M=288 and passes at M=1), and NaN output, which level 3 cannot
// see and the escalated run's level-5 statistics pin on gate_up.
func TestReproFailureModes(t *testing.T) {
	needTorch(t)
	dir := tinyModel(t)
	r := kcrashIn(t, dir, 2*time.Minute, "run", "-q", "--out", "raise", "--env", "TINY_FAIL_MODE=raise", "--",
		torchPython, "run_model.py", "default", "2,288")
	if r.code != 1 {
		t.Fatalf("raise: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	rep := kcrashIn(t, dir, 2*time.Minute, "repro", oneBundle(t, filepath.Join(dir, "raise")).Path, "--out", "rep-raise")
	if rep.code != 0 || !strings.Contains(rep.stdout, "reproduced: 1 of 1 runs crashed") {
		t.Fatalf("repro raise: exit %d\n%s\n%s", rep.code, rep.stdout, rep.stderr)
	}
	scripts, _ := filepath.Glob(filepath.Join(dir, "rep-raise", "run-1", "work", "*", "*", "repro.py"))
	if len(scripts) != 1 {
		t.Fatalf("repro.py: %v\n%s", scripts, rep.stdout)
	}
	if m, err := repro.ReadMeta(filepath.Dir(scripts[0])); err != nil || m.ExecutionStatus != "exception" {
		t.Errorf("dump %+v %v", m, err)
	}
	for c, want := range map[string]int{"full": 1, "m1": 0} {
		cmd := exec.Command(torchPython, scripts[0], "--case", c)
		cmd.Env = append(os.Environ(), "TINY_FAIL_MODE=raise") // the model's own switch, as the run had it
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != want || c == "full" && !strings.Contains(string(out), "no kernel config for M=288") {
			t.Errorf("repro.py --case %s: exit %d\n%s", c, cmd.ProcessState.ExitCode(), out)
		}
	}

	r = kcrashIn(t, dir, 2*time.Minute, "run", "-q", "--out", "nan", "--env", "TINY_FAIL_MODE=nan", "--",
		torchPython, "run_model.py", "default", "2,288")
	if r.code != 1 {
		t.Fatalf("nan: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	rep = kcrashIn(t, dir, 2*time.Minute, "repro", oneBundle(t, filepath.Join(dir, "nan")).Path, "--out", "rep-nan")
	b := oneBundle(t, filepath.Join(dir, "rep-nan", "run-1"))
	var tr triage.Result
	if err := json.Unmarshal(b.Manifest.Triage, &tr); err != nil {
		t.Fatal(err)
	}
	if tr.KernelAPI == nil || tr.KernelAPI.FirstNonfinite == nil || tr.KernelAPI.FirstNonfinite.Call.API != "tinymodel.gate_up" ||
		tr.KernelAPI.FirstNonfinite.Arg.Name != "return" {
		t.Fatalf("the escalated run does not pin the NaN on gate_up's output: %+v\n%s", tr.KernelAPI, rep.stdout)
	}
}
