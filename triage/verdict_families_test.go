package triage

import (
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// TestLauncherAndSystemFamilies: reports by a launcher, a scheduler, Ray or
// NCCL's NVLS setup read as what they are, with steps for that family.
func TestLauncherAndSystemFamilies(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"heldout4", "torchelastic-death-signal-1-sighup-vrt.txt", "killed",
			[]string{"killed by SIGHUP", "torchrun's agent"}, []string{"tmux"}, nil},
		{"heldout4", "torchelastic-death-signal-15-prime-rl.txt", "killed",
			[]string{"killed by SIGTERM"}, []string{"orchestrator"}, []string{"tmux"}},
		{"dev", "k8s-exit-137-reason-error-describe.txt", "killed",
			[]string{"exit code 137 (SIGKILL) without OOMKilled"}, []string{"kubectl describe pod", "CONSTRAINT_MEMCG"}, nil},
		{"dev", "ray-worker-oom-threshold-vllm.txt", "host_oom",
			[]string{"Ray's memory monitor", "169.254.181.2", "12.49GB of 13.15GB"}, []string{"ray logs raylet.out -ip 169.254.181.2", "RAY_memory_usage_threshold"}, []string{"OOM killer killed"}},
		{"heldout4", "ray-raylet-workers-killed-memory-pressure-easyr1.txt", "host_oom",
			[]string{"Ray's memory monitor", "10.95.143.76"}, []string{"not GPU memory"}, nil},
		{"dev", "nvls-multicast-bind-fabric-manager-pytorch-ci.txt", "gpu_hardware_error",
			[]string{"NVLink SHARP (NVLS)", "Fabric Manager"}, []string{"nvidia-fabricmanager", "NCCL_NVLS_ENABLE=0"}, []string{"NCCL_P2P_DISABLE", "dcgmi"}},
		{"heldout4", "nvls-cuda-failure-401-vllm-h100.txt", "gpu_hardware_error",
			[]string{"NVLS"}, []string{"NCCL_NVLS_ENABLE=0"}, nil},
		{"heldout4", "graph-capture-hip-not-permitted-watchdog-vllm.txt", "python_exception",
			[]string{"graph capture misuse", "operation not permitted when stream is capturing", "watchdog"}, []string{"AMD_LOG_LEVEL=4", "graphs off"}, []string{"CUDA_LAUNCH_BLOCKING"}},
		{"heldout4", "graph-capture-unjoined-work-deepep.txt", "python_exception",
			[]string{"capturing stream has unjoined work"}, []string{"side stream not joined"}, []string{"AMD_LOG_LEVEL"}},
		{"dev", "megatron-nan-grad-norm-backwards-pass-traceback.txt", "numerical_nonfinite",
			[]string{"found NaN in local grad norm"}, []string{"set_detect_anomaly"}, []string{"--profile sglang", "nan_count"}},
		// issue 25: families the unseen logs showed
		{"dev", "pydantic-vllm-modelconfig-rope-scaling-runpod.txt", "python_exception",
			[]string{"configuration rejected", "ModelConfig", "rope_scaling should have a 'rope_type' key"}, []string{"Nothing crashed", "--hf-overrides"}, []string{"CUDA_LAUNCH_BLOCKING", "coredump"}},
		{"dev", "pydantic-vllm-modelconfig-expecting-value-minicpm.txt", "python_exception",
			[]string{"ModelConfig failed validation: Expecting value"}, []string{"lost its quotes"}, nil},
		{"dev", "rccl-fatal-error-hip-failure-ipc-invalid-argument-mi350x.txt", "collective_timeout",
			[]string{"invalid argument"}, nil, []string{"CUDA_LAUNCH_BLOCKING"}},
		{"dev", "bare-runtimeerror-shape-mismatch-masktextspotter.txt", "python_exception",
			[]string{"RuntimeError: shape mismatch"}, nil, nil},
		{"dev", "faulthandler-thread-dump-no-header-hang-modelbench.txt", "hang",
			[]string{"faulthandler dumped 2 threads' stacks with no fatal error"}, []string{"already holds every thread's stack"}, []string{"py-spy"}},
		{"dev", "deepspeed-loss-scale-1-reducing-to-1-t5-11b.txt", "numerical_nonfinite", nil, nil, nil},
		{"dev", "deepspeed-overflow-early-cascade-recovers-cogvideo.txt", "unknown", nil, nil, nil},
		// heldout6's misses, each read by a rule over its family.
		// torchrun's negative exit codes: a signal, SIGKILL a kill from outside.
		{"heldout6", "torchrun-failed-exitcode-minus-9-colossalai.txt", "killed",
			[]string{"killed by SIGKILL", "torchrun reports its worker"}, []string{"Out of memory: Killed process", "MaxRSS"}, []string{"tmux"}},
		{"heldout6", "torchrun-failed-exitcode-minus-9-laptop-llama.txt", "killed", []string{"killed by SIGKILL"}, nil, nil},
		{"heldout6", "torchrun-failed-exitcode-minus-9-quoted-slurm-rlhf-v.txt", "killed", []string{"killed by SIGKILL"}, nil, nil},
		{"dev", "torchrun-childfailed-root-cause-minus-9-sigkill-cppo.txt", "killed",
			[]string{"killed by SIGKILL", "it explains torchrun's failed child"}, nil, nil},
		{"dev", "torchrun-childfailed-exitcode-minus-6-sigabrt-mmseg.txt", "native_crash", []string{"SIGABRT"}, nil, nil},
		{"dev", "torch-spawn-process-terminated-sigkill-prompt4nr.txt", "killed",
			[]string{"killed by SIGKILL", "torch.multiprocessing reports its worker process"}, []string{"Out of memory: Killed process"}, nil},
		{"dev", "torch-spawn-process-terminated-sigsegv-mp-senet.txt", "native_crash", []string{"SIGSEGV"}, nil, nil},
		// Slurm's cgroup OOM count.
		{"heldout6", "slurm-cgroup-oom-kill-killed-python-cgcnn.txt", "host_oom", []string{"oom-kill event(s) in StepId=191.batch"}, []string{"Slurm's --mem"}, nil},
		// slurmstepd's own cancel line: the time limit is the scheduler's TIMEOUT.
		{"dev", "slurm-job-cancelled-time-limit-canu.txt", "hang", []string{"time limit"}, []string{"a longer `--time`"}, nil},
		{"dev", "slurm-job-and-step-cancelled-time-limit-zetta.txt", "hang", []string{"time limit"}, nil, nil},
		// NCCL's result strings and its net transport's failures.
		{"heldout6", "nccl-internal-error-connection-closed-by-peer-lightning.txt", "collective_timeout",
			[]string{"internal error"}, []string{"closed or reset", "ibstat"}, []string{"NCCL_P2P_DISABLE"}},
		{"heldout6", "nccl-remote-error-ib-completion-error-12-one-line.txt", "collective_timeout",
			[]string{"remote process exited or there was a network error"}, []string{"closed or reset"}, []string{"NCCL_P2P_DISABLE"}},
		// A CUDA error text behind a bracketed `[CUDA][ERROR]` tag.
		{"heldout6", "lightseq-cuda-error-misaligned-address-gpt.txt", "gpu_illegal_memory_access", []string{"misaligned address"}, nil, nil},
		// A device assert of an old CUDA toolkit, without the function.
		{"heldout6", "device-assert-thc-tensorindex-windows-flowtron.txt", "gpu_device_assert",
			[]string{"THCTensorIndex.cu:218: `srcIndex < srcSelectDimSize`"}, nil, nil},
		// A named loss (`noise_step_loss=nan`) in a progress bar's postfix.
		{"heldout6", "deepspeed-overflow-scale-to-1-loss-nan-then-traceback.txt", "numerical_nonfinite", nil, nil, nil},
		// "Current thread" proves the dump is not the hang watchdog's.
		{"heldout6", "faulthandler-headerless-current-thread-nccl-init-sglang.txt", "native_crash",
			[]string{"ncclCommInitRank", "`Fatal Python error` line is not in the log"}, nil, nil},
		// An OOM the program retried after and recovered from is not the cause.
		{"heldout6", "llamacpp-oom-then-retry-without-pipeline-parallelism-recovered.txt", "unknown",
			[]string{"retried with less and went on"}, nil, nil},
		{"dev6", "llamacpp-cudamalloc-oom-load-tensors-144gib.txt", "gpu_oom", nil, nil, nil},
	})
}

