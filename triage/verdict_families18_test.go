package triage

import "testing"

// TestHeldout18Families: the families heldout18 missed, each read by a rule
// over the family (real dev logs, and heldout18's own misses since it was
// scored): a GPU device lost as the Vulkan and Level Zero (SYCL) runtimes
// say it (`vk::DeviceLostError`, `ErrorDeviceLost`, `VK_ERROR_DEVICE_LOST`,
// `UR_RESULT_ERROR_DEVICE_LOST`) read as gpu_hang over the C++ terminate or
// the SYCL error's abort that follows, with steps that name neither CUDA nor
// ROCm; TensorRT-LLM's `Executor creation failed due to insufficient GPU
// memory` read as gpu_oom.
func TestHeldout18Families(t *testing.T) {
	cudaROCm := []string{"CUDA_LAUNCH_BLOCKING", "amdgpu", "Xid", "HIP"}
	checkFamilies(t, []familyCase{
		{"dev", "llamacpp-27198-sycl-dual-arc-b70-dev2dev-memcpy-ur-result-error-device-lost-then-sigabrt-gdb.txt", "gpu_hang", []string{"UR_RESULT_ERROR_DEVICE_LOST"}, []string{"Intel's driver"}, cudaROCm},
		{"dev", "llamacpp-17334-vulkan-intel-iris-xe-terminate-vk-devicelosterror-queue-submit-two-lines.txt", "gpu_hang", []string{"DeviceLost"}, []string{"Vulkan"}, cudaROCm},
		{"heldout18", "llamacpp-b9867-sycl-dual-arc-b70-level-zero-backend-failed-ur-result-error-device-lost-one-line.txt", "gpu_hang", nil, nil, cudaROCm},
		{"heldout18", "llamacpp-vulkan-gdb-libc-start-main-portuguese-detached-then-terminate-vk-devicelosterror-queue-submit.txt", "gpu_hang", nil, nil, cudaROCm},
		{"heldout18", "llamacpp-vulkan-intel-igpu-gemma3n-gdb-frames-graph-compute-detached-devicelosterror-aborted-failed-after-5-loops.txt", "gpu_hang", nil, nil, cudaROCm},

		{"dev", "trtllm-5950-ds-v3-w4fp8-h20-runtimeerror-executor-creation-failed-insufficient-gpu-memory-additional-resources.txt", "gpu_oom", []string{"insufficient GPU memory"}, []string{"free_gpu_memory_fraction"}, []string{"--mem-fraction-static"}},
		{"heldout18", "trtllm-serve-v100rc-qwen3-235b-tp8-rank-1-executor-creation-failed-insufficient-gpu-memory-kv-cache.txt", "gpu_oom", nil, nil, nil},
	})
}
