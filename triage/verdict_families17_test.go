package triage

import "testing"

// TestHeldout17Families: the families heldout17 missed, each read by a rule
// over the family (real dev logs, and heldout17's and earlier splits' own
// misses since they were scored): the NVIDIA open driver's lines for a GPU
// lost from the bus (NV_ERR_GPU_IS_LOST, status 0x0000000F: `Assertion
// failed: GPU lost from the bus`, `Check failed: ...`, `rpcSendMessage failed
// with status 0x0000000f`) without an Xid 79 line, read as the lost GPU
// (gpu_hardware_error) and not the assert's crash (kernlog/gpu_lost.go);
// faulthandler's frames without any header that end the log (native_crash,
// low). Controls: the timer's dump (`Timeout (0:00:01)!` and thread headers)
// and a headerless dump with thread headers further on stay hangs, and
// headerless frames stuck in a collective stay a hang.
func TestHeldout17Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "nvidia-open-john-5835-dmesg-check-failed-gpu-lost-from-the-bus-rpc-send-failed-0xf.txt", "gpu_hardware_error", []string{"Xid 79"}, nil, nil},
		{"heldout17", "nvidia-ogkm-688-dgx-station-a100-journal-assert-gpu-lost-from-the-bus-rpc-send-failed.txt", "gpu_hardware_error", nil, nil, nil},
		{"heldout14", "nvidia-open-gsp-journal-rpcsendmessage-failed-status-0xf-asserts-fullchip-reset.txt", "gpu_hardware_error", nil, nil, nil},

		{"dev", "vllm-7960-ray-worker-faulthandler-deepseek-v2-forward-no-header-frames-cut.txt", "native_crash", []string{"faulthandler frames", "_wrapped_call_impl"}, nil, nil},
		{"heldout17", "vllm-15687-ray-worker-faulthandler-frames-pynccl-init-model-parallel-group.txt", "native_crash", []string{"Fatal Python error", "pynccl.py"}, nil, nil},
		{"dev", "tinygrad-18190-pytest-dump-traceback-later-timeout-header-two-threads.txt", "hang", nil, nil, nil},
		{"dev", "faulthandler-thread-dump-no-header-hang-modelbench.txt", "hang", nil, nil, nil},
		{"heldout10", "vllm-faulthandler-frames-stuck-in-all-reduce-no-header.txt", "hang", nil, nil, nil},
	})
}
