package triage

import (
	"strings"
	"testing"
)

// TestHeldout12Families: the families heldout12 missed, each read by a rule
// over the family (real dev logs, and heldout12's own misses since it was
// scored): Windows access violations as Windows words them (WER's exception
// code, a launcher's exit line, faulthandler's Windows header), stuck vLLM
// engines (stats with running requests and no throughput to the log's end,
// V0's front end waiting for output) and a py-spy dump of an idle main
// thread in a wait, old ROCm wordings of a GPU OOM (MIOpen, TensorFlow's
// hipError_t(1002) and HIP_ERROR_OutOfMemory), the toolchain's arch
// mismatches (ptxas, LLVM, rocBLAS's Tensile library), and Kubernetes' pod
// JSON status in camel case.
func TestHeldout12Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "comfy-kitchen-rocm-windows-thread-dump-then-exception-code-0xc0000005-torch-hip-scaled-mm.txt", "native_crash", []string{"0xC0000005", "access violation"}, nil, nil},
		{"dev", "comfyui-supir-aki-process-crashed-with-code-3221225477-faulthandler-safetensors-load.txt", "native_crash", []string{"access violation", "__getitem__"}, nil, nil},
		{"dev", "seedvr2-comfyui-portable-windows-fatal-exception-access-violation-probe-bfloat16.txt", "native_crash", []string{"access violation", "_probe_bfloat16_support"}, nil, nil},
		{"heldout12", "comfyui-amd-windows-wanvae-loaded-then-exception-code-c0000005-amdhip64-7-frames.txt", "native_crash", []string{"0xC0000005"}, nil, nil},
		{"heldout12", "comfyui-ltxvideo-aki-registry-fetch-then-exited-0xc0000005-fault-traceback-conv3d-init.txt", "native_crash", []string{"access violation"}, nil, nil},
		{"heldout12", "comfyui-rocm-windows-faulthandler-access-violation-in-torch-cuda-is-available-comfy-kitchen.txt", "native_crash", []string{"is_available"}, nil, nil},

		{"dev", "vllm-v0-mqllmengine-client-waiting-for-output-every-10s-hangs-then-crashes.txt", "hang", []string{"MQLLMEngine"}, nil, nil},
		{"dev", "vllm-musa-qwen25-vl-quoted-mqllmengine-waiting-for-output-stuck-forever.txt", "hang", []string{"MQLLMEngine"}, nil, nil},
		{"heldout12", "neuron-vllm-tp-launch-mqllmengine-waiting-for-output-every-10s-three-minutes.txt", "hang", nil, nil, nil},
		{"dev", "vllm-v0-cpu-mode-running-1-req-zero-throughput-every-31s-endless-loop.txt", "hang", []string{"last 6 stats intervals"}, nil, nil},
		{"heldout12", "vllm-v1-debug-health-200-then-engine-running-1-req-zero-throughput-40s.txt", "hang", []string{"1 running request", "last 4 stats intervals"}, nil, nil},
		{"heldout12", "gprofiler-pyspy-dump-mainthread-wait-snapshot-result-threadpool-idle.txt", "hang", []string{"main thread idle in wait (threading.py:295)"}, nil, nil},

		{"dev", "rocm-tf-2018-keras-rx470-miopen-memory-not-available-to-allocate-buffer-528mb.txt", "gpu_oom", []string{"528.5 MB"}, nil, nil},
		{"dev", "tf-rocm-5-6-horovod-mnist-failed-to-allocate-from-device-hip-error-outofmemory.txt", "gpu_oom", nil, nil, nil},
		{"heldout12", "miopen-2018-tf-autotune-convolve-memory-not-available-to-allocate-buffer-check-failed.txt", "gpu_oom", nil, nil, nil},
		{"heldout12", "tf-rocm-2019-vega56-created-device-then-failed-to-allocate-hiperror-1002-three-sizes.txt", "gpu_oom", nil, nil, nil},

		{"dev", "triton-dgx-spark-ptxas-error-value-sm-121a-not-defined-for-gpu-name.txt", "gpu_arch_mismatch", []string{"sm_121a", "toolchain"}, []string{"TRITON_PTXAS_PATH", "this GPU (sm_121a)"}, []string{"PYTORCH_ROCM_ARCH"}},
		{"dev", "altis-cmake-nvcc-cuda-11-6-ptxas-fatal-value-sm-30-not-defined-gtx1650.txt", "gpu_arch_mismatch", []string{"sm_30"}, []string{"this GPU (sm_30)"}, nil},
		{"dev", "migraphx-gfx1201-rocblas-cannot-read-tensilelibrary-illegal-seek-for-gpu-arch.txt", "gpu_arch_mismatch", []string{"gfx1201"}, []string{"PYTORCH_ROCM_ARCH=gfx1201"}, []string{"TRITON_PTXAS_PATH"}},
		{"heldout12", "xla-sm107-llvm-fatal-error-ptx-8-8-does-not-support-sm-107a-jit-iota.txt", "gpu_arch_mismatch", []string{"sm_107a"}, []string{"this GPU (sm_107a)"}, nil},
		{"heldout12", "sdnext-zluda-rx6800xt-rocblaslt-cannot-read-tensile-gfx1030-then-cublas-invalid-value.txt", "gpu_arch_mismatch", []string{"gfx1030"}, []string{"HSA_OVERRIDE_GFX_VERSION=10.3.0"}, nil},

		{"dev", "kubelet-2014-container-status-json-exitcode-137-reason-oom-killed.txt", "host_oom", nil, nil, nil},
		{"heldout12", "k8s-2017-pod-laststate-terminated-exitcode-137-reason-error-json.txt", "killed", []string{"137"}, nil, nil},
	})
}

