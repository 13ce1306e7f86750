package triage

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Families whose evidence is a launcher's or a scheduler's report rather
// than the program's own error: torchrun's agent receiving a signal,
// Kubernetes' exit codes, Ray's memory monitor, NCCL's NVLS setup.

// headlineKilledReport: a kill that only the output tells of, with the
// signal or exit code the reporter gave.
func headlineKilledReport(d evidence.Details, short string) string {
	switch d.Text(detail.Signature) {
	case "torchelastic-death-signal":
		return fmt.Sprintf("killed by %s from outside the program: torchrun's agent received it and stopped its workers", human0(d.Text(detail.Signal)))
	case "kubernetes-exit-signal":
		code := d.Text(detail.ExitCode)
		sig := ""
		if n, err := strconv.Atoi(code); err == nil && n > 128 {
			sig = " (" + signalByNumber(n-128) + ")"
		}
		return "killed: Kubernetes reports exit code " + code + sig + " without OOMKilled: a kill from outside (a memory limit whose reason was lost, a failed liveness probe, an eviction or a deletion)"
	case "torchelastic-worker-killed", "torch-spawn-killed":
		who := "torchrun reports its worker"
		if d.Text(detail.Signature) == "torch-spawn-killed" {
			who = "torch.multiprocessing reports its worker process"
		}
		return "killed by " + human0(d.Text(detail.Signal)) + ": " + who + " ended by the signal (" + short + "); a SIGKILL that no OOM report explains is most often the kernel's OOM killer whose message is not in this log, or the scheduler"
	case "launcher-signal-killed":
		return "killed by " + human0(d.Text(detail.Signal)) + ": the launcher reports its child ended by the signal (" + short + "); a SIGKILL that no OOM report explains is most often the kernel's OOM killer whose message is not in this log, or the scheduler"
	case ctrlCTracebackSig:
		return "killed by SIGINT: Ctrl-C (the terminal's `^C` echo above the traceback) interrupted the program; the traceback shows where it was when it was stopped (often where it was stuck), not a bug"
	case "keyboard-interrupt", "keyboard-interrupt-terminated":
		sig := d.Text(detail.Signal)
		if sig == "" {
			sig = "a signal"
		}
		return "killed by " + sig + ": a Python signal handler turned it into an exception (" + short + "); the traceback shows where the program was when it was stopped, not a bug"
	}
	return "killed: " + short
}

// childFailedByKill: c is torchrun's ChildFailedError and torchrun also
// reports the worker's signal as a kill (`exitcode: -9`, `Signal 9 (SIGKILL)
// received by PID`): the failed child is the killed worker, not another
// failure the kill followed.
func (x *facts) childFailedByKill(c *cf) bool {
	if c.f.Details.Text(detail.Signature) != "torchelastic-child-failed" {
		return false
	}
	for _, k := range x.causes(evidence.Killed) {
		switch k.f.Details.Text(detail.Signature) {
		case "torchelastic-worker-killed", "killed-report":
			return true
		}
	}
	return false
}

// slurmTimeLimitSig is slurmstepd's `CANCELLED AT T DUE TO TIME LIMIT` line
// (configs/signatures.yaml): the scheduler's TIMEOUT read from the log.
const slurmTimeLimitSig = "slurm-time-limit"

// batchTimeLimitSig is the other batch schedulers' wall-time kill (PBS,
// Moab, LSF, Grid Engine), read like Slurm's.
const batchTimeLimitSig = "batch-walltime-limit"

func timeLimitSig(sig string) bool { return sig == slurmTimeLimitSig || sig == batchTimeLimitSig }

func timeLimitWho(sig string) string {
	if sig == slurmTimeLimitSig {
		return "Slurm cancelled it"
	}
	return "the batch scheduler killed it"
}

