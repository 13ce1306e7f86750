package triage

import "testing"

// TestHeldout16Families: the families heldout16 missed and the label
// conventions of testdata/unseen/LABELS.md, each read by a rule over the
// family (real dev logs, and heldout16's and earlier splits' own misses since
// they were scored): ggml's abort message (GGML_ABORT's `FILE:LINE: MESSAGE`,
// not only GGML_ASSERT); a traceback whose header follows a `^C` echo, whole
// or cut (killed by SIGINT); gdb's stacks of a live process whose threads all
// wait (hang, low); the CUDA error text behind caffe2's `Check failed: error
// == cudaSuccess MSG` without `(N vs. 0)`; rocminfo's `Call returned
// HSA_STATUS_ERROR_OUT_OF_RESOURCES` (no kind, the step about /dev/kfd and
// the render group); SGLang's failed health check (hang, medium); a Go
// runtime dump without its header that ends the log (native_crash, low).
// Negative controls: HSA's OUT_OF_RESOURCES of a running program stays a GPU
// OOM; a Ctrl-C echo that no traceback follows is no kill.
func TestHeldout16Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "beellama-2026-windows-ggml-impl-h-319-fatal-error-then-process-exited-code-3221226505.txt", "native_crash", []string{"SIGABRT", "ggml-impl.h:319: fatal error"}, nil, nil},
		{"heldout16", "llamacpp-ci-debug-ggml-backend-cpp-1623-unexpected-graph-reallocation-then-new-lwp-lines.txt", "native_crash", []string{"unexpected graph reallocation"}, nil, nil},
		{"heldout15", "rocblas-gfx1032-llama-server-quoted-slot-lines-rocm-error-cublas-status-internal-error-then-new-lwp.txt", "native_crash", nil, nil, nil},

		{"dev", "pyseq-2025-sfind-ctrl-c-traceback-os-walk-frames-cut.txt", "killed", []string{"SIGINT", "Ctrl-C"}, []string{"py-spy dump", "innermost frame _walk"}, []string{"sacct"}},
		{"heldout16", "megatron-lm-2021-stuck-after-float16-parameters-then-ctrl-c-traceback-parse-args-cut.txt", "killed", []string{"Ctrl-C"}, nil, nil},
		{"heldout16", "sglang-router-rs-2025-ctrl-c-glued-worker-is-not-ready-yet-initializing-workers.txt", "unknown", nil, nil, nil},

		{"dev", "nccl-2023-fastertransformer-rank0-gdb-thread-apply-all-bt-cond-wait-poll-threads.txt", "hang", []string{"all 2 threads shown wait", "futex_wait_cancelable"}, []string{"thread apply all bt"}, nil},
		{"heldout16", "nccl-tests-2019-v100-two-gpus-hang-gdb-bt-sched-yield-timetest-runtest-tab.txt", "hang", []string{"sched_yield"}, nil, nil},
		{"dev", "pytorch-ddp-nccl-hang-gdb-attached-thread-frames-futex-wait-cancelable.txt", "hang", nil, nil, nil},
		// The same gdb frames when a thread is in the crash's abort: a crash.
		{"dev", "rocm-mi300x-bitsandbytes-import-core-file-gdb-bt-abort-terminate-frames-cut.txt", "native_crash", nil, nil, nil},

		{"dev", "deeplearningexamples-2018-detectron-context-gpu-h-107-check-failed-unspecified-launch-failure-glued-quoted.txt", "gpu_illegal_memory_access", []string{"unspecified launch failure"}, nil, nil},
		{"heldout16", "pytorch-caffe2-2018-check-failure-stack-trace-context-gpu-h-107-unspecified-launch-failure-glued-quoted.txt", "gpu_illegal_memory_access", nil, nil, nil},

		{"dev", "rocm-arch-2022-rx560-rocminfo-hsa-api-call-failure-rocminfo-cc-1148-out-of-resources.txt", "unknown", []string{"HSA_STATUS_ERROR_OUT_OF_RESOURCES"}, []string{"/dev/kfd", "render"}, []string{"headroom", "synchronous"}},
		{"dev", "rocm-1758-ubuntu-rocminfo-hsa-api-call-failure-rocminfo-cc-1140-out-of-resources.txt", "unknown", nil, []string{"/dev/kfd"}, nil},
		{"heldout16", "rocm-33-vega64-rocminfo-hsa-api-call-failure-rocminfo-cc-1102-out-of-resources-as-user.txt", "unknown", nil, []string{"render,video"}, nil},
		{"heldout12", "sglang-mi350x-dsv4-hsa-status-error-out-of-resources-available-free-mem-30mb-aborted.txt", "gpu_oom", nil, nil, nil},

		{"dev", "sglang-10856-title-health-check-failed-detokenizer-20s-heartbeat-six-minutes-old.txt", "hang", []string{"Health check failed"}, []string{"py-spy dump"}, nil},
		{"heldout16", "sglang-0517-h200-nvl-rid-state-deleted-in-tokenizermanager-then-health-check-failed-detokenizer-20s.txt", "hang", nil, nil, nil},

		{"dev", "ollama-2025-minicpm-journal-go-runfinq-goexit-chan-receive-goroutine-frames-cut.txt", "native_crash", []string{"Go runtime dump", "runtime.goexit"}, nil, nil},
		{"dev", "ollama-0128-starcoder2-go-runfinq-ensuresigm-select-goroutines-frames-cut.txt", "native_crash", []string{"runtime.runfinq"}, nil, nil},
		{"heldout13", "ollama-journal-dd-mm-stamps-go-frames-llamarunner-execute-cobra-command.txt", "native_crash", nil, nil, nil},
		{"heldout13", "ollama-journalctl-n-50-go-runtime-goexit-gcbgmarkworker-frames-tail-only.txt", "native_crash", nil, nil, nil},
		{"heldout14", "ollama-journal-lowercase-month-go-goroutine-frames-net-http-conn-read.txt", "native_crash", nil, nil, nil},
		{"heldout14", "ollama-runner-journal-backtick-glued-go-frames-then-register-dump-rax-rflags.txt", "native_crash", []string{"registers"}, nil, nil},
		{"heldout15", "ollama-2025-go-gc-worker-goroutines-gopark-frames-no-header.txt", "native_crash", nil, nil, nil},
	})
}
