package triage

import (
	"testing"
)

// TestHeldout8Families: the families heldout8 missed, each read by a rule
// over the family (real dev logs, none from heldout8): PyTorch's OOM worded
// "Allocation on device", a shell's, TGI's or Open MPI's report of a crash
// signal, compute-sanitizer's and cuda-gdb's reports of a bad access, a
// CUDA driver error name outside Python, NCCL's network failures.
func TestHeldout8Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		// PyTorch's allocator without the words "out of memory".
		{"dev", "comfyui-traceback-outofmemoryerror-allocation-on-device-model-to.txt", "gpu_oom", []string{"Allocation on device"}, nil, nil},
		{"dev", "comfyui-exception-during-processing-allocation-on-device-sonic.txt", "gpu_oom", []string{"Allocation on device"}, nil, nil},
		{"dev", "chattts-cuda-outofmemoryerror-allocation-would-exceed-allowed-memory.txt", "gpu_oom", []string{"would exceed allowed memory"}, nil, nil},
		{"dev", "animatediff-outofmemoryerror-allocation-exceed-one-line.txt", "gpu_oom", []string{"1.88 GiB"}, nil, nil},
		// A shell, TGI's launcher and Open MPI report the crash signal.
		{"dev", "bash-script-line-segmentation-fault-core-dumped-point-gnn.txt", "native_crash", []string{"SIGSEGV"}, nil, nil},
		{"dev", "bash-script-line-aborted-core-dumped-pytorch-fan.txt", "native_crash", []string{"SIGABRT"}, nil, nil},
		{"dev", "tgi-shard-signaled-to-shutdown-signal-4-shardcannotstart.txt", "native_crash", []string{"SIGILL"}, nil, nil},
		{"dev", "openmpi-process-received-signal-segfault-two-ranks-mukautuva.txt", "native_crash", []string{"SIGSEGV"}, nil, nil},
		// Tools that watch kernels: compute-sanitizer, cuda-memcheck, cuda-gdb.
		{"dev", "compute-sanitizer-invalid-global-read-access-out-of-bounds-hecbench.txt", "gpu_illegal_memory_access", []string{"out of bounds"}, nil, nil},
		{"dev", "cuda-memcheck-invalid-global-read-address-out-of-bounds-quicksilver.txt", "gpu_illegal_memory_access", []string{"out of bounds"}, nil, nil},
		{"dev", "cuda-gdb-cuda-exception-14-warp-illegal-address-fastertransformer.txt", "gpu_illegal_memory_access", []string{"Warp Illegal Address"}, nil, nil},
		{"dev", "cuda-gdb-cuda-exception-5-warp-out-of-range-address-gipuma.txt", "gpu_illegal_memory_access", []string{"Out-of-range Address"}, nil, nil},
		// The driver API's error name in another layer's log.
		{"dev", "tf-stream-executor-cuda-error-misaligned-address-event-poll.txt", "gpu_illegal_memory_access", []string{"CUDA_ERROR_MISALIGNED_ADDRESS"}, nil, nil},
		// PyTorch's internal check logged with only its message.
		{"dev", "diffdock-failed-on-internal-assert-failed-message-only.txt", "python_exception", []string{"INTERNAL ASSERT FAILED"}, nil, nil},
		// PyTorch's CPU allocator could not get host memory (no OOM killer); a
		// program's hint that names CUDA OOM does not make it a GPU OOM.
		{"dev", "torch-defaultcpuallocator-cant-allocate-memory-fang.txt", "host_oom", []string{"can't allocate memory"}, nil, nil},
		{"dev", "torch-defaultcpuallocator-then-cuda-oom-hint-real-esrgan.txt", "host_oom", []string{"can't allocate memory"}, nil, nil},
		// NCCL's newer InfiniBand completion wording (status=N).
		{"dev", "nccl-net-ib-completion-status-12-then-5-vendor-err-249-64-ranks.txt", "collective_timeout", nil, nil, nil},
		// Controls: SMU messages that the GPU survived at boot are no failure
		// (heldout8's SMU label stays a miss); NCCL's remote error was read
		// before and still is.
		{"dev", "amdgpu-powerplay-failed-to-send-message-at-boot-polaris-then-works.txt", "unknown", nil, nil, nil},
		{"dev", "nccl-distbackenderror-ncclremoteerror-last-error-socket-reset.txt", "collective_timeout", nil, nil, nil},
	})
}

// TestNextStepsNoFrameworkUnlessNamed: a log that names no framework (an
// MPI program, ollama, a script) gets no framework's logging profile in its
// next steps (SGLang's kernel-API logger logs nothing there); one that names
// SGLang still gets SGLang's.
func TestNextStepsNoFrameworkUnlessNamed(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "openmpi-process-received-signal-segfault-two-ranks-mukautuva.txt", "", nil, []string{"--profile pystacks,coredump"}, []string{"--profile sglang", "--profile vllm"}},
		{"dev", "ollama-runner-terminated-0xc0000409-ggml-assert-msty-json.txt", "", nil, nil, []string{"--profile sglang", "--profile vllm"}},
		{"dev", "cuda-gdb-cuda-exception-14-warp-illegal-address-fastertransformer.txt", "", nil, []string{"the serving framework's flag"}, []string{"--profile sglang", "--level 5", "the SGLang server's command line"}},
		{"dev", "device-assert-logits-then-rank-watchdog-sglang.txt", "", nil, []string{"--profile sglang"}, nil},
	})
}
