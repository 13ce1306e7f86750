package triage

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/kernelapi"
	"github.com/kcrash/kcrash/kernlog"
)

// Input is everything triage can know about a run. Exit fields may be
// unknown (nil ExitCode, empty Signal), for `kcrash collect` and offline triage.
type Input struct {
	ExitCode   *int
	Signal     string // "SIGSEGV"...; "" when none
	CoreDumped bool
	// Findings from the log scan, the kernel-log parsers, cgroup, scheduler and
	// smi collectors. Those with Attribution "unrelated" are listed but never
	// used for the verdict.
	Findings     []evidence.Finding
	KernelAPI    *kernelapi.Report
	HangDetected bool // kcrash's own hang detection fired
	// HangTrigger says what fired it ("no output for 5s", "no health
	// answer from URL for 30s"); "" when not known.
	HangTrigger string
	Checked     []string // the sources looked at, for the "unknown" verdict's text
	// Command is the child's argv, used in the next steps' command lines; when
	// empty they say CMD, which Summary replaces with SummaryMeta.Command.
	Command []string
	// Run is how kcrash ran the child, nil when it did not start it (attach,
	// collect, offline triage): next steps never suggest this same run again.
	Run *RunSetup
	// HostVendor is the GPU vendor the host shows ("amd", "nvidia"; "" when
	// unknown or both): consulted when the evidence's own wording does not say.
	HostVendor string
	// GPUArch is the GPU's architecture as the host's smi tools report it
	// ("gfx942", "sm_90"); "" when unknown. An arch named by the evidence wins.
	GPUArch string
	// GPUModels are the GPUs' product names smi reported ("NVIDIA GeForce
	// RTX 4090", "AMD Instinct MI300X"): a consumer part gets no ECC or
	// row-remapping steps.
	GPUModels []string
	// Env is the child's environment (K=V), when kcrash started or attached
	// to it: the kernel backends it chose are read from it.
	Env []string
	// Unseen are the sources that could not be read (kernel messages
	// without the agent or CAP_SYSLOG): the summary says so, and their fix
	// ends the next steps.
	Unseen []evidence.Unseen
}

// RunSetup is what kcrash itself did to the run.
type RunSetup struct {
	Profiles []string // the profiles applied, e.g. ["sglang", "coredump"]
	Level    int      // the kernel-API log level
	// CoreLimitZero: the child started with a core file size limit of 0
	// (`ulimit -c 0`), so the kernel wrote no core file whatever the profile.
	CoreLimitZero bool
	// Pids are live Python processes of the run (for a hang: whose stacks to dump).
	Pids []int
	// PyStacksHook: the child had kcrash's Python-stacks hook (a profile with
	// python_stacks); PyStacks is how many processes' Python stacks the bundle
	// holds in raw/pystacks.txt.
	PyStacksHook bool
	PyStacks     int
	// HangStops: the hung processes are stopped right after their bundle
	// (--hang-action stop, or the scheduler's kill): no step may ask to
	// look at them live.
	HangStops bool
}

// Verdict is the one root cause triage settles on.
type Verdict struct {
	Kind       evidence.Kind `json:"kind"`
	Confidence string        `json:"confidence"` // high, medium, low
	Summary    string        `json:"summary"`
}

// Result is SPEC §5's triage object.
type Result struct {
	Verdict   Verdict            `json:"verdict"`
	Findings  []evidence.Finding `json:"findings"`
	KernelAPI *kernelapi.Report  `json:"kernel_api"`
	NextSteps []string           `json:"next_steps"`
	Unseen    []evidence.Unseen  `json:"unseen,omitempty"`
	// Backend is what chose the run's kernels (SGLANG_USE_AITER,
	// --attention-backend...), from its environment and command line.
	Backend []BackendSetting `json:"backend,omitempty"`
}

// Each finding of a Result carries details.verdict_role, one of these.
const (
	RoleRootCause = "root_cause" // the evidence the verdict rests on
	RoleExplained = "explained"  // a symptom the root cause accounts for
	RoleSuspect   = "suspect"    // the kernel-API call the fault is pinned on
	RoleAlsoFound = "also_found" // real evidence the verdict does not account for
	RoleIgnored   = "ignored"    // attributed to something other than this run
)

// Confidence levels.
const (
	High   = "high"
	Medium = "medium"
	Low    = "low"
)

// weight says what a finding can stand for on its own.
type weight int

const (
	wCause   weight = iota // can be a root cause
	wSymptom               // only reports another failure (sigquit, Xid 43/45)
	wInfo                  // not a failure by itself (Xid 63 row remap, an unknown Xid)
	wPartial               // cut short (a traceback without its exception line)
)

// cf is a finding as the rules see it.
type cf struct {
	f       evidence.Finding
	kind    evidence.Kind // effective kind (from the Xid catalog when the finding has an Xid)
	w       weight
	role    string
	order   int
	synth   bool // made by Decide (exit status, hang, kernel-API)
	hidden  bool // Attribution "unrelated"
	evIndex int  // place among the root-cause evidence, the primary first
}

