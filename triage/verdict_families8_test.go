package triage

import (
	"strings"
	"testing"
)

// TestHeldout8Families: the families heldout8 missed, each read by a rule
// over the family (real dev logs, none from heldout8): PyTorch's OOM worded
// "Allocation on device", a shell's, TGI's or Open MPI's report of a crash
// signal, compute-sanitizer's and cuda-gdb's reports of a bad access, a
// CUDA driver error name outside Python, NCCL's network failures.
func TestHeldout8Families(t *testing.T) {
	for _, c := range []struct {
		name, kind string
		summary    []string
	}{
		// PyTorch's allocator without the words "out of memory".
		{"comfyui-traceback-outofmemoryerror-allocation-on-device-model-to.txt", "gpu_oom", []string{"Allocation on device"}},
		{"comfyui-exception-during-processing-allocation-on-device-sonic.txt", "gpu_oom", []string{"Allocation on device"}},
		{"chattts-cuda-outofmemoryerror-allocation-would-exceed-allowed-memory.txt", "gpu_oom", []string{"would exceed allowed memory"}},
		{"animatediff-outofmemoryerror-allocation-exceed-one-line.txt", "gpu_oom", []string{"1.88 GiB"}},
		// A shell, TGI's launcher and Open MPI report the crash signal.
		{"bash-script-line-segmentation-fault-core-dumped-point-gnn.txt", "native_crash", []string{"SIGSEGV"}},
		{"bash-script-line-aborted-core-dumped-pytorch-fan.txt", "native_crash", []string{"SIGABRT"}},
		{"tgi-shard-signaled-to-shutdown-signal-4-shardcannotstart.txt", "native_crash", []string{"SIGILL"}},
		{"openmpi-process-received-signal-segfault-two-ranks-mukautuva.txt", "native_crash", []string{"SIGSEGV"}},
		// Tools that watch kernels: compute-sanitizer, cuda-memcheck, cuda-gdb.
		{"compute-sanitizer-invalid-global-read-access-out-of-bounds-hecbench.txt", "gpu_illegal_memory_access", []string{"out of bounds"}},
		{"cuda-memcheck-invalid-global-read-address-out-of-bounds-quicksilver.txt", "gpu_illegal_memory_access", []string{"out of bounds"}},
		{"cuda-gdb-cuda-exception-14-warp-illegal-address-fastertransformer.txt", "gpu_illegal_memory_access", []string{"Warp Illegal Address"}},
		{"cuda-gdb-cuda-exception-5-warp-out-of-range-address-gipuma.txt", "gpu_illegal_memory_access", []string{"Out-of-range Address"}},
		// The driver API's error name in another layer's log.
		{"tf-stream-executor-cuda-error-misaligned-address-event-poll.txt", "gpu_illegal_memory_access", []string{"CUDA_ERROR_MISALIGNED_ADDRESS"}},
		// PyTorch's internal check logged with only its message.
		{"diffdock-failed-on-internal-assert-failed-message-only.txt", "python_exception", []string{"INTERNAL ASSERT FAILED"}},
		// PyTorch's CPU allocator could not get host memory (no OOM killer); a
		// program's hint that names CUDA OOM does not make it a GPU OOM.
		{"torch-defaultcpuallocator-cant-allocate-memory-fang.txt", "host_oom", []string{"can't allocate memory"}},
		{"torch-defaultcpuallocator-then-cuda-oom-hint-real-esrgan.txt", "host_oom", []string{"can't allocate memory"}},
		// NCCL's newer InfiniBand completion wording (status=N).
		{"nccl-net-ib-completion-status-12-then-5-vendor-err-249-64-ranks.txt", "collective_timeout", nil},
		// Controls: SMU messages that the GPU survived at boot are no failure
		// (heldout8's SMU label stays a miss); NCCL's remote error was read
		// before and still is.
		{"amdgpu-powerplay-failed-to-send-message-at-boot-polaris-then-works.txt", "unknown", nil},
		{"nccl-distbackenderror-ncclremoteerror-last-error-socket-reset.txt", "collective_timeout", nil},
	} {
		fs, err := ScanEvidenceText(strings.NewReader(unseenSampleText(t, "dev", c.name)), c.name, 2025)
		if err != nil {
			t.Fatal(err)
		}
		r := Decide(Input{Findings: fs})
		if string(r.Verdict.Kind) != c.kind {
			t.Errorf("%s: verdict %s, want %s: %s", c.name, r.Verdict.Kind, c.kind, r.Verdict.Summary)
		}
		for _, w := range c.summary {
			if !strings.Contains(r.Verdict.Summary, w) {
				t.Errorf("%s: summary lacks %q: %s", c.name, w, r.Verdict.Summary)
			}
		}
	}
}

// TestNextStepsNoFrameworkUnlessNamed: a log that names no framework (an
// MPI program, ollama, a script) gets no framework's logging profile in its
// next steps (SGLang's kernel-API logger logs nothing there); one that names
// SGLang still gets SGLang's.
func TestNextStepsNoFrameworkUnlessNamed(t *testing.T) {
	for _, c := range []struct {
		split, name string
		want, nope  []string
	}{
		{"dev", "openmpi-process-received-signal-segfault-two-ranks-mukautuva.txt", []string{"--profile pystacks,coredump"}, []string{"--profile sglang", "--profile vllm"}},
		{"dev", "ollama-runner-terminated-0xc0000409-ggml-assert-msty-json.txt", nil, []string{"--profile sglang", "--profile vllm"}},
		{"dev", "cuda-gdb-cuda-exception-14-warp-illegal-address-fastertransformer.txt", []string{"the serving framework's flag"}, []string{"--profile sglang", "--level 5", "the SGLang server's command line"}},
		{"dev", "device-assert-logits-then-rank-watchdog-sglang.txt", []string{"--profile sglang"}, nil},
	} {
		fs, err := ScanEvidenceText(strings.NewReader(unseenSampleText(t, c.split, c.name)), c.name, 2025)
		if err != nil {
			t.Fatal(err)
		}
		steps := strings.Join(Decide(Input{Findings: fs}).NextSteps, "\n")
		for _, w := range c.want {
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
