package triage

import (
	"strings"

	"github.com/kcrash/kcrash/evidence/detail"
)

// A device lost as Vulkan says it (configs/signatures.yaml
// `vulkan-device-lost`) runs on any vendor's GPU through Mesa's or the
// vendor's driver: CUDA_LAUNCH_BLOCKING, HIP graphs or an amdgpu VM fault
// mean nothing to it, so its steps name the Vulkan stack. Level Zero's
// (`level-zero-device-lost`) is Intel's runtime and takes Intel's steps
// (verdict_steps_othergpu.go).

// vulkanDeviceLost reports whether the verdict's evidence is a Vulkan
// driver's lost device.
func (s *stepCtx) vulkanDeviceLost() bool {
	for _, c := range s.ev {
		if c.f.Details.Text(detail.Runtime) == "Vulkan" {
			return true
		}
	}
	return false
}

// vulkanDeviceLostSteps: the steps for a Vulkan device lost.
func vulkanDeviceLostSteps() string {
	return strings.Join([]string{
		"The Vulkan driver gave the device up (VK_ERROR_DEVICE_LOST): the GPU hung under the program's work, or its kernel driver reset it; read the kernel log (kmsg.log, `journalctl -k`) at that time: the GPU driver's hang, reset or page-fault lines name the engine and the process.",
		"A dispatch that runs past the kernel driver's job timeout is lost this way, most often on an integrated GPU or one that drives a display: split the work into shorter dispatches (llama.cpp/ggml: a smaller batch and micro-batch, `-b`/`-ub`) and run it again.",
		"A lost device can be a bug anywhere in the Vulkan stack (the kernel driver, the GPU firmware, Mesa's or the vendor's Vulkan driver, the program's shaders): check that the kernel, linux-firmware and the Vulkan driver are current; a device lost that recurs on one workload with a current stack belongs on the driver's tracker, with `vulkaninfo --summary` and the kernel log.",
	}, "\n")
}

// trtllmHeadroomStep: TensorRT-LLM's executor creation failed for lack of GPU
// memory (configs/signatures.yaml `trtllm-executor-insufficient-gpu-memory`).
const trtllmHeadroomStep = "Leave more headroom: the table under TensorRT-LLM's error names the component that did not fit and the free memory before and after each one; lower `kv_cache_config.free_gpu_memory_fraction`, `max_batch_size`, `max_num_tokens` or `max_seq_len` (in `--extra_llm_api_options` or the LLM API's arguments)."
