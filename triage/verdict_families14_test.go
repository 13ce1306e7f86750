package triage

import (
	"strings"
	"testing"
)

// TestHeldout14Families: the families heldout14 missed, each read by a rule
// over the family (real dev logs, and heldout14's own misses since it was
// scored): rocBLAS's `Cannot read .../TensileLibrary.dat`, which names no
// gfx ISA (gpu_arch_mismatch, medium, the steps naming the library's path
// too); systemd's report of a service's crash signal (`Main process exited,
// code=dumped, status=11/SEGV`); native stack frames that are their stream's
// last words (glibc's backtrace_symbols, gdb's, UCX's), naming the innermost
// frame past the crash handler's own. Negative controls: gdb attached to a
// live process (its innermost frame waits: no crash, a hang since
// heldout16's rules); Ray's message for a dead actor,
// which lists OOM, a kill and SIGSEGV as possible causes, none of them the
// failure.
func TestHeldout14Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "llamacpp-cuda-grammar-ggml-uncaught-exception-gdb-frames-cut.txt", "native_crash", []string{"without the line that says what crashed", "llama_grammar_accept_token (libllama.so.0)"}, nil, nil},
		{"dev", "rocm-mi300x-bitsandbytes-import-core-file-gdb-bt-abort-terminate-frames-cut.txt", "native_crash", []string{"__GI_abort"}, nil, nil},
		{"heldout14", "llamacpp-docker-gpt-oss-20b-slot-lines-double-spaced-then-ggml-abort-backtrace.txt", "native_crash", []string{"ggml_abort (libggml-base.so)"}, nil, nil},
		{"heldout14", "llamacpp-multi-amd-gpu-llama-server-backtrace-libllama-model-load-libc-start-main.txt", "native_crash", []string{"llama_model_load_from_file"}, nil, nil},
		{"heldout14", "ollama-0311-journal-cjk-month-gdb-frames-graph-reserve-common-fit-params.txt", "native_crash", []string{"llama_context::graph_reserve"}, nil, nil},
		{"heldout14", "vllm-084-ray-worker-tp16-native-backtrace-frames-libffi-pyeval.txt", "native_crash", []string{"_PyObject_MakeTpCall"}, nil, nil},
		// No crash: since heldout16's rules, the stacks of a live process whose
		// threads all wait read as a hang (TestHeldout16Families).
		{"dev", "pytorch-ddp-nccl-hang-gdb-attached-thread-frames-futex-wait-cancelable.txt", "hang", nil, nil, nil},
		{"dev", "ollama-manual-install-journal-systemd-main-process-exited-code-dumped-status-11-segv-restarts.txt", "native_crash", nil, nil, nil},
		{"dev", "systemd-iot-service-lowercase-main-process-exited-code-dumped-status-11-segv.txt", "native_crash", nil, nil, nil},
		{"dev", "realm-object-server-journal-main-process-exited-code-killed-status-6-abrt.txt", "native_crash", nil, nil, nil},
		{"heldout14", "ollama-2023-rtx3060-systemd-main-process-exited-code-dumped-status-11-segv-restarts.txt", "native_crash", nil, nil, nil},
		{"dev", "dsnote-flatpak-amd-addon-rocblas-cannot-read-tensilelibrary-dat-no-such-file-fence-glued.txt", "gpu_arch_mismatch", nil, []string{"ROCBLAS_TENSILE_LIBPATH", "PYTORCH_ROCM_ARCH"}, nil},
		{"dev", "rocm-build-navi14-gfx1012-rocblas-cannot-read-tensilelibrary-dat-no-such-file-backticks.txt", "gpu_arch_mismatch", nil, nil, nil},
		{"heldout14", "rocblas-7800xt-gdb-quoted-cannot-read-tensilelibrary-illegal-seek-sigabrt-rocblas-abort-once.txt", "gpu_arch_mismatch", nil, nil, nil},
		{"heldout14", "rocblas-mi100-tensorflow-cannot-read-tensilelibrary-no-such-file-one-line.txt", "gpu_arch_mismatch", nil, []string{"ROCBLAS_TENSILE_LIBPATH"}, nil},
		{"heldout14", "tensile-roop-onnxruntime-backtick-glued-rocblas-cannot-read-tensilelibrary-aborted.txt", "gpu_arch_mismatch", nil, nil, nil},
		{"dev", "ray-logic-rl-a800-actor-is-dead-potential-root-causes-oom-sigsegv-one-line.txt", "unknown", nil, nil, nil},
		{"dev", "flower-ray-hpc-actor-is-dead-potential-root-causes-then-removed-from-pool.txt", "unknown", nil, nil, nil},
		{"heldout14", "vllm-2023-ray-backtick-actor-is-dead-worker-exit-system-error-connection-eof.txt", "unknown", nil, nil, nil},
	})
}

// TestNativeFramesNeedTheEnd: native frames are read only when nothing but
// frames follows them to the end of their stream. The same real frames
// followed by the same server's real progress lines are not read.
func TestNativeFramesNeedTheEnd(t *testing.T) {
	docker := unseenSampleText(t, "heldout14", "llamacpp-docker-gpt-oss-20b-slot-lines-double-spaced-then-ggml-abort-backtrace.txt")
	slot := docker[:strings.Index(docker, "libggml-base.so")]
	gdb := unseenSampleText(t, "dev", "llamacpp-cuda-grammar-ggml-uncaught-exception-gdb-frames-cut.txt")
	for _, c := range []struct{ name, text string }{
		{"glibc frames then the server's slot lines", docker + slot},
		{"gdb frames then the server's slot lines", gdb + slot},
	} {
		fs, err := ScanEvidenceText(strings.NewReader(c.text), c.name, 2025)
		if err != nil {
			t.Fatal(err)
		}
		if r := decideWithFallback(false, Input{Findings: fs}); r.Verdict.Kind == "native_crash" {
			t.Errorf("%s: verdict native_crash, want none: %s", c.name, r.Verdict.Summary)
		}
	}
}
