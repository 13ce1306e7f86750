package triage

import (
	"testing"
)

// TestHeldout9Families: the families heldout9 missed, each read by a rule
// over the family (real dev logs, none from heldout9): Intel's GPU hangs, a
// container's 128+N exit without OOMKilled, batch schedulers' wall-time
// kills, a shell's bare or zsh-worded crash signal, nvidia-smi's lost
// device handle, DeepSpeed's loss scale halved to its floor.
func TestHeldout9Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		// i915 resetting a hung render engine: Intel's steps, no CUDA/ROCm one.
		{"dev", "i915-resetting-rcs0-for-hang-on-rcs0-repeated-fence-timeout.txt", "gpu_hang", []string{"hang on rcs0"}, []string{"/sys/class/drm/card0/error"}, []string{"CUDA", "ROCm", "amdgpu", "HIP", "Xid"}},
		// docker inspect's State: 137 without OOMKilled is a kill from outside,
		// 139 a segfault; exit 0 is no failure.
		{"dev", "docker-inspect-sd-webui-state-oomkilled-false-exitcode-137.txt", "killed", []string{"137"}, []string{"docker inspect", "docker events", "CONSTRAINT_MEMCG"}, []string{"sacct"}},
		{"dev", "docker-inspect-state-137-oomkilled-false-kubelet-node-backtick.txt", "killed", []string{"137"}, nil, nil},
		{"dev", "docker-inspect-exitcode-137-unhealthy-health-log-exitcode-0.txt", "killed", []string{"137"}, nil, nil},
		{"dev", "docker-inspect-state-exitcode-139-dotnet-segfault-argo.txt", "native_crash", nil, nil, nil},
		{"dev", "docker-inspect-state-exitcode-0-redeploy-control.txt", "unknown", nil, nil, nil},
		// PBS/Torque's wall-time kill reads like Slurm's TIME LIMIT.
		{"dev", "pbs-job-killed-walltime-exceeded-limit-torque-qiime.txt", "hang", []string{"time limit"}, []string{"walltime="}, []string{"--time"}},
		{"dev", "pbs-walltime-exceeded-grep-of-job-outputs-evs-quoted.txt", "hang", []string{"time limit"}, nil, nil},
		// A shell's report of SIGILL.
		{"dev", "zsh-job-illegal-hardware-instruction-privategpt-gptj-load.txt", "native_crash", nil, nil, nil},
		{"dev", "gpt4all-llama-model-load-illegal-instruction-core-dumped.txt", "native_crash", nil, nil, nil},
		// nvidia-smi cannot reach a GPU still on the bus.
		{"dev", "nvidia-smi-a-i-0-device-handle-unknown-error-failed-gpu-container.txt", "gpu_hardware_error", []string{"device handle"}, nil, nil},
		{"dev", "nvidia-smi-device-handle-unknown-error-synology-tesla-p4.txt", "gpu_hardware_error", []string{"device handle"}, nil, nil},
		// DeepSpeed's scale halved down to its floor of 1.
		{"dev", "deepspeed-overflow-attempted-loss-scale-1-reducing-to-1.txt", "numerical_nonfinite", nil, nil, nil},
	})
}
