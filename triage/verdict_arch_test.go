package triage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
)

// unseenSampleText returns one real sample of a split by file name.
func unseenSampleText(t *testing.T, split, name string) string {
	t.Helper()
	for _, s := range loadUnseen(t, split) {
		if s.name == name {
			return s.text
		}
	}
	t.Fatalf("sample %s/%s missing", split, name)
	return ""
}

// TestArchMismatchVerdictAndSteps: a build without kernels for the GPU is
// gpu_arch_mismatch, not the Python exception or the "unknown" it was read
// as; its steps name the GPU's arch and the build that fixes it for that
// vendor, and none of the fault workflow (sync launches, graphs) that
// cannot help.
func TestArchMismatchVerdictAndSteps(t *testing.T) {
	for _, c := range []struct {
		split, name string
		smiArch     string
		want        []string
		nope        []string
	}{
		{"dev", "arch-mismatch-torch-sm120-not-compatible-warning.txt", "",
			[]string{"(sm_120)", "TORCH_CUDA_ARCH_LIST=12.0", "get_arch_list"},
			[]string{"PYTORCH_ROCM_ARCH", "HSA_OVERRIDE", "CUDA_LAUNCH_BLOCKING", "cuda-graph"}},
		{"dev", "arch-mismatch-vllm-enginecore-rtx50.txt", "",
			[]string{"TORCH_CUDA_ARCH_LIST", "cu128"},
			[]string{"PYTORCH_ROCM_ARCH", "HSA_OVERRIDE", "rocm-sync"}},
		// smi says which Radeon it is: the override for its ISA family.
		{"dev", "arch-mismatch-hip-invalid-device-function-rx6600.txt", "gfx1032",
			[]string{"(gfx1032)", "PYTORCH_ROCM_ARCH=gfx1032", "--env HSA_OVERRIDE_GFX_VERSION=10.3.0"},
			[]string{"TORCH_CUDA_ARCH_LIST", "AMD_SERIALIZE_KERNEL", "cuda-graph"}},
		// An Instinct part has no consumer ISA to borrow.
		{"dev", "arch-mismatch-hip-no-binary-easydiffusion.txt", "gfx942",
			[]string{"PYTORCH_ROCM_ARCH=gfx942"},
			[]string{"HSA_OVERRIDE", "TORCH_CUDA_ARCH_LIST"}},
	} {
		fs, err := ScanEvidenceText(strings.NewReader(unseenSampleText(t, c.split, c.name)), c.name, 2025)
		if err != nil {
			t.Fatal(err)
		}
		r := Decide(Input{ExitCode: vdInt(1), Findings: fs, GPUArch: c.smiArch})
		steps := strings.Join(r.NextSteps, "\n")
		if r.Verdict.Kind != evidence.GPUArchMismatch {
			t.Errorf("%s: verdict %+v", c.name, r.Verdict)
		}
		for _, w := range c.want {
			if !strings.Contains(r.Verdict.Summary+"\n"+steps, w) {
				t.Errorf("%s: %q missing from:\n%s\n%s", c.name, w, r.Verdict.Summary, steps)
			}
		}
		for _, n := range c.nope {
			if strings.Contains(steps, n) {
				t.Errorf("%s: %q should not be in the steps:\n%s", c.name, n, steps)
			}
		}
	}
}

func TestArchFrom(t *testing.T) {
	for in, want := range map[string]string{
		"Tesla T4 (compute capability 7.5)": "sm_75",
		"with CUDA capability sm_120 is":    "sm_120",
		"Name: gfx1100":                     "gfx1100",
		"sm_90a":                            "sm_90a",
		"no arch here, gfxhub fault":        "",
	} {
		if got := archFrom(in); got != want {
			t.Errorf("archFrom(%q) = %q, want %q", in, got, want)
		}
	}
	if v := torchCUDAArch("sm_120"); v != "12.0" {
		t.Errorf("torchCUDAArch(sm_120) = %q", v)
	}
}

// smiFixture is a real GPU tool output of testdata/smi, without its
// source/expect header (the header's notes name arches too).
func smiFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "smi", name))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(b), "\n\n")
	if !ok || !strings.HasPrefix(string(b), "source: https://") {
		t.Fatalf("%s: no source header", name)
	}
	return body
}

func TestArchFromSMI(t *testing.T) {
	for name, want := range map[string]string{
		"nvidia-smi-query-compute-cap-titanv-rtx5880.txt":     "sm_70, sm_89",
		"nvidia-smi-query-compute-cap-single.txt":             "sm_89",
		"rocm-smi-csv-showuse-meminfo-rx7900xt.txt":           "gfx1100",
		"rocm-smi-json-showuse-meminfo-vram-rx7900xt.txt":     "gfx1100",
		"rocm-smi-csv-productname-meminfo-dgpu-plus-igpu.txt": "gfx1030, gfx1036",
	} {
		if got := ArchFromSMI(smiFixture(t, name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// When the log does not name the GPU's arch, the next steps name the one
// smi reported, with the build settings for it.
func TestArchMismatchStepsNameSMIArch(t *testing.T) {
	for _, c := range []struct {
		sample, smi string
		want        []string
	}{
		{"arch-mismatch-vllm-enginecore-rtx50.txt", "nvidia-smi-query-compute-cap-titanv-rtx5880.txt",
			[]string{"(sm_70, sm_89)", `TORCH_CUDA_ARCH_LIST="7.0;8.9"`}},
		{"arch-mismatch-vllm-enginecore-rtx50.txt", "nvidia-smi-query-compute-cap-single.txt",
			[]string{"(sm_89)", "TORCH_CUDA_ARCH_LIST=8.9"}},
		{"arch-mismatch-hip-invalid-device-function-rx6600.txt", "rocm-smi-json-showuse-meminfo-vram-rx7900xt.txt",
			[]string{"(gfx1100)", "PYTORCH_ROCM_ARCH=gfx1100", "HSA_OVERRIDE_GFX_VERSION=11.0.0"}},
		{"arch-mismatch-hip-no-binary-easydiffusion.txt", "rocm-smi-csv-productname-meminfo-dgpu-plus-igpu.txt",
			[]string{"(gfx1030, gfx1036)", `PYTORCH_ROCM_ARCH="gfx1030;gfx1036"`, "HSA_OVERRIDE_GFX_VERSION=10.3.0"}},
	} {
		text := unseenSampleText(t, "dev", c.sample)
		if archFrom(text) != "" {
			t.Fatalf("%s names an arch itself", c.sample)
		}
		fs, err := ScanEvidenceText(strings.NewReader(text), c.sample, 2025)
		if err != nil {
			t.Fatal(err)
		}
		r := Decide(Input{ExitCode: vdInt(1), Findings: fs, GPUArch: ArchFromSMI(smiFixture(t, c.smi))})
		all := r.Verdict.Summary + "\n" + strings.Join(r.NextSteps, "\n")
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s + %s: %q missing from:\n%s", c.sample, c.smi, w, all)
			}
		}
	}
}
