package triage

import "testing"

// TestHeldout14Families: the families heldout14 missed, each read by a rule
// over the family (real dev logs, and heldout14's own misses since it was
// scored): rocBLAS's `Cannot read .../TensileLibrary.dat`, which names no
// gfx ISA (gpu_arch_mismatch, medium, the steps naming the library's path
// too); systemd's report of a service's crash signal (`Main process exited,
// code=dumped, status=11/SEGV`). Negative controls: Ray's message for a dead actor lists OOM, a
// kill and SIGSEGV as possible causes; none of them is the failure.
func TestHeldout14Families(t *testing.T) {
	checkFamilies(t, []familyCase{
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
