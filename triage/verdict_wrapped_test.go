package triage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// TestWrappedErrorFamilies: a CUDA/HIP runtime's error text is read whatever
// prints it (Caffe's CHECK, cudpp's macro, ggml's "cudaMalloc failed:",
// vLLM's own RuntimeError), as are gdb's signal report, a NCCLCHECK macro's
// failure and a Python exception line whose traceback was cut; the steps fit
// the family (the display watchdog for a launch timeout, ggml's layer
// offload for its OOM).
func TestWrappedErrorFamilies(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev6", "caffe-check-failed-launch-timed-out-prose.txt", "gpu_hang",
			[]string{"ran past the watchdog", "the launch timed out and was terminated"}, []string{"display watchdog", "TdrDelay", "cuda-sync"}, []string{"rocm-sync"}},
		{"dev6", "cudpp-launch-timed-out-wrapped-line-windows.txt", "gpu_hang",
			[]string{"the launch timed out and was terminated"}, []string{"display watchdog"}, nil},
		{"dev6", "gdb-sigsegv-in-libcuda-cuda-is-available.txt", "native_crash",
			[]string{"SIGSEGV", "Program received signal"}, []string{"cuda-sync"}, []string{"rocm-sync"}},
		{"dev6", "gdb-sigsegv-libcuda-numba-cuda-tests.txt", "native_crash",
			[]string{"SIGSEGV"}, nil, nil},
		{"dev", "gdb-sigabrt-xbyak-terminate-import-torch-ryzen.txt", "native_crash",
			nil, nil, nil},
		{"dev6", "llamacpp-cudamalloc-oom-compose-prefix-kv-update.txt", "gpu_oom",
			[]string{"GPU 1", "9866.00 MiB"}, []string{"--n-gpu-layers", "9866.00 MiB was requested on GPU 1"}, []string{"--mem-fraction-static", "had - free"}},
		{"dev6", "llamacpp-cudamalloc-oom-load-tensors-144gib.txt", "gpu_oom",
			[]string{"144817.04 MiB"}, []string{"--n-gpu-layers"}, []string{"had - free"}},
		{"dev", "llamacpp-cudamalloc-oom-rocm0-compute-buffer-apertus.txt", "gpu_oom",
			[]string{"14136.04 MiB"}, []string{"--n-gpu-layers"}, nil},
		{"dev", "caffe-syncedmem-check-failed-oom-2-vs-0-hed.txt", "gpu_oom",
			nil, nil, nil},
		{"dev6", "vllm-sampler-warmup-oom-runtimeerror-rtx50.txt", "gpu_oom",
			[]string{"CUDA out of memory occurred when warming up sampler"}, []string{"--gpu-memory-utilization"}, []string{"--mem-fraction-static"}},
		{"dev6", "rccl-tests-internal-error-mi210.txt", "collective_timeout",
			[]string{"internal error"}, nil, nil},
		{"dev6", "vllm-valueerror-max-model-len-xinference.txt", "python_exception",
			[]string{"ValueError", "max_model_len"}, nil, []string{"--profile sglang"}},
	})
}

// TestDebuggerSignalFinding: gdb's report is a finding of its own, with its signal.
func TestDebuggerSignalFinding(t *testing.T) {
	for _, c := range []struct{ split, name, signal string }{
		{"dev6", "gdb-sigsegv-in-libcuda-cuda-is-available.txt", "SIGSEGV"},
	} {
		found := false
		for _, f := range scanSample(t, c.split, c.name) {
			if f.Details.Text(detail.Signature) == "debugger-signal" {
				found = true
				if got := f.Details.Text(detail.Signal); got != c.signal {
					t.Errorf("%s: signal %q, want %q", c.name, got, c.signal)
				}
			}
		}
		if !found {
			t.Errorf("%s: no debugger-signal finding", c.name)
		}
	}
}

