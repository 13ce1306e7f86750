// The verdict table: its rows in priority order, and the questions
// about the facts that their matches ask.

package triage

import (
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// rule is one row of the verdict table. The first rule whose match returns
// evidence decides the verdict.
type rule struct {
	kind       evidence.Kind
	confidence string
	when       string // the condition, for RULES.md
	why        string // why it ranks here, for RULES.md
	explains   []evidence.Kind
	match      func(*facts) []*cf
	// adjust may lower (or raise) the confidence given the evidence.
	adjust func(*facts, []*cf) string
}

var (
	kindsGPUFaults = []evidence.Kind{evidence.GPUPageFault, evidence.GPUIllegalMemoryAccess, evidence.GPUDeviceAssert, evidence.GPUHang}
	kindsFallout   = []evidence.Kind{evidence.CollectiveTimeout, evidence.NativeCrash, evidence.PythonException, evidence.Killed, evidence.Hang, evidence.Unknown}
)

// kindsLoggedOnCleanExit are errors that lower a clean exit's confidence.
var kindsLoggedOnCleanExit = kinds(kindsGPUFaults, []evidence.Kind{evidence.GPUHardwareError, evidence.GPUArchMismatch, evidence.GPUOOM, evidence.HostOOM})

func kinds(groups ...[]evidence.Kind) []evidence.Kind {
	var out []evidence.Kind
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// rules is the verdict priority table (documented in RULES.md, which a test
// keeps equal to rulesMarkdown()). Order is the priority: a root cause ranks
// above everything it can cause, so that the verdict names the cause and not
// the last symptom.
var rules = []rule{
	{
		kind: evidence.CleanExit, confidence: High,
		when: "exit code 0, no signal, no hang detected",
		why:  "the program says it succeeded; findings logged on the way (a recovered OOM, a warning) are listed, not blamed",
		match: func(x *facts) []*cf {
			if x.in.ExitCode != nil && *x.in.ExitCode == 0 && x.signal == "" && !x.in.HangDetected && x.exitCf != nil {
				return []*cf{x.exitCf}
			}
			return nil
		},
		adjust: func(x *facts, _ []*cf) string {
			if len(x.causes(kindsLoggedOnCleanExit...)) > 0 {
				return Medium
			}
			if len(x.causes(evidence.NumericalNonfinite)) > 0 {
				return Low // it ran to the end, but what it computed is suspect
			}
			return High
		},
	},
	{
		kind: evidence.GPUHardwareError, confidence: High,
		when:     "a GPU hardware failure: Xid 48/62/64/74/79/94/95/119/120/154 (119 also as the driver's GSP heartbeat or RPC timeout lines without it), NVLink Xids 144-150 and other catalogued hardware Xids (also when only the Xid 45 they caused names them), fallen off the bus (also the NVIDIA open driver's NV_ERR_GPU_IS_LOST lines without the Xid 79 line: `Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST]`, `Check failed: GPU lost from the bus`, `rpcSendMessage failed with status 0x0000000f`, read as the lost GPU and not as the assert's crash), uncorrectable ECC, amdgpu RAS, an uncorrectable ECC/NVLink error reported to the program (also the old THC text `cuda runtime error (39) : uncorrectable ECC error encountered`), nvidia-smi's `Unable to determine the device handle for GPU ...: Unknown Error` (the GPU is lost), NCCL's NVLink SHARP (NVLS) multicast setup failing (Fabric Manager/NVSwitch)",
		why:      "broken hardware makes kernels fault, hang and time out; no software fix helps until the GPU is reset or replaced",
		explains: kinds(kindsGPUFaults, []evidence.Kind{evidence.GPUOOM, evidence.NumericalNonfinite}, kindsFallout),
		match:    func(x *facts) []*cf { return x.causes(evidence.GPUHardwareError) },
	},
	{
		kind: evidence.HostOOM, confidence: High,
		when:     "the kernel OOM killer or a cgroup oom_kill hit a process of the run, the scheduler reports OUT_OF_MEMORY or Slurm's step counted `oom-kill event(s)` in its cgroup, Kubernetes OOMKilled (also the pod JSON's `\"reason\": \"OOMKilled\"`), Ray's memory monitor killing a worker, a DataLoader worker died of SIGBUS on a full /dev/shm, or the program's own host allocation failed (PyTorch's `DefaultCPUAllocator: can't allocate memory`, TensorFlow's `OOM when allocating ... on CPU`)",
		why:      "a killed worker makes its parent exit, its peers time out in collectives and the server's parent receive sigquit",
		explains: kindsFallout,
		match:    func(x *facts) []*cf { return x.causes(evidence.HostOOM) },
	},
	{
		kind: evidence.GPUDeviceAssert, confidence: High,
		when:     "a kernel's `Assertion ... failed` lines (also an old toolkit's, without the function) or `device-side assert triggered`, cuda-gdb's `CUDA_EXCEPTION_12, Warp Assert`, also when another layer reports it (NCCL's `Last error:`/`NCCL WARN Cuda failure`, the process-group watchdog)",
		why:      "the assert names the failing check; the sticky error it leaves makes every later call, sync and collective fail",
		explains: kinds([]evidence.Kind{evidence.GPUIllegalMemoryAccess, evidence.GPUPageFault, evidence.GPUHang}, kindsFallout),
		match:    func(x *facts) []*cf { return x.causes(evidence.GPUDeviceAssert) },
	},
	{
		kind: evidence.GPUArchMismatch, confidence: High,
		when:     "`no kernel image is available for execution on the device`, `invalid device function`, `hipErrorNoBinaryForGpu`/`Unable to find code object`, `device kernel image is invalid` (`hipErrorInvalidImage`, `CUDA_ERROR_INVALID_IMAGE`; a ROCm build's `CUDA error` that names a hipError code counts as AMD), HSA `INVALID_ISA`/`INVALID_CODE_OBJECT`, PyTorch's `with CUDA capability sm_NN is not compatible`, the toolchain without a target for the GPU (`ptxas fatal : Value 'sm_121a' is not defined for option 'gpu-name'`, LLVM's `PTX version 8.8 does not support target 'sm_107a'`; not when XLA says it fell back to the driver's compiler), rocBLAS/hipBLASLt without a Tensile library for the GPU (`Cannot read .../TensileLibrary_lazy_gfx1030.dat`, `... for GPU arch : gfx1201`; `Cannot read .../TensileLibrary.dat`, which names no ISA, at medium confidence: the library's path is the other reading)",
		why:      "the program was not built for this GPU: the first kernel launch fails, and every error after it (the abort, the exception, the peers' timeouts) follows from that; no change of inputs helps",
		explains: kinds([]evidence.Kind{evidence.GPUIllegalMemoryAccess}, kindsFallout),
		match:    func(x *facts) []*cf { return x.archCauses() },
		adjust: func(_ *facts, ev []*cf) string {
			if tensileNoArch(ev) {
				return Medium // the library's path is the other reading (verdict_tensile.go)
			}
			return High
		},
	},
	{
		kind: evidence.GPUPageFault, confidence: High,
		when:     "an amdgpu VM fault, ROCr `Memory access fault by GPU`, an HSA memory aperture violation/memory fault, NVIDIA Xid 31, other GPUs' MMU faults (Jetson nvgpu's `[MMU FAULT]`, Moore Threads' MMU status `Fault (...)`)",
		why:      "the fault aborts the process (SIGABRT), surfaces as illegal-address errors, and stalls the other ranks; a ring timeout or reset after it is its consequence",
		explains: kinds([]evidence.Kind{evidence.GPUIllegalMemoryAccess, evidence.GPUHang}, kindsFallout),
		match: func(x *facts) []*cf {
			var out []*cf
			for _, c := range x.causes(evidence.GPUPageFault) {
				if !x.afterReset(c) {
					out = append(out, c)
				}
			}
			return out
		},
	},
	{
		kind: evidence.GPUIllegalMemoryAccess, confidence: High,
		when:     "CUDA/HIP illegal address, illegal instruction, misaligned address or launch failure in the output (also through Triton's launcher, TensorRT or a C++ `CUDA Error: ... (700)` check, a glog/absl `Check failed: error == cudaSuccess unspecified launch failure` with or without its `(4 vs. 0)`, and the driver API's names such as `CUDA_ERROR_MISALIGNED_ADDRESS` in a Rust panic or TensorFlow's log), compute-sanitizer's or cuda-memcheck's `Invalid __global__ read` / `Address 0x... is out of bounds`, cuda-gdb's `CUDA_EXCEPTION_14, Warp Illegal Address` and its kin, NVIDIA Xid 13 and other kernel-bug Xids, a cuBLAS/hipBLAS/cuDNN kernel that failed to execute",
		why:      "a kernel bug (Xid 13/31 are the application's) is told apart from hardware (ranked above); its sticky error explains the abort and the collective timeouts that follow",
		explains: kinds([]evidence.Kind{evidence.GPUHang}, kindsFallout),
		match:    func(x *facts) []*cf { return x.causes(evidence.GPUIllegalMemoryAccess) },
		adjust: func(_ *facts, ev []*cf) string {
			for _, c := range ev {
				if c.f.Details.Text(detail.Signature) != "blas-execution-failed" {
					return High
				}
			}
			return Medium // a BLAS failure alone may be bad inputs or an earlier fault
		},
	},
	{
		kind: evidence.GPUOOM, confidence: High,
		when:     "CUDA/HIP out of memory (PyTorch's allocator, also worded `Allocation on device N would exceed allowed memory` or `OutOfMemoryError: Allocation on device` as ComfyUI logs it, cudaErrorMemoryAllocation, NCCL 'out of memory', a KV cache that does not fit, TensorRT-LLM's `Executor creation failed due to insufficient GPU memory`), XLA/JAX/TensorFlow `RESOURCE_EXHAUSTED`/`OOM when allocating`/BFC allocator (also `Failed to allocate request for N GiB` behind a traceback), a Triton kernel out of shared memory (`OutOfResources`), the runtime's `out of memory` behind another layer's check (Caffe's `(2 vs. 0)`, ggml's `cudaMalloc failed:` and `failed to allocate CUDA0 buffer`), old ROCm wordings (MIOpen's `Memory not available to allocate buffer`, TensorFlow's `hipError_t(1002)` and `HIP_ERROR_OutOfMemory`); not one the program retried after (`allocation failed, retrying ...`) with no OOM after the retry",
		why:      "the allocation failure raises in one rank; the others then time out waiting for it",
		explains: kindsFallout,
		match:    func(x *facts) []*cf { return x.causes(evidence.GPUOOM) },
	},
	{
		kind: evidence.GPUHang, confidence: High,
		when:     "an amdgpu ring timeout or GPU reset (also when a page fault on VMID 0 follows it), ROCr `HW Exception ... GPU Hang`, Xid 8/109, a CUDA/HIP launch timeout (`the launch timed out and was terminated`, whoever prints it), Intel i915/xe's hang reports (`GPU HANG: ecode`, `Resetting rcs0 for hang on rcs0`, `stuck on render ring`, `Timedout job`), a device lost as the Vulkan and Level Zero (SYCL) runtimes say it (`VK_ERROR_DEVICE_LOST`, `vk::DeviceLostError`, `ErrorDeviceLost`, `UR_RESULT_ERROR_DEVICE_LOST`, `ZE_RESULT_ERROR_DEVICE_LOST`; over the C++ terminate or the SYCL error's abort that follows)",
		why:      "a GPU reset kills the contexts on it: a segfault, an abort or a collective timeout after it is its consequence; a fault on the driver's own VM (VMID 0) right after the reset is the reset's, not a process's",
		explains: kinds([]evidence.Kind{evidence.GPUPageFault}, kindsFallout),
		match:    func(x *facts) []*cf { return x.causes(evidence.GPUHang) },
		adjust: func(_ *facts, ev []*cf) string {
			for _, c := range ev {
				if c.f.Source == evidence.SourceDmesg {
					return High
				}
			}
			return Medium
		},
	},
	{
		kind: evidence.NumericalNonfinite, confidence: Medium,
		when:     "the kernel-API log shows nan_count/inf_count > 0 (first non-finite tensor), PyTorch reports NaN/Inf, the loss or gradient norm is logged as NaN/Inf, Megatron's NaN check (`found NaN in local grad norm`), or fp16 loss scaling collapsed (`Minimum loss scale reached`, a scale below 1, DeepSpeed still overflowing at scale 1); overflows while the scale settles high are not",
		why:      "NaN/Inf upstream explains a later Python error; it ranks below GPU faults because a fault's garbage is non-finite too",
		explains: []evidence.Kind{evidence.PythonException, evidence.Unknown},
		match:    func(x *facts) []*cf { return x.causes(evidence.NumericalNonfinite) },
	},
	{
		kind: evidence.CollectiveTimeout, confidence: Medium,
		when:     "a NCCL/RCCL watchdog timeout or NCCL error (also a NCCLCHECK macro's `NCCL failure FILE:LINE 'MSG'`, NCCL's result strings such as `remote process exited or there was a network error` and PyTorch's `ncclInternalError: Internal check failed.`, the result string behind another layer that names NCCL (`NCCL failure: unhandled cuda error` before a terminate, Horovod's `ncclCommInitRank failed: unhandled system error`, TensorFlow's `nccl_create.cc:112 : Internal: ...`), an InfiniBand completion error (`with error 12` or `with status=12`) or a socket closed by the peer), Gloo's send/recv timeout (`Timed out waiting 1800000ms for send operation to complete`, also inside a framework's exception), PyTorch's watchdog timeout also in the older wording without `SeqNum`, and nothing above",
		why:      "a collective times out because some rank stopped; on its own it is only the symptom this rank saw",
		explains: []evidence.Kind{evidence.Hang, evidence.NativeCrash, evidence.PythonException, evidence.Killed, evidence.Unknown},
		match:    func(x *facts) []*cf { return x.causes(evidence.CollectiveTimeout) },
	},
	{
		kind: evidence.Hang, confidence: High,
		when:     "kcrash's hang detection fired (no output or no health answer for --hang-timeout), the scheduler reports TIMEOUT (also slurmstepd's `CANCELLED AT T DUE TO TIME LIMIT` line in the log, or PBS's `job killed: walltime N exceeded limit N`, Moab's `job exceeded wallclock limit`, LSF's TERM_RUNLIMIT, Grid Engine's `qmaster enforced h_rt`, at medium confidence: a run can simply need more time), or faulthandler dumped the threads with no fatal error and no current thread (the watchdog's dump), a stack dump (py-spy's, or faulthandler's frames without their header) stuck in a torch.distributed collective or wait, vLLM's API server still `Waiting for N local engine core proc(s) to start` three times with nothing after, vLLM V0's `Waiting for output from MQLLMEngine` for a minute (six times) with nothing after, vLLM's stats with running requests and zero prompt and generation throughput for their last three intervals or more (one such interval, or `Running: 0 reqs`, is not), a py-spy dump whose idle main thread waits in threading's `wait`/`join`/`acquire`, concurrent.futures' `result` or queue's `get`, SGLang's scheduler watchdog (`Watchdog timeout (self.watchdog_timeout=300)`), SGLang's failed health check (`Health check failed. Server couldn't get a response from detokenizer for last 20 seconds`) when no crash, exception or kill is shown, and no crash",
		why:      "the hang is why kcrash or the scheduler stopped the run",
		explains: []evidence.Kind{evidence.Killed, evidence.PythonException, evidence.Unknown},
		match: func(x *facts) []*cf {
			var out []*cf
			crashed := len(x.causes(evidence.NativeCrash)) > 0
			for _, c := range x.causes(evidence.Hang) {
				// A thread dump printed next to a crash is the crash's report.
				if !(crashed && stackDumpSig(c.f.Details.Text(detail.Signature))) && x.engineWaitStalled(c) {
					out = append(out, c)
				}
			}
			return out
		},
		adjust: func(x *facts, ev []*cf) string {
			for _, c := range ev {
				if sig := c.f.Details.Text(detail.Signature); !timeLimitSig(sig) && sig != sglangHealthSig {
					return High
				}
			}
			return Medium // a time limit or a failed health check alone: a hang, or a run that needed longer or a server under load
		},
	},
	{
		kind: evidence.NativeCrash, confidence: High,
		when:     "exit by SIGSEGV/SIGABRT/SIGBUS/SIGFPE/SIGILL (also torchrun's `exitcode: -6`/`-11` for a worker, torch.multiprocessing's `process N terminated with signal SIGSEGV`, a launcher's report: DeepSpeed's `exits with return code = -11`, Python's `died with <Signals.SIGSEGV: 11>`, mpirun's `exited on signal 11 (Segmentation fault)`, Text Generation Inference's `Shard process was signaled to shutdown with signal 7`), Open MPI's `Signal: Segmentation fault (11)`, bash's `Aborted (core dumped)` with its padding or as `FILE: line N: PID Segmentation fault`, a Windows NTSTATUS exit code (`exit status 0xc0000409`, `0xC0000005`; also `Exception Code: c0000005`, `[Exited, code -1073741819 (0xC0000005)]`, `process crashed with code 3221225477`), faulthandler's `Windows fatal exception: access violation` (or stack overflow, page error, int divide by zero), a faulthandler dump (also glued to a progress bar, or without its header when a thread is the `Current thread`), a glog/absl/UCX signal report, gdb's `Program received signal SIGSEGV`, a kernel segfault/GPF/trap line, PyTorch's `Segfault encountered` banner, ggml's `GGML_ASSERT(...) failed` abort (also without its file:line, and ollama's relay `llama runner process has terminated: GGML_ASSERT(...) failed`) and its other aborts (GGML_ABORT's `.../ggml/src/FILE:LINE: MESSAGE` line, `ggml-impl.h:319: fatal error`), the Go runtime's `SIGSEGV: segmentation violation` report (ollama's runner in cgo), a shell's bare `Illegal instruction` line or zsh's `segmentation fault`/`illegal hardware instruction` report, a container's crash-signal exit (docker's `\"ExitCode\": 139`, 134, 135, 136, 132), an uncaught C++ exception (also `terminate called without an active exception`); no GPU evidence",
		why:      "the signal is how the process died; with no GPU evidence it is the program's (or a library's) own bug",
		explains: []evidence.Kind{evidence.PythonException, evidence.Killed, evidence.Unknown},
		match:    func(x *facts) []*cf { return x.causes(evidence.NativeCrash) },
		adjust: func(x *facts, _ []*cf) string {
			if crashSignal(x.signal) {
				return High
			}
			return Medium // only the output says so; the exit status is unknown or disagrees
		},
	},
	{
		kind: evidence.PythonException, confidence: High,
		when:     "a complete Python traceback (the last one is taken), else a lone `SomethingError: message` line when there is no traceback and no kill report, a CUDA/HIP graph capture misuse (`operation not permitted when stream is capturing`, `hipErrorStreamCapture*`, `hipErrorCapturedEvent`), a PyTorch `INTERNAL ASSERT FAILED at ... please report a bug to PyTorch` line (also under an MPI rank prefix), IPython's header `ValueError   Traceback (most recent call last)`, ComfyUI's `!!! Exception during processing !!! MESSAGE` when no rule knows the message, and nothing above",
		why:      "an uncaught exception ended the program",
		explains: []evidence.Kind{evidence.Unknown, evidence.Killed},
		match: func(x *facts) []*cf {
			ev := x.pythonExceptionCauses()
			if len(ev) > 1 {
				// The last exception is the one that ended the program; earlier
				// ones were caught or belong to failed requests.
				ev[0], ev[len(ev)-1] = ev[len(ev)-1], ev[0]
			}
			return ev
		},
		adjust: func(x *facts, _ []*cf) string {
			if x.in.ExitCode != nil && *x.in.ExitCode != 0 && x.signal == "" {
				return High
			}
			return Medium
		},
	},
	{
		kind: evidence.Killed, confidence: Medium,
		when:     "exit by SIGKILL/SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGPIPE (or 128+N), torchrun's agent receiving a death signal, torchrun reporting a worker's negative exit code for one (`exitcode: -9`), torch.multiprocessing's `process N terminated with signal SIGKILL`, a launcher's report (DeepSpeed's `exits with return code = -9`, Python's `died with <Signals.SIGKILL: 9>`, mpirun's `exited on signal 9 (Killed)`, TGI's `signaled to shutdown with signal 9`, bash's `line N: PID Killed`), a DataLoader worker `killed by signal: Killed` (or `Terminated`) with no OOM-killer line, Go's `signal: terminated` (ollama's runner), Kubernetes' `Exit Code: 137` (or the pod JSON's `\"exitCode\": 137`) or docker's `\"ExitCode\": 137` and `exited with code 137` without OOMKilled true, slurmstepd's `CANCELLED AT T` (scancel, preemption, a node failure), a traceback of a signal turned into an exception (`KeyboardInterrupt`, an exception raised in a signal handler, a traceback whose header follows a terminal's `^C` echo, whole or cut); with no evidence of a cause, and no framework saying a child failed (but torchrun's ChildFailedError for the worker it reports killed)",
		why:      "something outside the program stopped it: a user, the scheduler's limit, a supervisor",
		explains: []evidence.Kind{evidence.Unknown},
		match: func(x *facts) []*cf {
			for _, c := range x.symptomsOf(evidence.Unknown) {
				if c != x.exitCf && !x.childFailedByKill(c) {
					return nil // SGLang kills its own tree after a child's sigquit
				}
			}
			return x.causes(evidence.Killed)
		},
	},
	{
		kind: evidence.GPUHardwareError, confidence: Low,
		when:  "only informational hardware findings (Xid 63 row remapping, an uncatalogued Xid, corrected ECC)",
		why:   "worth a look, but not known to crash a program, so it explains nothing else",
		match: func(x *facts) []*cf { return x.weak(evidence.GPUHardwareError) },
	},
	{
		kind: evidence.PythonException, confidence: Low,
		when:     "a Python traceback that is its stream's last words without its exception line (nothing but frames after its header, or the header alone, to the end; also behind a prefix such as `host:` or `worker-5: [rank22]:`): most likely an uncaught exception whose message was cut",
		why:      "Python prints the exception line last; a log that stops inside the traceback lost it",
		explains: []evidence.Kind{evidence.Unknown},
		match:    func(x *facts) []*cf { return x.cutTracebacks() },
	},
	{
		kind: evidence.NativeCrash, confidence: Low,
		when:     "native stack frames that are their stream's last words without the line that says what crashed (three or more in a row of one format: glibc's `lib.so(func+0x1c)[0x7f…]`, gdb's `#5  0x… in f () from lib.so`, UCX's `17 0x… f()  file:0`; blank lines between them allowed): not when the innermost named frame waits (futex, poll, cond_wait: a debugger attached to a live process); also a Go runtime dump (goroutine frames with their `file.go:N +0x…` lines, `goroutine N [state]:`, `created by`, the register dump) that ends its stream without its `panic:`/`fatal error:`/`SIGSEGV:` header; also Python faulthandler's frames (`File \"...\", line N in f`, three or more) that end their stream with no header at all (no `Fatal Python error`, no thread's header, no timer's `Timeout (H:MM:SS)!` anywhere in the stream) and whose first frame is no idle wait of the standard library (threading's `wait`, queue's `get`, selectors' `select`)",
		why:      "a crash handler prints the frames after its signal or abort line, and the Go runtime prints all stacks only when the program dies (a panic, a fatal error, a signal; SIGQUIT's dump exits too); faulthandler prints frames unasked only for a fatal signal (its timer's and a registered signal's dumps carry their headers); a log that ends on them lost that line, and nothing ran after them",
		explains: []evidence.Kind{evidence.Unknown},
		match:    func(x *facts) []*cf { return x.cutNativeOrGoDump() },
	},
	{
		kind: evidence.Hang, confidence: Low,
		when:     "a debugger's stacks of a live process (gdb's `bt`, `thread apply all bt`, with its thread headers and `(gdb)` prompt) that end the log, every thread's innermost frame a wait (`sched_yield`, futex or `__lll_lock_wait`, `pthread_cond_wait`/`timedwait`, `poll`, `epoll_wait`, `nanosleep`, `select`, a blocking `read`/`recv`) and no frame of a crash (abort, raise, a signal handler, a backtrace printer)",
		why:      "nobody attaches a debugger to a run that is going well; the stacks show where it is stuck, and nothing ran after them",
		explains: []evidence.Kind{evidence.Unknown},
		match:    func(x *facts) []*cf { return x.liveStacksWaiting() },
	},
	{
		kind: evidence.Unknown, confidence: Low,
		when: "nothing above; then the generic fallback (triage/verdict_fallback.go) reads the log's generic failure wording (a signal, `Killed`, an exit status 128+N, `out of memory`, `Segmentation fault`, `timed out`...) into a kind with low confidence, its summary quoting the line",
		why:  "the summary lists what was checked, or says the verdict rests on generic wording only",
		match: func(x *facts) []*cf {
			if x.exitCf != nil {
				return []*cf{x.exitCf}
			}
			return []*cf{}
		},
	},
}

// causes returns the non-hidden findings of the given kinds that can stand as a cause.
func (x *facts) causes(ks ...evidence.Kind) []*cf { return x.weighing(wCause, ks) }

// afterReset says whether a page fault is on the driver's own VM (VMID 0,
// no process) and comes after a ring timeout or GPU reset: the reset's
// fallout (the rings restarted with stale addresses), not a program's bad
// access.
func (x *facts) afterReset(c *cf) bool {
	if v, ok := c.f.Details.Int(detail.VMID); !ok || v != 0 || c.f.Pid != 0 {
		return false
	}
	for _, h := range x.causes(evidence.GPUHang) {
		switch {
		case h.f.Time != nil && c.f.Time != nil:
			if !c.f.Time.Before(*h.f.Time) {
				return true
			}
		case h.f.File == c.f.File && h.f.Line > 0 && c.f.Line > 0:
			if h.f.Line < c.f.Line {
				return true
			}
		case h.order < c.order:
			return true
		}
	}
	return false
}

// weak returns the non-hidden findings of the given kinds logged as information.
func (x *facts) weak(ks ...evidence.Kind) []*cf { return x.weighing(wInfo, ks) }

// symptomsOf returns the non-hidden findings of the given kinds that are only symptoms.
func (x *facts) symptomsOf(ks ...evidence.Kind) []*cf { return x.weighing(wSymptom, ks) }

// weighing returns the non-hidden findings of kinds ks that weigh w.
func (x *facts) weighing(w weight, ks []evidence.Kind) []*cf {
	var out []*cf
	for _, c := range x.all {
		if !c.hidden && c.w == w && hasKind(ks, c.kind) {
			out = append(out, c)
		}
	}
	return out
}

func hasKind(ks []evidence.Kind, k evidence.Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