// A ring timeout and its reset, then a page fault on VMID 0 (the driver's own
// VM, no process): the hang is the cause, the fault its fallout.
func TestRootCauseRingResetBeforeVMID0Fault(t *testing.T) {
	for _, name := range []string{"amdgpu-comp-ring-timeout-reset-then-vmid0-fault-rdna4.txt", "amdgpu-comp-ring-timeout-reset-then-vmid0-fault-gnome-shell.txt"} {
		fs, err := ScanEvidenceText(strings.NewReader(unseenSampleText(t, "dev", name)), name, 2025)
		if err != nil {
			t.Fatal(err)
		}
		r := Decide(Input{Findings: fs})
		if r.Verdict.Kind != evidence.GPUHang {
			t.Errorf("%s: verdict %+v", name, r.Verdict)
		}
		for _, f := range r.Findings {
			if f.Kind == evidence.GPUPageFault && f.Details.Text(detail.VerdictRole) != RoleExplained {
				t.Errorf("%s: the VMID 0 fault is %s, want explained", name, f.Details.Text(detail.VerdictRole))
			}
		}
	}
}

// A signal that Python turned into an exception (Ctrl-C's KeyboardInterrupt)
// is the signal, not a Python exception.
func TestSignalTurnedIntoExceptionIsKilled(t *testing.T) {
	name := "keyboardinterrupt-sigint-traceback-grad-scaler-nunif.txt"
	fs, err := ScanEvidenceText(strings.NewReader(unseenSampleText(t, "dev", name)), name, 2025)
	if err != nil {
		t.Fatal(err)
	}
	r := Decide(Input{ExitCode: vdInt(1), Findings: fs})
	if r.Verdict.Kind != evidence.Killed || !strings.Contains(r.Verdict.Summary, "killed by SIGINT") {
		t.Errorf("verdict %+v", r.Verdict)
	}
}
