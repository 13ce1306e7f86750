package repro

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/internal/testenv"
)

const torchPython = "/usr/bin/python3"

// A dump whose API cannot be imported: repro.py still loads and prints the
// inputs, then names the exact line to edit; with that line edited it runs
// both cases.
func TestScriptUnresolvedCallable(t *testing.T) {
	if out, err := exec.Command(torchPython, "-c", "import torch").CombinedOutput(); err != nil {
		testenv.Skip(t, "needs %s with torch (apt-get install python3-torch): %v: %s", torchPython, err, bytes.TrimSpace(out))
	}
	dir := filepath.Join(t.TempDir(), "20260502_142110_001_pid4242_sglang.custom_op.nosuch_call0003")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"function_name": "nosuch_pkg.layers.Fused.apply", "timestamp": "x", "process_id": 4242,
  "execution_status": "inputs_saved",
  "input_metadata": {"arg_1__container": {"type": "tuple", "length": 2}, "arg_2": {"type": "torch.dtype", "value": "torch.float16"}, "kwarg_eps": 1e-06},
  "input_tensor_keys": ["arg_0", "arg_1_0", "arg_1_1"], "output_metadata": {}, "output_tensor_keys": []}`
	if err := os.WriteFile(filepath.Join(dir, "metadata.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	save := fmt.Sprintf(`import torch
torch.save({"arg_0": torch.ones(288, 8), "arg_1_0": torch.zeros(8, 4), "arg_1_1": torch.full((288, 2), float("nan"))}, %q)`,
		filepath.Join(dir, "inputs.pt"))
	if out, err := exec.Command(torchPython, "-c", save).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	script, err := WriteScript(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(torchPython, append([]string{script}, args...)...)
		cmd.Dir = t.TempDir()
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run()
	src, _ := os.ReadFile(script)
	line := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "OP = None") {
			line = i + 1
		}
	}
	for _, want := range []string{"arg[0] shape=(288, 8) dtype=torch.float32", "arg[1][1] shape=(288, 2)", "nan_count=576",
		"cannot call nosuch_pkg.layers.Fused.apply", fmt.Sprintf("Edit line %d of %s (OP = ...)", line, script)} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != 2 || line == 0 {
		t.Errorf("exit %d (line %d), want 2", code, line)
	}

	// The person edits that line: a function failing only at M=288.
	edited := strings.Replace(string(src), "OP = None", `def OP(x, pair, dtype, eps=0.0):
    assert x.shape[0] < 100, "M=%d" % x.shape[0]
    return (x[:, :4] @ pair[0].T[:4, :4]).to(dtype)`, 1)
	if err := os.WriteFile(script, []byte(edited), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code = run()
	if code != 1 || !strings.Contains(out, "M=288 (as dumped): FAILED (exit 1)") || !strings.Contains(out, "M=1:               passed") ||
		!strings.Contains(out, "AssertionError: M=288") || !strings.Contains(out, "return shape=(1, 4) dtype=torch.float16") {
		t.Errorf("edited: exit %d\n%s", code, out)
	}
}
