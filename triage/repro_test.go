package triage

import (
	"testing"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/kernelapi"
)

func TestVendorFromEvidence(t *testing.T) {
	hip := evidence.Finding{Kind: evidence.GPUIllegalMemoryAccess, Text: "torch.AcceleratorError: HIP error: an illegal memory access was encountered"}
	cuda := evidence.Finding{Kind: evidence.GPUIllegalMemoryAccess, Text: "RuntimeError: CUDA error: an illegal memory access was encountered"}
	for _, c := range []struct {
		fs   []evidence.Finding
		gpus []string
		want string
	}{
		{[]evidence.Finding{hip}, nil, "amd"},
		{[]evidence.Finding{cuda}, []string{"AMD Instinct MI300X"}, "nvidia"}, // the wording wins
		{nil, []string{"AMD Instinct MI355X", "AMD Instinct MI355X"}, "amd"},
		{nil, []string{"NVIDIA H100 80GB HBM3"}, "nvidia"},
		{nil, nil, ""},
		{[]evidence.Finding{hip, cuda}, nil, ""},
	} {
		if got := Vendor(c.fs, c.gpus); got != c.want {
			t.Errorf("%v %v: %q, want %q", c.fs, c.gpus, got, c.want)
		}
	}
}

func TestSuspectAPI(t *testing.T) {
	res := Result{Verdict: Verdict{Kind: evidence.NativeCrash},
		KernelAPI: &kernelapi.Report{LastCall: &kernelapi.Call{API: "last"}, UnfinishedCall: &kernelapi.Call{API: "open"}}}
	if got := SuspectAPI(res); got != "open" {
		t.Errorf("%q", got)
	}
	res.Findings = []evidence.Finding{{Details: map[string]any{"verdict_role": RoleSuspect, "api": "named"}}}
	if got := SuspectAPI(res); got != "named" {
		t.Errorf("%q", got)
	}
	res.Verdict.Kind = evidence.CleanExit
	if got := SuspectAPI(res); got != "" {
		t.Errorf("clean exit: %q", got)
	}
}