// TestLogNamesFrameworkAndVendor: a log that names vLLM only in capitals, or
// NVIDIA only through ATen's native/cuda paths, NVCC or GPUDirectTCPX, gets
// that framework's and that vendor's steps.
func TestLogNamesFrameworkAndVendor(t *testing.T) {
	for _, c := range []struct {
		split, name, framework, vendor string
	}{
		{"dev6", "vllm-valueerror-max-model-len-xinference.txt", "vllm", ""},
		{"dev6", "device-assert-scattergather-glued-tcpx-vllm-flashinfer-sampler.txt", "", "nvidia"},
		{"dev6", "device-assert-probability-tensor-glued-to-chat-ktransformers.txt", "", "nvidia"},
		{"dev6", "rccl-tests-internal-error-mi210.txt", "", "amd"},
		{"dev", "llamacpp-cudamalloc-oom-rocm0-compute-buffer-apertus.txt", "", "amd"},
	} {
		x := newFacts(Input{Findings: scanSample(t, c.split, c.name)})
		if got := x.framework(); got != c.framework {
			t.Errorf("%s: framework %q, want %q", c.name, got, c.framework)
		}
		if got := x.vendor; c.vendor != "" && got != c.vendor {
			t.Errorf("%s: vendor %q, want %q", c.name, got, c.vendor)
		}
		steps := strings.Join(Decide(Input{Findings: scanSample(t, c.split, c.name)}).NextSteps, "\n")
		if c.vendor == "nvidia" && strings.Contains(steps, "rocm-sync") {
			t.Errorf("%s: NVIDIA log's steps hold rocm-sync:\n%s", c.name, steps)
		}
		if c.framework == "vllm" && strings.Contains(steps, "--profile sglang") {
			t.Errorf("%s: vLLM log's steps use the sglang profile:\n%s", c.name, steps)
		}
	}
	// The glued line alone names NVIDIA (NVCC, GPUDirectTCPX), with no assert path.
	// (The sample lives outside the unseen splits: its asserts alone do not
	// survive the garbling that dev's samples are put through.)
	b, err := os.ReadFile(filepath.Join("testdata", "names", "device-assert-scattergather-tcpx-nvcc-glued-vllm.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	tcpx := strings.TrimSpace(text[strings.Index(text, "tcpxResult_t"):])
	var n logNames
	bg := &lsBigrams{}
	bg.reset(tcpx)
	n.note(tcpx, bg)
	if n.nvidia != 1 || n.amd != 0 || n.vllm != 0 {
		t.Errorf("NVCC/GPUDirectTCPX line: names %+v, want one NVIDIA line only", n)
	}
}

func scanSample(t *testing.T, split, name string) []evidence.Finding {
	t.Helper()
	fs, err := ScanEvidenceText(strings.NewReader(unseenSampleText(t, split, name)), name, 2025)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func decideSample(t *testing.T, split, name string) Result {
	t.Helper()
	return Decide(Input{Findings: scanSample(t, split, name)})
}

// familyCase is one real log of a family a split missed: the verdict it
// must get ("" for any), words its summary must hold, words its next steps
// must hold (steps) and must not (nope).
type familyCase struct {
	split, name, kind string
	summary           []string
	steps, nope       []string
}

func checkFamilies(t *testing.T, cases []familyCase) {
	t.Helper()
	for _, c := range cases {
		r := decideSample(t, c.split, c.name)
		if c.kind != "" && string(r.Verdict.Kind) != c.kind {
			t.Errorf("%s: verdict %s, want %s: %s", c.name, r.Verdict.Kind, c.kind, r.Verdict.Summary)
		}
		for _, w := range c.summary {
			if !strings.Contains(r.Verdict.Summary, w) {
				t.Errorf("%s: summary lacks %q: %s", c.name, w, r.Verdict.Summary)
			}
		}
		steps := strings.Join(r.NextSteps, "\n")
		for _, w := range c.steps {
			if !strings.Contains(steps, w) {
				t.Errorf("%s: steps lack %q:\n%s", c.name, w, steps)
			}
		}
		for _, n := range c.nope {
			if strings.Contains(steps, n) {
				t.Errorf("%s: steps hold %q:\n%s", c.name, n, steps)
			}
		}
	}
}
