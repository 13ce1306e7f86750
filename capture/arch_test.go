package capture

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/evidence"
)

// A run that dies of an arch mismatch on a host whose KFD topology names
// its GPUs' target (the MI300X fixture's gfx_target_version 90402): the
// GPU collector writes gpu.json with the arch, and the verdict's next steps
// name gfx942, which the log itself does not.
func TestAnalyzeArchFromGPUCollector(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join("..", "triage", "testdata", "unseen", "dev", "arch-mismatch-hip-no-binary-easydiffusion.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, log, _ := strings.Cut(string(sample), "\n\n") // after the source and expect lines
	if strings.Contains(log, "gfx942") {
		t.Fatal("the sample names gfx942 itself")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "output.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	sel, err := collectors.Select([]string{"gpu"}, nil)
	if err != nil || len(sel) != 1 {
		t.Fatalf("%v %v", sel, err)
	}
	env := collectors.NewEnv()
	env.SysRoot = filepath.Join("..", "collectors", "testdata", "sys", "amd-8card")
	env.ProcRoot, env.DevRoot = t.TempDir(), t.TempDir()
	env.Start = time.Now()
	t.Setenv("PATH", t.TempDir()) // no smi tool: sysfs alone
	if err := sel[0].Collector.Collect(context.Background(), env, collectors.NewOutput(dir)); err != nil {
		t.Fatal(err)
	}
	if got := gpuArches(dir); got != "gfx942" {
		t.Fatalf("gpu.json's archs %q", got)
	}
	code := 1
	res := analyze(env, dir, Exit{Code: &code}, false, []string{"python3", "main.py"}, nil, nil)
	if res.verdict.Kind != evidence.GPUArchMismatch {
		t.Fatalf("verdict %s", res.verdict.Kind)
	}
	var tj struct {
		NextSteps []string `json:"next_steps"`
	}
	if err := json.Unmarshal(res.json, &tj); err != nil {
		t.Fatal(err)
	}
	if steps := strings.Join(tj.NextSteps, "\n"); !strings.Contains(steps, "gfx942") {
		t.Errorf("next steps do not name gfx942:\n%s", steps)
	}
}