// timeLimitStep: a scheduler's time-limit kill is a hang or a run that
// needed longer; the log's last progress tells which.
func timeLimitStep(ev []*cf) string {
	if len(ev) == 0 || !timeLimitSig(ev[0].f.Details.Text(detail.Signature)) {
		return ""
	}
	more := "a longer `--time`"
	who := "Slurm"
	if ev[0].f.Details.Text(detail.Signature) == batchTimeLimitSig {
		more, who = "a longer wall time (PBS `-l walltime=`, LSF `-W`, Grid Engine `-l h_rt=`)", "The batch scheduler"
	}
	return who + " ended the job at its time limit: compare the time of the log's last progress line with the kill time. If it was still making progress, it needs more time: " + more + ", or checkpoints it can resume from; if the output stopped long before, it hung, and the steps below find where."
}

func human0(s string) string {
	if s == "" {
		return "a signal"
	}
	return s
}

func (s *stepCtx) killedSteps() string {
	var d evidence.Details
	if len(s.ev) > 0 {
		d = s.ev[0].f.Details
	}
	switch {
	case d.Text(detail.Signature) == ctrlCTracebackSig:
		return ctrlCSteps(d)
	case d.Text(detail.Signature) == "kubernetes-exit-signal":
		return strings.Join([]string{
			"Ask Kubernetes why: `kubectl describe pod POD` (Events: OOMKilled, Liveness probe failed, Evicted, Killing) and `kubectl get events --field-selector involvedObject.name=POD`; exit code 137 with reason Error is often the container's memory limit.",
			"On the node, the kernel log (`dmesg`, `journalctl -k`) shows an OOM kill of the container's cgroup (`oom-kill:constraint=CONSTRAINT_MEMCG`) if that is what it was; compare the pod's memory limit with the program's peak RSS.",
		}, "\n")
	case d.Text(detail.Signature) == "container-exit-signal":
		// Docker has no scheduler record; its own state and events, and the
		// host's kernel log, are where a SIGKILL from outside shows.
		return strings.Join([]string{
			"Ask the container runtime why: `docker inspect --format '{{json .State}}' CONTAINER` (OOMKilled, Error, FinishedAt) and `docker events --since TIME --filter container=CONTAINER` (a `kill` or `stop` event names who stopped it; `docker stop` sends SIGKILL after its grace period, 10 s by default).",
			"On the host, the kernel log (`dmesg`, `journalctl -k`) shows an OOM kill of the container's cgroup (`oom-kill:constraint=CONSTRAINT_MEMCG`) when a memory limit (`--memory`, compose's `mem_limit`) did it and the runtime did not record it.",
		}, "\n")
	case d.Text(detail.Signature) == "torchelastic-death-signal" && d.Text(detail.Signal) == "SIGHUP":
		return strings.Join([]string{
			"SIGHUP comes from the terminal or SSH session that started torchrun closing; `nohup` does not keep torchrun's agent from acting on it. Start long runs under tmux or screen, or through the batch scheduler.",
			"If the session was still open, look for who sent it: the scheduler's record of the job and its time limit.",
		}, "\n")
	case (d.Text(detail.Signature) == "torchelastic-worker-killed" || d.Text(detail.Signature) == "torch-spawn-killed" || d.Text(detail.Signature) == "launcher-signal-killed") && d.Text(detail.Signal) == "SIGKILL":
		return strings.Join([]string{
			"A worker killed by SIGKILL with no error of its own is most often the kernel's OOM killer: look in `dmesg`/`journalctl -k` (or kmsg.log) on that node for `Out of memory: Killed process PID` with the worker's pid, and compare the workers' peak RSS (loading a checkpoint on every rank at once, DataLoader workers) with the node's or the job's memory limit.",
			"If the kernel log shows no OOM kill, check the scheduler's record of the job (memory or time limit, preemption, `sacct -j JOB --format=State,ExitCode,MaxRSS`).",
		}, "\n")
	case d.Text(detail.Signature) == "torchelastic-death-signal":
		return strings.Join([]string{
			"torchrun's agent was stopped from outside and took its workers down: check the scheduler's record of the job (time limit, preemption, `sacct -j JOB --format=State,ExitCode`) and, when torchrun runs under another process (an RL orchestrator, a launcher script), that process's own log: it may have failed first and stopped the others.",
			"Check kmsg.log or `dmesg` for the OOM killer.",
		}, "\n")
	}
	return strings.Join([]string{
		"Something outside the program stopped it: check the scheduler's record of the job (time or memory limit, preemption, `sacct -j JOB --format=State,ExitCode`), and kmsg.log for the OOM killer.",
		"If nothing explains it, re-run with the process tree sampled and kernel messages kept: `" + s.kcrash(s.prof, 0, "") + "`.",
	}, "\n")
}

