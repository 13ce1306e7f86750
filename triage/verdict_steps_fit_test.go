package triage

import (
	"strings"
	"testing"
)

// stepsForSample decides a real sample and returns its verdict and steps.
func stepsForSample(t *testing.T, split, name string, in Input) (string, string) {
	t.Helper()
	fs, err := ScanEvidenceText(strings.NewReader(unseenSampleText(t, split, name)), name, 2025)
	if err != nil {
		t.Fatal(err)
	}
	in.Findings = fs
	r := Decide(in)
	return string(r.Verdict.Kind), strings.Join(r.NextSteps, "\n")
}

// TestNextStepsFitTheEvidence: the steps follow what the evidence names:
// the framework, the vendor, the GPU model, the transport.
func TestNextStepsFitTheEvidence(t *testing.T) {
	for _, c := range []struct {
		what, split, name string
		in                Input
		want, nope        []string
	}{
		{"vLLM gets its own profile and --enforce-eager, never SGLang's flags", "dev", "vllm-worker-acceleratorerror-then-enginecore-failed.txt", Input{ExitCode: vdInt(1)},
			[]string{"--profile vllm", "--enforce-eager"}, []string{"--profile sglang", "SGLang", "--disable-cuda-graph"}},
		{"a CUDA error gets no ROCm step", "dev", "vllm-worker-acceleratorerror-then-enginecore-failed.txt", Input{ExitCode: vdInt(1)},
			[]string{"cuda-sync", "CUDA_LAUNCH_BLOCKING=1"}, []string{"rocm-sync", "AMD_SERIALIZE_KERNEL", "aiter", "rocgdb", "HIP"}},
		{"a HIP hang gets no CUDA step", "heldout3", "rocr-gpu-hang-torchelastic-gfx942.txt", Input{ExitCode: vdInt(1)},
			[]string{"rocm-sync"}, []string{"cuda-sync", "CUDA_LAUNCH_BLOCKING"}},
		{"a crash naming no vendor gets both runtimes' settings, not one", "heldout", "ucx-caught-signal-11-then-faulthandler-sglang.txt", Input{ExitCode: vdInt(1)},
			[]string{"cuda-sync,rocm-sync"}, []string{"rocgdb", "aiter"}},
		{"a GeForce has no row remapping or DCGM", "dev", "cuda-ecc-uncorrectable-tf-streamexecutor-4090.txt", Input{ExitCode: vdInt(1), GPUModels: []string{"NVIDIA GeForce RTX 4090"}},
			[]string{"GeForce RTX 4090", "lspci"}, []string{"ROW_REMAPPER", "dcgmi", "amd-smi"}},
		{"a data-centre GPU does", "dev", "cuda-ecc-uncorrectable-tf-streamexecutor-4090.txt", Input{ExitCode: vdInt(1), GPUModels: []string{"NVIDIA H100 80GB HBM3"}},
			[]string{"ROW_REMAPPER", "dcgmi"}, []string{"amd-smi"}},
		{"a peer's reset points at that rank and the NIC, not P2P", "heldout4", "nccl-socket-send-connection-reset-by-peer-cri.txt", Input{ExitCode: vdInt(1)},
			[]string{"10.44.137.149<52905>", "its own log", "ethtool"}, []string{"NCCL_P2P_DISABLE"}},
		{"a peer's close too", "dev", "nccl-socket-connection-closed-by-remote-peer-bootstrap.txt", Input{ExitCode: vdInt(1)},
			[]string{"10.10.1.3<36138>", "kcrash merge"}, []string{"NCCL_P2P_DISABLE"}},
	} {
		kind, steps := stepsForSample(t, c.split, c.name, c.in)
		for _, w := range c.want {
			if !strings.Contains(steps, w) {
				t.Errorf("%s (%s, %s): %q missing:\n%s", c.what, c.name, kind, w, steps)
			}
		}
		for _, n := range c.nope {
			if strings.Contains(steps, n) {
				t.Errorf("%s (%s, %s): %q present:\n%s", c.what, c.name, kind, n, steps)
			}
		}
	}
}

// TestNextStepsAiterOnlyWhenOn: the stale-aiter step and the aiter op test
// are for runs that use aiter, as their environment or flags say.
func TestNextStepsAiterOnlyWhenOn(t *testing.T) {
	base := vdScenarios(t)[0].in
	if base.KernelAPI == nil {
		t.Fatal("scenario without its kernel-API log")
	}
	for _, c := range []struct {
		env  []string
		cmd  []string
		want bool
	}{
		{[]string{"SGLANG_USE_AITER=1"}, nil, true},
		{[]string{"SGLANG_USE_AITER=0"}, nil, false},
		{nil, []string{"python3", "-m", "sglang.launch_server", "--attention-backend", "aiter"}, true},
		{nil, []string{"python3", "-m", "sglang.launch_server", "--attention-backend=triton"}, false},
		{nil, nil, false},
	} {
		in := base
		in.Env, in.Command = c.env, c.cmd
		steps := strings.Join(Decide(in).NextSteps, "\n")
		if got := strings.Contains(steps, "setup.py develop"); got != c.want {
			t.Errorf("env %v cmd %v: aiter step %v, want %v:\n%s", c.env, c.cmd, got, c.want, steps)
		}
	}
}

// TestNextStepsNoRepeatOfLoggingInPlace: a kernel-API log already at level 3
// gets no step asking for level-3 logging, and a log where nothing failed
// gets no "so that the next crash..." step.
func TestNextStepsNoRepeatOfLoggingInPlace(t *testing.T) {
	ka := vdKernelAPI(t, "testdata/scenarios/kernel-api-level3-unfinished.log")
	if ka.Level != 3 {
		t.Fatalf("scenario log at level %d", ka.Level)
	}
	steps := strings.Join(Decide(Input{ExitCode: vdInt(1), KernelAPI: ka}).NextSteps, "\n")
	if strings.Contains(steps, "so that the next crash names the last kernel") {
		t.Errorf("asks again for the level the log has:\n%s", steps)
	}
	steps = strings.Join(Decide(Input{}).NextSteps, "\n")
	if strings.Contains(steps, "next crash") || !strings.Contains(steps, "No failure was found") {
		t.Errorf("steps for a log without failure:\n%s", steps)
	}
}