type facts struct {
	in      Input
	all     []*cf
	signal  string // exit signal, or the one an exit code above 128 implies
	implied bool   // signal came from the exit code
	exitCf  *cf
	vendor  string        // "amd", "nvidia" or ""
	verdict evidence.Kind // the rule's kind, once Decide matched it
	generic []*cf         // the generic fallback's cues, which no rule sees
	backend []BackendSetting
}

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
func (x *facts) causes(ks ...evidence.Kind) []*cf {
	var out []*cf
	for _, c := range x.all {
		if !c.hidden && c.w == wCause && hasKind(ks, c.kind) {
			out = append(out, c)
		}
	}
	return out
}

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

func (x *facts) weak(ks ...evidence.Kind) []*cf {
	var out []*cf
	for _, c := range x.all {
		if !c.hidden && c.w == wInfo && hasKind(ks, c.kind) {
			out = append(out, c)
		}
	}
	return out
}

func (x *facts) symptomsOf(ks ...evidence.Kind) []*cf {
	var out []*cf
	for _, c := range x.all {
		if !c.hidden && c.w == wSymptom && hasKind(ks, c.kind) {
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

// Decide turns everything known about a run into one verdict, by the rules table.
func Decide(in Input) Result {
	x := newFacts(in)
	var (
		r  rule
		ev []*cf
	)
	for _, r = range rules {
		if ev = r.match(x); ev != nil {
			break
		}
	}
	generic := false
	if r.kind == evidence.Unknown && genericFallback {
		if g, gev := x.genericReading(); gev != nil {
			r, ev, generic = g, gev, true // verdict_fallback.go: only when every rule says unknown
		}
	}
	ev = primaryFirst(r.kind, ev)
	x.verdict = r.kind
	x.in.KernelAPI = x.in.KernelAPI.ForPid(x.crashedPid(ev))
	conf := r.confidence
	if r.adjust != nil {
		conf = r.adjust(x, ev)
	}
	for i, c := range ev {
		c.role = RoleRootCause
		c.evIndex = i
	}
	for _, c := range x.all {
		switch {
		case c.role != "":
		case c.hidden:
			c.role = RoleIgnored
		case c.f.Source == evidence.SourceSoftware:
			c.role = RoleAlsoFound // a build problem is a lead for the next steps, never a symptom
		case hasKind(r.explains, c.kind) || (c.w == wSymptom && r.kind != evidence.CleanExit && r.kind != evidence.Unknown):
			c.role = RoleExplained
		default:
			c.role = RoleAlsoFound
		}
	}
	suspect := x.suspectFinding(r.kind)
	res := Result{
		Verdict:   Verdict{Kind: r.kind, Confidence: conf},
		KernelAPI: x.in.KernelAPI,
	}
	if generic {
		res.Verdict.Summary = genericSummary(r.kind, ev[0])
	} else {
		res.Verdict.Summary = x.summary(r.kind, ev, suspect)
	}
	res.Findings = x.ordered(suspect)
	res.NextSteps = nextSteps(x, r.kind, ev)
	if res.NextSteps == nil {
		res.NextSteps = []string{}
	}
	res.Unseen = in.Unseen
	res.Backend = x.backend
	for _, u := range in.Unseen {
		if u.Fix != "" && r.kind != evidence.CleanExit && !slices.Contains(res.NextSteps, u.Fix) {
			res.NextSteps = append(res.NextSteps, u.Fix)
		}
	}
	return res
}

// primaryFirst moves the most telling piece of evidence to the front, the one
// the summary line is written from: for a fault, one that names an address
// and a process.
func primaryFirst(k evidence.Kind, ev []*cf) []*cf {
	if len(ev) < 2 || k == evidence.PythonException {
		return ev
	}
	score := func(c *cf) int {
		n := 0
		if c.f.Address != "" {
			n += 4
		}
		if c.f.Pid != 0 {
			n += 2
		}
		if c.f.Xid != 0 || c.f.Details.Text(detail.AssertFile) != "" || c.f.Details.Text(detail.Requested) != "" || c.f.Details.Text(detail.Collective) != "" {
			n += 4
		}
		return n
	}
	out := append([]*cf(nil), ev...)
	sort.SliceStable(out, func(i, j int) bool { return score(out[i]) > score(out[j]) })
	return out
}

func newFacts(in Input) *facts {
	x := &facts{in: in, signal: normSignal(in.Signal), backend: Backends(in.Env, in.Command)}
	if x.signal == "" && in.ExitCode != nil && *in.ExitCode > 128 && *in.ExitCode < 128+32 {
		// A shell or container runtime reports a signal death as 128+N.
		x.signal, x.implied = signalByNumber(*in.ExitCode-128), true
	}
	seen := map[string]*cf{}
	for i, f := range in.Findings {
		f.Details = copyDetails(f.Details)
		if isGenericCue(f) {
			if f.Source == evidence.SourceLog {
				x.generic = append(x.generic, &cf{f: f, kind: f.Kind, w: wSymptom, order: i})
			}
			continue
		}
		// The same line found by two parsers (a program log scanned by both the
		// log scanner and the ROCr-aware kernel parser) is one piece of evidence.
		key := ""
		if f.File != "" && f.Line > 0 {
			key = fmt.Sprintf("%s|%s|%d|%s", f.Source, f.File, f.Line, f.Kind)
			if c := seen[key]; c != nil {
				for k, v := range f.Details {
					lsSetDetailAny(&c.f, k, v)
				}
				continue
			}
		}
		c := classify(f)
		c.order = i
		x.all = append(x.all, c)
		if key != "" {
			seen[key] = c
		}
	}
	x.promoteNamedCauses()
	x.readHSAToolInit()
	x.markRecoveredOOM()
	x.addExit()
	x.addHang()
	x.addKernelAPI()
	x.vendor = x.guessVendor()
	return x
}

// promoteNamedCauses reads a consequence Xid that names its cause ("Xid 45
// ... caused by previous Xid 149") as evidence of that cause when the cause's
// own line is missing (a filtered log, a paste of the last lines): the
// NVLink failure, not the channel teardown, is what the verdict must name.
func (x *facts) promoteNamedCauses() {
	present := map[int]bool{}
	for _, c := range x.all {
		if c.f.Xid != 0 {
			present[c.f.Xid] = true
		}
	}
	for _, c := range x.all {
		n, ok := c.f.Details.Int(detail.CausedByXid)
		if !ok || c.w != wSymptom || present[int(n)] {
			continue
		}
		info, known := kernlog.XidInfo(int(n))
		if !known || info.Role != kernlog.RoleCause || info.Kind == "" {
			continue
		}
		c.kind, c.w, c.f.Kind = info.Kind, wCause, info.Kind
		c.f.Details.SetText(detail.NamedCause, fmt.Sprintf("Xid %d (%s)", n, human.OrDash(info.Description)))
	}
}

func copyDetails(d map[string]any) map[string]any {
	out := make(map[string]any, len(d)+1)
	for k, v := range d {
		out[k] = v
	}
	return out
}

// classify finds a finding's effective kind and weight. Xid findings are read
// through the catalog's role when the parser did not already set one.
func classify(f evidence.Finding) *cf {
	c := &cf{f: f, kind: f.Kind, w: wCause, hidden: f.Attribution == "unrelated"}
	role := f.Details.Text(detail.Role)
	if f.Xid != 0 && role == "" {
		if info, ok := kernlog.XidInfo(f.Xid); ok {
			role = info.Role
			if info.Kind != "" && (c.kind == "" || c.kind == evidence.Unknown) {
				c.kind = info.Kind
			}
		} else {
			role = kernlog.RoleUnknown
		}
	}
	switch role {
	case kernlog.RoleConsequence:
		c.w = wSymptom
	case kernlog.RoleInfo, kernlog.RoleUnknown:
		c.w = wInfo
	}
	if f.Details.Bool(detail.Symptom) {
		c.w = wSymptom
	}
	if f.Details.Bool(detail.Truncated) {
		c.w = wPartial
	}
	if c.kind == evidence.Unknown && c.w == wCause {
		c.w = wSymptom // a failure marker with no category cannot be a cause
	}
	return c
}

// exitKind classifies the exit status alone.
func (x *facts) exitKind() (evidence.Kind, string) {
	core := ""
	if x.in.CoreDumped {
		core = " (core dumped)"
	}
	implied := ""
	if x.implied {
		implied = fmt.Sprintf(" (exit code %d)", *x.in.ExitCode)
	}
	switch {
	case x.signal != "" && crashSignal(x.signal):
		return evidence.NativeCrash, "killed by " + x.signal + core + implied
	case x.signal != "":
		return evidence.Killed, "killed by " + x.signal + core + implied
	case x.in.ExitCode == nil:
		return "", ""
	case *x.in.ExitCode == 0:
		return evidence.CleanExit, "exited with code 0"
	}
	return evidence.Unknown, fmt.Sprintf("exited with code %d", *x.in.ExitCode)
}

func (x *facts) addExit() {
	k, text := x.exitKind()
	if k == "" {
		return
	}
	f := evidence.Finding{Kind: k, Source: evidence.SourceExit, Text: text, Details: map[string]any{}}
	if x.in.ExitCode != nil {
		f.Details["code"] = *x.in.ExitCode
	}
	if x.signal != "" {
		f.Details.SetText(detail.Signal, x.signal)
	}
	if x.in.CoreDumped {
		f.Details["core_dumped"] = true
	}
	c := &cf{f: f, kind: k, w: wCause, synth: true, order: len(x.all)}
	if k == evidence.Unknown {
		c.w = wSymptom
	}
	x.exitCf = c
	x.all = append(x.all, c)
}

func (x *facts) addHang() {
	if !x.in.HangDetected {
		return
	}
	text := "kcrash's hang detection fired: no output (or no health answer) for --hang-timeout"
	if x.in.HangTrigger != "" {
		text = "kcrash's hang detection fired: " + x.in.HangTrigger
	}
	f := evidence.Finding{Kind: evidence.Hang, Source: evidence.SourceExit, Text: text, Details: map[string]any{}}
	x.all = append(x.all, &cf{f: f, kind: evidence.Hang, w: wCause, synth: true, order: len(x.all)})
}

// addKernelAPI turns the kernel-API analysis into findings: the first
// non-finite tensor (a cause of its own) and the exceptions the wrapper
// logged, classified with the log signatures so that a CUDA error raised
// inside a wrapped call counts like the same line in the output.
func (x *facts) addKernelAPI() {
	ka := x.in.KernelAPI
	if ka == nil {
		return
	}
	if nf := ka.FirstNonfinite; nf != nil && !x.hasKernelAPIFinding(evidence.NumericalNonfinite) {
		f := evidence.Finding{Kind: evidence.NumericalNonfinite, Source: evidence.SourceKernelAPI,
			File: nf.Call.File, Line: nf.Call.Line, Time: nf.Call.Time, Pid: nf.Call.Pid,
			Text: fmt.Sprintf("%s %s: nan_count=%d inf_count=%d", nf.Call.API, nf.Arg.Name, nf.Arg.NanCount, nf.Arg.InfCount),
			Details: map[string]any{"api": nf.Call.API, "arg": nf.Arg.Name, "nan_count": nf.Arg.NanCount,
				"inf_count": nf.Arg.InfCount, "shape": nf.Arg.Shape, "dtype": nf.Arg.Dtype}}
		x.all = append(x.all, &cf{f: f, kind: f.Kind, w: wCause, synth: true, order: len(x.all)})
	}
	for i, e := range ka.Exceptions {
		if i >= 4 {
			break
		}
		first, _, _ := strings.Cut(e.Text, "\n")
		kind, det := evidence.PythonException, map[string]any{}
		if fs, _ := ScanLog(strings.NewReader(first), e.File); len(fs) > 0 {
			kind, det = fs[0].Kind, fs[0].Details
		}
		det["api"] = e.API
		if e.Type != "" {
			det["exception"] = e.Type
		}
		f := evidence.Finding{Kind: kind, Source: evidence.SourceKernelAPI, File: e.File, Line: e.Line,
			Time: e.Time, Pid: e.Pid, Text: fmt.Sprintf("%s raised %s", e.API, lsClip(first, 300)), Details: det}
		c := classify(f)
		c.synth, c.order = true, len(x.all)
		x.all = append(x.all, c)
	}
}

func (x *facts) hasKernelAPIFinding(k evidence.Kind) bool {
	for _, c := range x.all {
		if c.f.Source == evidence.SourceKernelAPI && c.kind == k {
			return true
		}
	}
	return false
}

func gpuVerdict(k evidence.Kind) bool {
	return hasKind(kindsGPUFaults, k) || k == evidence.GPUHardwareError || k == evidence.GPUArchMismatch || k == evidence.GPUOOM || k == evidence.NumericalNonfinite
}

// ordered lists the findings for the Result: root cause first, then the
// suspect call, what is explained, what else was found, and last what was
// ignored; within a group, in input order.
func (x *facts) ordered(suspect *cf) []evidence.Finding {
	rank := map[string]int{RoleRootCause: 0, RoleSuspect: 1, RoleExplained: 2, RoleAlsoFound: 3, RoleIgnored: 4}
	list := append([]*cf(nil), x.all...)
	if suspect != nil {
		list = append(list, suspect)
	}
	sort.SliceStable(list, func(i, j int) bool {
		if ri, rj := rank[list[i].role], rank[list[j].role]; ri != rj {
			return ri < rj
		}
		return list[i].role == RoleRootCause && list[i].evIndex < list[j].evIndex
	})
	out := make([]evidence.Finding, 0, len(list))
	for _, c := range list {
		f := c.f
		if f.Details == nil {
			f.Details = map[string]any{}
		}
		f.Details.SetText(detail.VerdictRole, c.role)
		if c.kind != f.Kind && f.Kind == "" {
			f.Kind = c.kind
		}
		out = append(out, f)
	}
	return out
}

func (x *facts) guessVendor() string {
	amd, nv := 0, 0
	for _, c := range x.all {
		f := c.f
		switch f.Details.Text(detail.Vendor) {
		case "amd":
			amd++
		case "nvidia":
			nv++
		}
		if f.Xid != 0 {
			nv++
		}
		t := f.Text
		if strings.Contains(t, "hipError") {
			// A ROCm build of PyTorch may word its errors "CUDA error", but
			// the code it names is the HIP runtime's.
			amd++
			continue
		}
		switch f.Details.Text(detail.Runtime) {
		case "HIP", "Hip":
			amd++
		case "CUDA", "Cuda":
			nv++
		}
		if strings.Contains(t, "amdgpu") || strings.Contains(t, "HIP error") || strings.Contains(t, "HIP out of memory") || strings.Contains(t, "hipError") ||
			strings.Contains(t, "HSA_STATUS") || strings.Contains(t, "/rccl/") || strings.Contains(t, "hipblas") || strings.Contains(t, "HIPBLAS") {
			amd++
		}
		// PyTorch on ROCm keeps "torch.cuda" names but says "HIP" in its
		// messages, so only the runtime's own wording counts for NVIDIA.
		if strings.Contains(t, "NVRM") || strings.Contains(t, "CUBLAS_") || strings.Contains(t, "cudaError") || strings.Contains(t, "CUDA error") || strings.Contains(t, "CUDA_ERROR_") ||
			strings.Contains(t, "CUDA out of memory") || strings.Contains(t, "CUDA Error") || strings.Contains(t, "Triton Error [CUDA]") {
			nv++
		}
	}
	switch {
	case amd > nv:
		return "amd"
	case nv > amd:
		return "nvidia"
	}
	if x.in.HostVendor != "" {
		return x.in.HostVendor
	}
	if v := modelsVendor(x.in.GPUModels); v != "" {
		return v
	}
	return x.loggedVendor()
}

// ---- signals --------------------------------------------------------------------------

var signalNames = []string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
	8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
	24: "SIGXCPU", 25: "SIGXFSZ", 31: "SIGSYS"}

func signalByNumber(n int) string {
	if n > 0 && n < len(signalNames) && signalNames[n] != "" {
		return signalNames[n]
	}
	return "signal " + strconv.Itoa(n)
}

func normSignal(s string) string {
	s = strings.TrimSpace(strings.ToUpper(s))
	if s == "" {
		return ""
	}
	if n, err := strconv.Atoi(s); err == nil {
		return signalByNumber(n)
	}
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	return s
}

// crashSignal: the process crashed by itself, as opposed to being stopped.
func crashSignal(s string) bool {
	switch s {
	case "SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS", "SIGXCPU", "SIGXFSZ":
		return true
	}
	return false
}

// ---- text ------------------------------------------------------------------------------

func argsText(args []kernelapi.Arg, max int) []string {
	var out []string
	for i, a := range args {
		if i >= max {
			out = append(out, fmt.Sprintf("… %d more", len(args)-max))
			break
		}
		out = append(out, argText(a))
	}
	return out
}

func argText(a kernelapi.Arg) string {
	var parts []string
	if a.Shape != "" {
		parts = append(parts, "shape="+a.Shape)
	}
	if a.Dtype != "" {
		parts = append(parts, "dtype="+a.Dtype)
	}
	if a.Device != "" {
		parts = append(parts, "device="+a.Device)
	}
	if a.Value != "" && a.Shape == "" {
		parts = append(parts, lsClip(a.Value, 60))
	}
	if a.NanCount > 0 || a.InfCount > 0 {
		parts = append(parts, fmt.Sprintf("nan_count=%d inf_count=%d", a.NanCount, a.InfCount))
	}
	t := a.Type
	if t == "" {
		t = "value"
	}
	return fmt.Sprintf("%s=%s(%s)", a.Name, t, strings.Join(parts, ", "))
}

// summary writes the verdict's one line: what happened, where, and what it explains.
func (x *facts) summary(k evidence.Kind, ev []*cf, suspect *cf) string {
	var p *cf
	if len(ev) > 0 {
		p = ev[0]
	}
	s := x.headline(k, p, ev)
	if suspect != nil && gpuVerdict(k) {
		call, unfinished := x.suspect()
		switch {
		case unfinished:
			s += fmt.Sprintf("; the kernel-API call %s (%s:%d) started and never returned", call.API, path.Base(call.File), call.Line)
		default:
			s += fmt.Sprintf("; the last kernel-API call logged was %s (%s:%d)", call.API, path.Base(call.File), call.Line)
		}
	}
	if ex := x.explainedText(); ex != "" && k != evidence.CleanExit && k != evidence.Unknown {
		s += "; it explains " + ex
	}
	return s
}

func (x *facts) headline(k evidence.Kind, p *cf, ev []*cf) string {
	var d evidence.Details
	text := ""
	if p != nil {
		d, text = p.f.Details, p.f.Text
	}
	short := lsClip(strings.TrimSpace(text), 160)
	switch k {
	case evidence.CleanExit:
		return x.headlineCleanExit()
	case evidence.GPUHardwareError:
		return headlineHardware(p, d, short)
	case evidence.HostOOM:
		return headlineHostOOM(p, d, short)
	case evidence.GPUDeviceAssert:
		return x.headlineDeviceAssert(ev, d, short)
	case evidence.GPUArchMismatch:
		return x.headlineArchMismatch(ev, d, short)
	case evidence.GPUPageFault:
		return headlinePageFault(p, ev)
	case evidence.GPUIllegalMemoryAccess:
		return headlineIllegalAccess(p, d, short)
	case evidence.GPUOOM:
		return headlineGPUOOM(p, d, short)
	case evidence.GPUHang:
		return headlineGPUHang(d, short)
	case evidence.NumericalNonfinite:
		if api := d.Text(detail.API); api != "" {
			return fmt.Sprintf("non-finite values: %s of %s has nan_count=%s inf_count=%s", d.Text(detail.Arg), api, d.Text(detail.NanCount), d.Text(detail.InfCount))
		}
		return "non-finite values: " + short
	case evidence.CollectiveTimeout:
		return headlineCollective(ev, d, short)
	case evidence.Hang:
		if c := threadDump(ev); c != nil {
			n, _ := c.f.Details.Int(detail.ThreadsDumped)
			return fmt.Sprintf("hang: faulthandler dumped %d threads' stacks with no fatal error (a watchdog or a signal asked for them, most often because the program was stuck)", n)
		}
		if sig := d.Text(detail.Signature); timeLimitSig(sig) {
			return "hang or a run longer than its time limit: " + timeLimitWho(sig) + " at its time limit (" + short + ")"
		}
		if s := stallHeadline(d); s != "" {
			return s
		}
		if d.Text(detail.Signature) == liveStacksWaitSig {
			return headlineLiveStacks(d)
		}
		return "hang: " + short
	case evidence.NativeCrash:
		if d.Bool(detail.Truncated) && d.Text(detail.Signature) == goDumpCutSig {
			return headlineGoDumpCut(d)
		}
		if d.Bool(detail.Truncated) && d.Text(detail.Signature) == pyFramesCutSig {
			return headlinePyFramesCut(d)
		}
		if d.Bool(detail.Truncated) {
			return headlineNativeFramesCut(d)
		}
		return x.headlineNativeCrash(p, ev, d, short)
	case evidence.PythonException:
		if d.Bool(detail.Truncated) {
			return headlineCutTraceback(d)
		}
		switch d.Text(detail.Family) {
		case "graph_capture":
			return headlineGraphCapture(ev, short)
		case "config_validation":
			return headlineConfigValidation(ev, short)
		}
		exc := d.Text(detail.Exception)
		if m := d.Text(detail.Message); m != "" {
			// A line that gave only the message (ComfyUI's, a logger's) names no exception.
			if exc != "" {
				exc += ":"
			}
			exc += " " + lsClip(m, 120)
		} else if exc != "" {
			exc = " " + exc
		}
		return "Python exception" + exc + where(d)
	case evidence.Killed:
		if x.signal != "" {
			return fmt.Sprintf("killed by %s from outside the program, with no other evidence", x.signal)
		}
		return headlineKilledReport(d, short)
	case evidence.Unknown:
		return x.headlineUnknown()
	}
	return short
}

func (x *facts) headlineCleanExit() string {
	s := "the program exited with code 0"
	if n := len(x.causes(kindsLoggedOnCleanExit...)); n > 0 {
		s += fmt.Sprintf(" (%d error finding(s) were logged along the way)", n)
	}
	// A training run can finish "successfully" with a NaN loss: exit 0 is
	// not the news then, the numbers are.
	if nf := x.causes(evidence.NumericalNonfinite); len(nf) > 0 {
		s += fmt.Sprintf(", but it logged non-finite values: %s (line %d)", lsClip(strings.TrimSpace(nf[0].f.Text), 120), nf[0].f.Line)
	}
	return s
}

func headlineHardware(p *cf, d evidence.Details, short string) string {
	if d.Text(detail.Subsystem) == "nvls" {
		return "NVLink SHARP (NVLS) multicast setup failed: a Fabric Manager or NVSwitch problem of the system, not a collective timeout or a program bug (" + short + ")"
	}
	if nc := d.Text(detail.NamedCause); nc != "" {
		s := fmt.Sprintf("GPU hardware error: %s, named as the cause by the Xid %d that followed it", nc, p.f.Xid)
		if p.f.GPU != "" {
			s += " on " + p.f.GPU
		}
		return s
	}
	if p.f.Xid != 0 {
		what := d.Text(detail.Description)
		if what == "" {
			what = d.Text(detail.Meaning)
		}
		if what == "" {
			what = short
		}
		s := fmt.Sprintf("GPU hardware error: Xid %d (%s)", p.f.Xid, what)
		if p.f.GPU != "" {
			s += " on " + p.f.GPU
		}
		return s
	}
	return "GPU hardware error: " + short
}

func headlineHostOOM(p *cf, d evidence.Details, short string) string {
	if v := d.Text(detail.Victim); v != "" {
		s := fmt.Sprintf("host out of memory: the kernel killed %s", v)
		if p.f.Pid != 0 {
			s += fmt.Sprintf(" (pid %d", p.f.Pid)
			if kb, ok := d.Int(detail.AnonRSSKB); ok {
				s += ", anon-rss " + human.Bytes(kb*1024)
			}
			s += ")"
		}
		if sc := d.Text(detail.Scope); sc == "memcg" {
			s += " at its cgroup's memory limit"
		}
		return s
	}
	if d.Text(detail.Signature) == "dataloader-shm-bus-error" {
		s := "host shared memory (/dev/shm) full: a DataLoader worker died of SIGBUS"
		if p.f.Pid != 0 {
			s += fmt.Sprintf(" (pid %d)", p.f.Pid)
		}
		return s + "; not a native-code crash"
	}
	if d.Text(detail.Scheduler) == "kubernetes" {
		return "host out of memory: Kubernetes killed the container at its memory limit (OOMKilled)"
	}
	if d.Text(detail.Signature) == "ray-memory-monitor-kill" {
		s := "host out of memory: Ray's memory monitor killed a worker"
		if ip := d.Text(detail.NodeIP); ip != "" {
			s += " on node " + ip
		}
		if u, t := d.Text(detail.Used), d.Text(detail.Total); u != "" && t != "" {
			s += fmt.Sprintf(" (node memory %s of %s)", u, t)
		}
		return s + "; not the kernel's OOM killer, and not GPU memory"
	}
	return "host out of memory: " + short
}

func (x *facts) headlineDeviceAssert(ev []*cf, d evidence.Details, short string) string {
	if f := d.Text(detail.AssertFile); f != "" {
		in := ""
		if fn := d.Text(detail.Function); fn != "" {
			in = " in " + fn // older CUDA toolkits print no function
		}
		return fmt.Sprintf("device-side assert failed at %s:%s%s: `%s` (%s GPU thread(s))",
			path.Base(f), d.Text(detail.AssertLine), in, lsClip(d.Text(detail.Assertion), 120), d.Text(detail.Count))
	}
	for _, c := range ev {
		if f := c.f.Details.Text(detail.AssertFile); f != "" {
			return x.headline(evidence.GPUDeviceAssert, c, nil)
		}
	}
	switch d.Text(detail.Via) {
	case "NCCL WARN", "Cuda failure", "Hip failure":
		return "device-side assert triggered in a GPU kernel, reported through NCCL (" + short + "); the collective failed because of it" + where(d)
	case "Process group watchdog":
		return "device-side assert triggered in a GPU kernel, reported by the process-group watchdog" + where(d)
	}
	return "device-side assert triggered: " + short + where(d)
}

// headlinePageFault: the kernel's and the runtime's reports of one fault
// complement each other: the address and process from one, the reason from
// the other.
func headlinePageFault(p *cf, ev []*cf) string {
	pick := func(k detail.Text) string {
		for _, c := range ev {
			if v := c.f.Details.Text(k); v != "" {
				return v
			}
		}
		return ""
	}
	s := "GPU page fault"
	if p.f.Address != "" {
		s += " at " + p.f.Address
	}
	if r := pick(detail.Reason); r != "" {
		s += " (" + strings.TrimSuffix(r, ".") + ")"
	} else if m := pick(detail.Status); strings.HasPrefix(m, "HSA_") {
		s += " (" + m + ")"
	}
	if p.f.Xid != 0 {
		s += fmt.Sprintf(" (Xid %d)", p.f.Xid)
	}
	if proc := pick(detail.Process); proc != "" {
		s += " in " + proc
		if p.f.Pid != 0 {
			s += fmt.Sprintf(" (pid %d)", p.f.Pid)
		}
	}
	if e := pick(detail.UTCL2Client); e != "" {
		s += ", engine " + e
	}
	return s
}

func headlineIllegalAccess(p *cf, d evidence.Details, short string) string {
	switch {
	case p.f.Xid != 0:
		return fmt.Sprintf("illegal GPU memory access / kernel exception: Xid %d%s", p.f.Xid, onGPU(p.f.GPU))
	case d.Text(detail.Status) != "" && strings.Contains(d.Text(detail.Status), "_STATUS_EXECUTION_FAILED"):
		return fmt.Sprintf("a BLAS kernel failed to execute: %s in %s%s", d.Text(detail.Status), human.OrDash(d.Text(detail.Call)), where(d))
	}
	msg := d.Text(detail.Message)
	if msg == "" {
		msg = short
	}
	return "illegal GPU memory access: " + msg + where(d)
}

func headlineGPUOOM(p *cf, d evidence.Details, short string) string {
	if d.Text(detail.Framework) == "triton" && d.Text(detail.Required) != "" {
		return fmt.Sprintf("GPU on-chip %s exhausted: a Triton kernel needs %s bytes, the GPU has %s (%s; not VRAM)", d.Text(detail.Resource), d.Text(detail.Required), d.Text(detail.Limit), human.OrDash(d.Text(detail.Exception)))
	}
	if b, ok := d.Int(detail.RequestedBytes); ok && d.Text(detail.Requested) == "" {
		return fmt.Sprintf("GPU out of memory%s: tried to allocate %s (%s)", onGPU(p.f.GPU), human.Bytes(b), short)
	}
	if r := d.Text(detail.Requested); r != "" {
		s := fmt.Sprintf("GPU out of memory%s: tried to allocate %s", onGPU(p.f.GPU), r)
		if fr := d.Text(detail.Free); fr != "" {
			s += " with " + fr + " free"
			if t := d.Text(detail.Total); t != "" {
				s += " of " + t
			}
		}
		return s
	}
	return "GPU out of memory: " + short
}

func headlineCollective(ev []*cf, d evidence.Details, short string) string {
	if g := glooTimeoutHeadline(d); g != "" {
		return g
	}
	if c := d.Text(detail.Collective); c != "" {
		ranks := map[string]bool{}
		var rl []string
		for _, e := range ev {
			if r := e.f.Details.Text(detail.Rank); r != "" && !ranks[r] {
				ranks[r] = true
				rl = append(rl, r)
			}
		}
		s := fmt.Sprintf("NCCL collective timed out: %s seq %s ran %s ms (timeout %s ms)", c, d.Text(detail.Seq), d.Text(detail.RanMs), d.Text(detail.TimeoutMs))
		if len(rl) > 0 {
			s += " on rank(s) " + strings.Join(rl, ",")
		}
		return s + "; usually the symptom of another rank's failure"
	}
	return "NCCL/RCCL error: " + short
}

func (x *facts) headlineNativeCrash(p *cf, ev []*cf, d evidence.Details, short string) string {
	sig := x.signal
	if sig == "" || !crashSignal(sig) {
		sig = d.Text(detail.Signal)
	}
	s := "native crash"
	if sig != "" {
		s += " (" + sig + ")"
	} else if nt := ntstatusCrash(d); nt != "" {
		s += " (" + nt + ")"
	}
	if p.f.Source != evidence.SourceExit {
		for _, c := range ev {
			if ff := c.f.Details.Text(detail.FrameFunc); ff != "" {
				s += fmt.Sprintf(" in %s (%s:%s) per faulthandler", ff, path.Base(c.f.Details.Text(detail.FrameFile)), c.f.Details.Text(detail.FrameLine))
				if c.f.Details.Text(detail.Signature) == headerlessFatalDumpSig {
					s += " (its `Fatal Python error` line is not in the log; a dump with a current thread is not the hang watchdog's)"
				}
				return s + "; no GPU evidence"
			}
		}
		return s + ": " + short + "; no GPU evidence"
	}
	return s + " with no GPU evidence"
}

func (x *facts) headlineUnknown() string {
	s := "no root cause found"
	if x.exitCf != nil {
		s += " (" + x.exitCf.f.Text + ")"
	}
	for _, c := range x.symptomsOf(evidence.Unknown, evidence.CollectiveTimeout) {
		if !c.synth {
			s += "; " + symptomName(c) + " was reported"
			break
		}
	}
	if x.recoveredOOM() {
		s += "; a GPU out-of-memory was logged, but the program retried with less and went on, so it is not the cause"
	}
	return s + "; checked: " + strings.Join(x.checked(), ", ")
}

func where(d evidence.Details) string {
	f := d.Text(detail.FrameFile)
	if f == "" {
		return ""
	}
	return fmt.Sprintf(" at %s:%s in %s", path.Base(f), d.Text(detail.FrameLine), d.Text(detail.FrameFunc))
}

func onGPU(g string) string {
	if g == "" {
		return ""
	}
	return " on GPU " + g
}

// explainedText names, briefly, the symptoms the verdict accounts for.
func (x *facts) explainedText() string {
	var names []string
	seen := map[string]bool{}
	for _, c := range x.all {
		if c.role != RoleExplained {
			continue
		}
		n := symptomName(c)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		names = append(names, n)
	}
	if len(names) > 4 {
		names = append(names[:4], "more")
	}
	return strings.Join(names, ", ")
}

func symptomName(c *cf) string {
	d := c.f.Details
	switch sig := d.Text(detail.Signature); sig {
	case "sglang-sigquit":
		return "SGLang's sigquit from a child"
	case "vllm-engine-core-died", "vllm-engine-dead", "vllm-engine-init-failed":
		return "vLLM's dead engine"
	case hsaToolInitSig:
		return "HSA_STATUS_ERROR_OUT_OF_RESOURCES from a tool's HSA call (most often /dev/kfd or the render node not accessible, not memory)"
	case "torchelastic-child-failed":
		return "torchrun's failed child"
	}
	switch c.kind {
	case evidence.NativeCrash:
		if s := d.Text(detail.Signal); s != "" {
			return "the " + s
		}
		return "the native crash"
	case evidence.Killed:
		if s := d.Text(detail.Signal); s != "" {
			return "the " + s
		}
		return "the kill"
	case evidence.CollectiveTimeout:
		if d.Text(detail.Collective) != "" {
			return "the NCCL watchdog timeout"
		}
		return "the NCCL error"
	case evidence.PythonException:
		if e := d.Text(detail.Exception); e != "" {
			return "the " + e[strings.LastIndexByte(e, '.')+1:]
		}
		return "the Python exception"
	case evidence.GPUIllegalMemoryAccess:
		if c.f.Xid != 0 {
			return fmt.Sprintf("Xid %d", c.f.Xid)
		}
		return "the illegal-address errors"
	case evidence.GPUHang:
		return "the GPU hang/reset"
	case evidence.GPUArchMismatch:
		return "the missing kernel image"
	case evidence.GPUPageFault:
		return "the page fault"
	case evidence.Hang:
		return "the hang"
	case evidence.Unknown:
		if c.f.Xid != 0 {
			return fmt.Sprintf("Xid %d", c.f.Xid)
		}
		if c.f.Source == evidence.SourceExit {
			return "exit code " + d.Text(detail.Code)
		}
	}
	return ""
}

func (x *facts) checked() []string {
	if len(x.in.Checked) > 0 {
		return x.in.Checked
	}
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if x.in.ExitCode != nil || x.in.Signal != "" {
		add("exit status")
	}
	for _, c := range x.all {
		if !c.synth {
			add(c.f.Source)
		}
	}
	if x.in.KernelAPI != nil {
		add(evidence.SourceKernelAPI)
	}
	if len(out) == 0 {
		out = append(out, "nothing (no evidence was given)")
	}
	return out
}