// rayOOMSteps: Ray's memory monitor, not the kernel, chose the victim.
func (s *stepCtx) rayOOMSteps(c *cf) string {
	logs := "`ray logs raylet.out -ip NODE_IP`"
	if ip := c.f.Details.Text(detail.NodeIP); ip != "" {
		logs = "`ray logs raylet.out -ip " + ip + "`"
	}
	return strings.Join([]string{
		"This is host (CPU) memory, not GPU memory: Ray's memory monitor killed the worker because the node's memory use passed `RAY_memory_usage_threshold` (0.95 by default); the kernel's OOM killer was not involved.",
		"See which processes held the memory: " + logs + " lists the top memory users at the kill.",
		"Lower host memory use on the node (fewer concurrent tasks or actors, more `num_cpus` per task, no CPU offload or large object-store copies), or give the node more memory; raising the threshold only moves the kill to the kernel.",
	}, "\n")
}

// nvlsSteps: NCCL's NVLS setup failed because of the NVSwitch fabric.
func (s *stepCtx) nvlsSteps() string {
	return strings.Join([]string{
		"NCCL could not use NVLink SHARP (multicast through the NVSwitches): this is the system's Fabric Manager or NVSwitch state, not the program. Check `systemctl status nvidia-fabricmanager` and `nvidia-smi -q | grep -A2 Fabric` (State Completed, Status Success) on the node.",
		"A Fabric Manager that was restarted needs the GPUs reset after it (the Fabric Manager user guide's reset sequence); drain the node and reset or reboot it.",
		"To run meanwhile, turn NVLS off: `" + s.kcrash(s.prof, 0, "--env NCCL_NVLS_ENABLE=0") + "` (slower all-reduce).",
	}, "\n")
}

// headlineGraphCapture: the error is the program's use of graph capture,
// not a fault of the kernels being captured.
func headlineGraphCapture(ev []*cf, short string) string {
	// The runtime's message and its error code often come on separate lines:
	// take each from whichever finding has it.
	pick := func(k detail.Text) string {
		for _, c := range ev {
			if v := c.f.Details.Text(k); v != "" && c.f.Details.Text(detail.Family) == "graph_capture" {
				return v
			}
		}
		return ""
	}
	what := pick(detail.Message)
	if what == "" {
		what = pick(detail.Code)
	}
	if what == "" {
		what = short
	}
	s := "CUDA/HIP graph capture misuse: " + what + ": an operation that is not allowed while a stream is captured ran during capture"
	if pick(detail.Via) == "Process group watchdog" {
		s += " (reported by the process-group watchdog)"
	}
	return s
}

func (s *stepCtx) graphCaptureSteps() string {
	off := "`--disable-cuda-graph` (SGLang) or `--enforce-eager` (vLLM)"
	switch s.framework {
	case "sglang":
		off = "`--disable-cuda-graph`"
	case "vllm":
		off = "`--enforce-eager`"
	}
	out := []string{"Confirm that graph capture is the trigger: run once with graphs off (" + off + "); if it then runs, the fault is in what is captured, not in the model."}
	switch s.x.vendor {
	case "amd":
		out = append(out, "Find the call that broke the capture: `"+s.kcrash(s.prof, 0, "--env AMD_LOG_LEVEL=4")+"`, then look for the first `hipError` during capture (ROCm 7 forbids the same calls as CUDA: synchronisations, allocations, host callbacks, collectives outside the capture's rules).")
	default:
		out = append(out, "Find the call that broke the capture: a synchronisation (`.item()`, `.cpu()`, `torch.cuda.synchronize`), an allocation the caching allocator could not serve from its graph pool, a host callback, or a side stream not joined back before the capture ended.")
	}
	return strings.Join(out, "\n")
}

