package triage

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/software"
)

// TestBuildProblemsInNextSteps: a build problem in the package the suspect
// kernel-API call lives in (sglang, for sglang.quant_method.Fp8MoEMethod.apply
// of a real level-1 log) is the first next step; one elsewhere comes after
// the usual steps; neither changes the verdict or reads as a symptom.
func TestBuildProblemsInNextSteps(t *testing.T) {
	ka := vdKernelAPI(t, filepath.Join("..", "kernelapi", "testdata", "7a-level1-rocm-exception.log"))
	base := Decide(Input{Signal: "SIGABRT", KernelAPI: ka})
	rep := &software.Report{Issues: []software.Issue{
		{Kind: software.IssueStaleBuild, Package: "sglang", Libraries: []string{"/src/sglang/sgl-kernel/build/common_ops.so"},
			Text: "sglang is a develop install (/src/sglang) whose sources changed after its last build"},
		{Kind: software.IssueDuplicateRuntime, Package: "torch", Pid: 7, Libraries: []string{"/v/torch/lib/libamdhip64.so", "/opt/rocm-6.2.0/lib/libamdhip64.so.6"},
			Text: "pid 7 (python3) has 2 different builds of libamdhip64 mapped"},
	}}
	res := Decide(Input{Signal: "SIGABRT", KernelAPI: ka, Findings: software.Findings(rep)})
	if res.Verdict != base.Verdict {
		t.Errorf("verdict moved: %+v, without build problems %+v", res.Verdict, base.Verdict)
	}
	steps := res.NextSteps
	if len(steps) != len(base.NextSteps)+2 {
		t.Fatalf("%d steps, %d without build problems", len(steps), len(base.NextSteps))
	}
	if !strings.HasPrefix(steps[0], "Build problem first: the suspect call sglang.quant_method.Fp8MoEMethod.apply lives in sglang: sglang is a develop install") ||
		!strings.Contains(steps[0], "setup.py develop") {
		t.Errorf("first step %q", steps[0])
	}
	last := steps[len(steps)-1]
	if !strings.HasPrefix(last, "Build problem: pid 7 (python3) has 2 different builds of libamdhip64") || !strings.Contains(last, "LD_LIBRARY_PATH") {
		t.Errorf("last step %q", last)
	}
	for _, f := range res.Findings {
		if f.Source == evidence.SourceSoftware && f.Details.Text("verdict_role") != RoleAlsoFound {
			t.Errorf("%q: role %v", f.Text, f.Details["verdict_role"])
		}
	}
	// A clean exit gets no build steps.
	zero := 0
	if clean := Decide(Input{ExitCode: &zero, Findings: software.Findings(rep)}); len(clean.NextSteps) != 0 {
		t.Errorf("clean exit steps: %v", clean.NextSteps)
	}
}
