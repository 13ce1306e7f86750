package triage

import (
	"testing"
)

// TestHeldout7Families: the families heldout7 missed, each read by a rule
// over the family (real dev logs, none from heldout7): a launcher's report
// of a child's signal, a Windows NTSTATUS exit code, NCCL's result string
// behind another layer, a kernel image the runtime cannot load.
func TestHeldout7Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		// DeepSpeed's launcher, Python's subprocess and mpirun report the signal.
		{"dev", "deepspeed-launcher-return-code-minus-11-sigsegv-clm.txt", "native_crash", []string{"SIGSEGV"}, nil, nil},
		{"dev", "python-calledprocesserror-died-with-signals-sigkill-swin.txt", "killed", []string{"killed by SIGKILL", "the launcher reports"}, nil, nil},
		{"dev", "mpirun-rank-exited-on-signal-9-killed-npb-bt.txt", "killed", []string{"killed by SIGKILL"}, nil, nil},
		{"dev", "mpirun-rank-exited-on-signal-9-killed-relion.txt", "killed", []string{"killed by SIGKILL"}, nil, nil},
		// Windows reports a crash as an NTSTATUS exit code.
		{"dev", "ollama-runner-terminated-0xc0000409-ggml-assert-msty-json.txt", "native_crash", []string{"Windows 0xC0000409, fail-fast abort"}, nil, nil},
		{"dev", "pycharm-exit-code-0xc0000005-unet-epoch-2.txt", "native_crash", []string{"Windows 0xC0000005, access violation"}, nil, nil},
		{"dev", "pycharm-exit-code-0xc0000005-rbpn.txt", "native_crash", []string{"Windows 0xC0000005"}, nil, nil},
		// NCCL's result string behind Horovod's and TensorFlow's words.
		{"dev", "horovod-tf-unknownerror-ncclcomminitrank-unhandled-system-error.txt", "collective_timeout", []string{"unhandled system error"}, nil, nil},
		{"dev", "horovodrun-runtimeerror-ncclcomminitrank-unhandled-cuda-error-ignite.txt", "collective_timeout", []string{"unhandled cuda error"}, nil, nil},
		// std::terminate with no exception (a joinable std::thread destroyed).
		{"dev", "cpp-terminate-without-active-exception-aborted-detectron.txt", "native_crash", []string{"SIGABRT"}, nil, nil},
		{"dev", "cpp-terminate-without-active-exception-alphapose.txt", "native_crash", []string{"SIGABRT"}, nil, nil},
		// "device kernel image is invalid": the build has no image for this GPU.
		{"dev", "torch-cuda-device-kernel-image-invalid-rtx5060ti-hunyuan.txt", "gpu_arch_mismatch", []string{"device kernel image is invalid"}, nil, nil},
		{"dev", "torch-cuda-device-kernel-image-invalid-quoted-lora-scripts.txt", "gpu_arch_mismatch", []string{"device kernel image is invalid"}, []string{"TORCH_CUDA_ARCH_LIST"}, nil},
		// A ROCm build words it "CUDA error" but names hipErrorInvalidImage:
		// the steps are ROCm's.
		{"heldout7", "hip-device-kernel-image-invalid-gfx1100-wheel-on-780m.txt", "gpu_arch_mismatch", nil, []string{"PYTORCH_ROCM_ARCH"}, []string{"TORCH_CUDA_ARCH_LIST"}},
	})
}