// configValidation reads what a pydantic validation error said: the model
// that rejected its arguments (ModelConfig) and the reason, each from
// whichever finding has it (they come on separate lines).
func configValidation(ev []*cf) (config, reason string) {
	for _, c := range ev {
		if c.f.Details.Text(detail.Family) != "config_validation" {
			continue
		}
		if v := c.f.Details.Text(detail.Config); v != "" && config == "" {
			config = v
		}
		if v := c.f.Details.Text(detail.Reason); v != "" && reason == "" {
			reason = v
		}
	}
	return config, reason
}

// headlineConfigValidation: the run never started; its configuration was
// refused.
func headlineConfigValidation(ev []*cf, short string) string {
	config, reason := configValidation(ev)
	s := "configuration rejected at start-up"
	if config != "" {
		s += ": " + config + " failed validation"
	}
	if reason != "" {
		return s + ": " + lsClip(reason, 160)
	}
	return s + " (" + short + ")"
}

func (s *stepCtx) configValidationSteps() string {
	config, reason := configValidation(s.ev)
	what := "the configuration"
	if config != "" {
		what = config
	}
	out := []string{"Nothing crashed: " + what + " refused the arguments before any GPU work, so no kernel, driver or memory step applies. Fix the setting the reason names, on the command line or in the model's config.json."}
	if strings.Contains(reason, "Expecting value") {
		out = append(out, "`Expecting value: line 1 column 1 (char 0)` is a JSON parse of an empty or non-JSON string: a JSON-valued flag (`--limit-mm-per-prompt`, `--hf-overrides`, `--speculative-config`) lost its quotes in the shell or the container's command line, or a JSON file it reads (config.json, a chat template) is empty.")
	}
	out = append(out, "A field the model's config.json has that the installed framework does not know (a new rope_scaling type, a quantization method) fails the same way: compare the framework's version with the one the model card asks for, and upgrade it or override the field (vLLM: `--hf-overrides`).")
	return strings.Join(out, "\n")
}

// threadDump is the evidence's faulthandler thread dump without a fatal
// error, when the hang rests on one.
func threadDump(ev []*cf) *cf {
	for _, c := range ev {
		if c.f.Details.Text(detail.Signature) == "python-thread-dump" {
			return c
		}
	}
	return nil
}

// ntstatusCrash names the crash a Windows NTSTATUS exit code stands for
// (configs/signatures.yaml's windows-ntstatus-crash), read from the hex code
// or its signed or unsigned decimal spelling; "" when d holds none.
func ntstatusCrash(d evidence.Details) string {
	code := strings.ToLower(d.Text("ntstatus"))
	if code != "" && !strings.HasPrefix(code, "0x") {
		code = "0x" + code // WER's `Exception Code: c0000005`
	}
	if code == "" {
		if n, err := strconv.ParseInt(d.Text(detail.ExitCode), 10, 64); err == nil && d.Text(detail.Signature) == "windows-ntstatus-crash" {
			code = fmt.Sprintf("0x%08x", uint32(n))
		}
	}
	name := map[string]string{
		"0xc0000409": "fail-fast abort: abort(), a failed assert or a /GS stack-cookie check",
		"0xc0000005": "access violation, the SIGSEGV of Windows",
		"0xc000001d": "illegal instruction: a build for a CPU feature this CPU lacks (AVX, AVX2, AVX-512)",
		"0xc0000374": "heap corruption",
		"0xc00000fd": "stack overflow",
	}[code]
	if name == "" {
		return ""
	}
	return "Windows 0x" + strings.ToUpper(code[2:]) + ", " + name
}