// TestToolchainFallbackIsNotAMismatch: XLA's warning that its ptxas does not
// know the GPU and it compiled with the driver instead names the same ptxas
// error, but the program goes on: not a failure.
func TestToolchainFallbackIsNotAMismatch(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "tf-serving-2021-ptxas-sm-86-not-defined-warning-falls-back-to-driver.txt", "unknown", nil, nil, nil},
	})
}

// TestEngineStallNeedsPersistence: the stall rules read a run of lines to the
// log's end; the same real logs cut short, or followed by real stats that
// show progress, are not a hang.
func TestEngineStallNeedsPersistence(t *testing.T) {
	stats := unseenSampleText(t, "heldout12", "vllm-v1-debug-health-200-then-engine-running-1-req-zero-throughput-40s.txt")
	lines := strings.SplitAfter(stats, "\n")
	var zero []string
	for _, l := range lines {
		if strings.Contains(l, "Running: 1 reqs") {
			zero = append(zero, l)
		}
	}
	if len(zero) < 3 {
		t.Fatalf("sample has %d stalled stats lines", len(zero))
	}
	// Intervals with throughput after the stalled ones: heldout10's real
	// metrics of one request generating at 42 tokens/s.
	moving := unseenSampleText(t, "heldout10", "vllm-metrics-one-running-request-41-tokens-per-second-kv-cache-2-percent.txt")
	mq := unseenSampleText(t, "dev", "vllm-v0-mqllmengine-client-waiting-for-output-every-10s-hangs-then-crashes.txt")
	mqLines := strings.SplitAfter(mq, "\n")
	for _, c := range []struct{ name, text string }{
		{"two stalled intervals", strings.Join(zero[:2], "")},
		{"stalled then moving", stats + moving},
		{"five output waits", strings.Join(mqLines[:5], "")},
	} {
		fs, err := ScanEvidenceText(strings.NewReader(c.text), c.name, 2025)
		if err != nil {
			t.Fatal(err)
		}
		if r := Decide(Input{Findings: fs}); r.Verdict.Kind == "hang" {
			t.Errorf("%s: verdict hang, want none: %s", c.name, r.Verdict.Summary)
		}
	}
}
