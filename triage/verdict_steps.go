package triage

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/human"
)

// Next steps follow the debug-kernel-crash workflow (shared/seed): make the
// fault synchronous, escalate kernel-API logging on the last calls, rule out
// CUDA graphs, run the suspect op alone at the failing M, then the
// MI355-pattern checks (MoE routing, FP8 scales, a stale aiter build), and
// tell host OOM from GPU OOM. Each step carries the kcrash command line that
// does it when there is one.

// cmdPlaceholder stands for the child's command line in next steps when Decide
// does not know it; Summary substitutes SummaryMeta.Command.
const cmdPlaceholder = "CMD"

type stepCtx struct {
	x         *facts
	cmd       string
	framework string // "sglang", "vllm" or ""
	launch    string // what the command launches directly: "sglang", "vllm" or ""
	prof      string // the framework's logging profile, or "pystacks" when nothing names one
	apiLog    bool   // prof logs kernel-API calls (SGLang's, vLLM's and FlashInfer's loggers)
	ev        []*cf
	// repeats are the `kcrash run` command lines built by kcrash() that are
	// the run that just happened: steps offering them are dropped.
	repeats []string
}

func nextSteps(x *facts, k evidence.Kind, ev []*cf) []string {
	s := &stepCtx{x: x, cmd: shellJoin(x.in.Command), framework: x.framework(), launch: serverLaunch(x.in.Command), ev: ev}
	s.prof, s.apiLog = s.loggingProfile()
	if s.cmd == "" {
		s.cmd = cmdPlaceholder
	}
	var out []string
	add := func(step string) {
		if step != "" {
			out = append(out, step)
		}
	}
	switch k {
	case evidence.CleanExit:
		if nf := x.causes(evidence.NumericalNonfinite); len(nf) > 0 {
			s.ev = nf
			add(s.nonfiniteSteps())
		}
	case evidence.GPUPageFault, evidence.GPUIllegalMemoryAccess, evidence.GPUDeviceAssert:
		if s.otherGPUSteps(k, add) {
			break
		}
		if k == evidence.GPUDeviceAssert {
			add(s.assertStep())
		}
		add(s.syncStep())
		add(s.graphStep())
		add(s.opAloneStep())
		add(s.shapeJumpStep())
		add(s.patternSteps())
		if k == evidence.GPUPageFault {
			add(s.pageFaultStep())
		}
		add(s.nativeDebugStep())
	case evidence.GPUArchMismatch:
		add(s.archSteps())
	case evidence.GPUHang:
		add(s.launchTimeoutStep())
		add(s.gpuHangSteps())
	case evidence.GPUHardwareError:
		add(s.hardwareSteps())
	case evidence.HostOOM:
		add(s.hostOOMSteps())
	case evidence.GPUOOM:
		add(s.gpuOOMSteps())
	case evidence.NumericalNonfinite:
		add(s.nonfiniteSteps())
	case evidence.CollectiveTimeout:
		add(s.collectiveSteps())
	case evidence.Hang:
		if x.in.HangDetected {
			add(s.hangStacksStep())
		}
		add(timeLimitStep(ev))
		if c := threadDump(ev); c != nil {
			add(fmt.Sprintf("The program's own faulthandler dump (%s:%d) already holds every thread's stack: the innermost frame of each says where it waits (a queue's get, a lock, a collective); find the thread that should have produced what the others wait for.", path.Base(c.f.File), c.f.Line))
		} else if st := liveStacksStep(ev); st != "" {
			add(st)
		} else {
			add(s.pySpyStep())
		}
		if s.apiLog {
			add("Log the last kernel-API calls and the collectives before the hang: `" + s.kcrash(s.prof+",nccl", 3, "--hang-timeout 10m") + "`.")
		} else {
			add("Log the collectives and keep the Python stacks of the hang: `" + s.kcrash(s.prof+",nccl", 0, "--hang-timeout 10m") + "`.")
		}
	case evidence.NativeCrash:
		add(s.coreLimitStep())
		add("Get a core dump and the native stack: `" + s.kcrash(s.prof+",coredump", 0, "") + "`, then open it with " + s.debugger() + ".")
		add("An abort or segfault right after an asynchronous GPU error is common: re-run synchronous to rule that out: `" + s.kcrash(s.prof+","+s.syncProfile(), 0, "") + "`.")
		add(s.nativeDebugStep())
	case evidence.PythonException:
		add(s.pythonSteps())
	case evidence.Killed:
		add(s.killedSteps())
	case evidence.Unknown:
		add(s.unknownSteps())
	}
	if k != evidence.CleanExit && k != evidence.Killed {
		first, rest := s.softwareSteps()
		out = append(append(first, out...), rest...)
	}
	var kept []string
	for _, step := range splitSteps(out) {
		repeat := false
		for _, r := range s.repeats {
			repeat = repeat || strings.Contains(step, "`"+r+"`")
		}
		if !repeat { // it would only repeat the run that produced this bundle
			kept = append(kept, step)
		}
	}
	return kept
}

// splitSteps lets one helper return several steps separated by "\n".
func splitSteps(in []string) []string {
	var out []string
	for _, s := range in {
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// loggingProfile is the profile whose logs the steps ask for: the
// framework's own, the one the run already used, or, when nothing names a
// framework (a script, llama.cpp, an MPI program), only Python's stacks:
// another framework's kernel-API logger would log nothing there.
func (s *stepCtx) loggingProfile() (string, bool) {
	switch s.framework {
	case "sglang", "vllm":
		return s.framework, true
	}
	if run := s.x.in.Run; run != nil {
		for _, p := range run.Profiles {
			switch p {
			case "sglang", "vllm", "flashinfer":
				return p, true
			}
		}
	}
	return "pystacks", false
}

func (s *stepCtx) kcrash(profiles string, level int, extra string) string {
	c := s.kcrashLine(profiles, level, extra)
	if s.sameAsRun(profiles, level, extra) {
		s.repeats = append(s.repeats, c)
	}
	return c
}

// kcrashLine is the `kcrash run` command line, repeat or not.
func (s *stepCtx) kcrashLine(profiles string, level int, extra string) string {
	c := "kcrash run --profile " + profiles
	if level > 0 {
		c += fmt.Sprintf(" --level %d", level)
	}
	if extra != "" {
		c += " " + extra
	}
	return c + " -- " + s.cmd
}

// sameAsRun: a suggested `kcrash run` that sets nothing the run did not
// already have (same level, no extra flags, profiles all applied) is the run
// that just happened.
func (s *stepCtx) sameAsRun(profiles string, level int, extra string) bool {
	run := s.x.in.Run
	if run == nil || extra != "" {
		return false
	}
	if level == 0 {
		level = 3 // kcrash run's default
	}
	if level != run.Level {
		return false
	}
	for _, p := range strings.Split(profiles, ",") {
		if !slices.Contains(run.Profiles, p) {
			return false
		}
	}
	return true
}

// serverLaunch says whether argv itself starts an SGLang or vLLM server, the
// only case where their flags can be appended to it.
func serverLaunch(argv []string) string {
	for i, a := range argv {
		base := path.Base(a)
		switch {
		case strings.HasPrefix(a, "sglang.launch_server") || (a == "-m" && i+1 < len(argv) && strings.HasPrefix(argv[i+1], "sglang.")) ||
			(base == "sglang" && i+1 < len(argv) && argv[i+1] == "serve"):
			return "sglang"
		case strings.HasPrefix(a, "vllm.entrypoints") || (a == "-m" && i+1 < len(argv) && strings.HasPrefix(argv[i+1], "vllm.entrypoints")) ||
			(base == "vllm" && i+1 < len(argv) && argv[i+1] == "serve"):
			return "vllm"
		}
	}
	return ""
}

// scriptOf is the script a shell command runs ("run.sh" of `bash run.sh`).
func scriptOf(argv []string) string {
	if len(argv) >= 2 {
		switch argv[0][strings.LastIndexByte(argv[0], '/')+1:] {
		case "bash", "sh", "zsh", "dash":
			if !strings.HasPrefix(argv[1], "-") {
				return argv[1]
			}
		}
	}
	if len(argv) >= 1 && strings.HasSuffix(argv[0], ".sh") {
		return argv[0]
	}
	return ""
}

// hangStacksStep says where the stacks taken at the hang are, and whether
// the Python ones were obtained.
func (s *stepCtx) hangStacksStep() string {
	kernel := "raw/stacks.txt holds every live thread's state, wait channel and kernel stack (and py-spy's dumps when py-spy is installed)"
	run := s.x.in.Run
	switch {
	case run != nil && run.PyStacks > 0:
		n := "1 Python process"
		if run.PyStacks > 1 {
			n = fmt.Sprintf("%d Python processes", run.PyStacks)
		}
		return "The Python stacks of every thread of " + n + ", taken by faulthandler when kcrash declared the hang, are in raw/pystacks.txt (the innermost call first); " + kernel + "."
	case run != nil && run.PyStacksHook:
		return "No Python stacks were obtained: no live process of the tree had kcrash's faulthandler hook (Python started with -I or -E, or the program handles signal 54 itself); " + kernel + "."
	}
	return "The live stacks kcrash took when it declared the hang: " + kernel + ". For the Python stacks without py-spy, add the `pystacks` profile (the `sglang` and `flashinfer` profiles include it)."
}

func (s *stepCtx) pySpyStep() string {
	if run := s.x.in.Run; run != nil && run.HangStops {
		return "kcrash stopped the hung processes once their stacks were taken; to look at the next hang live (`py-spy dump --pid PID --native`, gdb), re-run with `--hang-action bundle-only`, which bundles the hang and leaves the processes running."
	}
	var pids []int
	if s.x.in.Run != nil {
		pids = s.x.in.Run.Pids
	}
	if len(pids) == 0 {
		return "Dump the Python stacks of the hung process while it hangs: `py-spy dump --pid <pid>` with the pid of each Python process of the job (`pgrep -f python`; add `--native` for C++ frames)."
	}
	var cmds []string
	for i, p := range pids {
		if i == 8 {
			cmds = append(cmds, fmt.Sprintf("and %d more", len(pids)-i))
			break
		}
		cmds = append(cmds, fmt.Sprintf("`py-spy dump --pid %d`", p))
	}
	return "Dump the Python stacks of the hung processes while they hang: " + strings.Join(cmds, ", ") + " (add `--native` for C++ frames; raw/stacks.txt holds the kernel stacks kcrash took)."
}

// coreLimitStep: a core dump was asked for (or will be) but the limit the
// child started with forbids one.
func (s *stepCtx) coreLimitStep() string {
	run := s.x.in.Run
	if run == nil || !run.CoreLimitZero {
		return ""
	}
	what := "No core file could be written: the core size limit was 0 (`ulimit -c 0`)"
	if slices.Contains(run.Profiles, "coredump") {
		what = "The coredump profile was on, but no core file could be written: the core size limit was 0 (`ulimit -c 0`)"
	}
	return what + ". Raise it in the shell that starts kcrash (`ulimit -c unlimited`; in a container `--ulimit core=-1`, under Slurm the job script's own `ulimit -c unlimited`), then run again: `ulimit -c unlimited; " + s.kcrashLine(s.prof+",coredump", 0, "") + "`."
}

func (s *stepCtx) syncProfile() string {
	switch s.x.vendor {
	case "nvidia":
		return "cuda-sync"
	case "amd":
		return "rocm-sync"
	}
	return "cuda-sync,rocm-sync"
}

// debugger is the one to open a core dump with, for the vendor the evidence names.
func (s *stepCtx) debugger() string {
	switch s.x.vendor {
	case "amd":
		return "`rocgdb` (or `gdb`)"
	case "nvidia":
		return "`gdb` (`cuda-gdb` for GPU frames)"
	}
	return "`gdb`"
}

func (s *stepCtx) syncStep() string {
	step := "Make the fault synchronous, so that it is reported at the kernel that caused it, and log tensor statistics (min/max/nan_count) on the calls before it; level 5 is slow, so reproduce with one short request: `" +
		s.kcrash(s.prof+","+s.syncProfile(), 5, "") + "`"
	if !s.apiLog {
		step = "Make the fault synchronous, so that it is reported at the kernel that caused it: `" + s.kcrash(s.prof+","+s.syncProfile(), 0, "") + "`"
	}
	switch s.x.vendor {
	case "amd":
		step += " (AMD_SERIALIZE_KERNEL=3, HIP_LAUNCH_BLOCKING=1)."
	case "nvidia":
		step += " (CUDA_LAUNCH_BLOCKING=1)."
	default:
		// Nothing says which runtime: both settings, each ignored by the other runtime.
		step += " (CUDA_LAUNCH_BLOCKING=1 on NVIDIA, AMD_SERIALIZE_KERNEL=3 on AMD)."
	}
	return step
}

func (s *stepCtx) graphStep() string {
	graphs := "CUDA/HIP graphs"
	switch s.x.vendor {
	case "nvidia":
		graphs = "CUDA graphs"
	case "amd":
		graphs = "HIP graphs"
	}
	why := "Rule out " + graphs + " (graph replays are not in the kernel-API log, so a fault inside one is pinned on the wrong call): "
	if !s.apiLog {
		why = "Rule out " + graphs + " (a fault inside a graph replay is reported at the replay, not at the kernel that faulted): "
	}
	switch s.launch {
	case "sglang":
		return why + "`" + s.kcrash(s.prof+","+s.syncProfile(), 0, "") + " --disable-cuda-graph --disable-prefill-cuda-graph`."
	case "vllm":
		return why + "`" + s.kcrash(s.prof+","+s.syncProfile(), 0, "") + " --enforce-eager`."
	}
	// The command does not start the server itself (a script, a Python
	// program): appending server flags to it would break it.
	flags := "`--disable-cuda-graph --disable-prefill-cuda-graph` to the SGLang server's command line"
	switch s.framework {
	case "vllm":
		flags = "`--enforce-eager` to the vLLM server's command line (or `enforce_eager=True` to `LLM(...)`)"
	case "":
		// Nothing names the framework: the flag is whichever serves it.
		flags = "the serving framework's flag that turns graphs off (SGLang `--disable-cuda-graph --disable-prefill-cuda-graph`, vLLM `--enforce-eager`)"
	}
	where := ""
	if sc := scriptOf(s.x.in.Command); sc != "" {
		where = " in " + sc
	}
	return why + "add " + flags + where + ", then run it again under `" + s.kcrash(s.prof+","+s.syncProfile(), 0, "") + "`."
}

var firstDimRe = regexp.MustCompile(`^[(\[]\s*(\d+)`)

// opAloneStep: Step 4 of the workflow, bisect by running the suspect op alone.
func (s *stepCtx) opAloneStep() string {
	call, unfinished := s.x.suspect()
	if call == nil {
		if s.x.in.KernelAPI == nil && s.apiLog {
			return "Log the kernel-API calls to find the last kernel before the crash: `" + s.kcrash(s.prof, 3, "") + "`."
		}
		return ""
	}
	m := ""
	for _, a := range call.Args {
		if mm := firstDimRe.FindStringSubmatch(a.Shape); mm != nil {
			m = mm[1]
			break
		}
	}
	which := "the last logged call"
	if unfinished {
		which = "the call that never returned"
	}
	step := fmt.Sprintf("Run %s, `%s`, alone", which, call.API)
	if m != "" {
		step += " at the failing M=" + m
	}
	if len(call.Args) > 0 {
		step += " with the logged inputs (" + strings.Join(argsText(call.Args, 4), "; ") + ")"
	}
	op := opName(call.API)
	if strings.Contains(strings.ToLower(call.API), "aiter") || s.x.aiterOn() {
		step += fmt.Sprintf(": for an aiter op, `cd aiter && python op_tests/test_%s.py -v`; for a Triton/SGLang kernel, a minimal script calling it at M=1 and M=%s", op, human.OrDash(m))
	} else {
		step += fmt.Sprintf(": a minimal script calling it at M=1 and M=%s", human.OrDash(m))
	}
	return step + "."
}

// shapeJumpStep: the workflow's "shape jumps between calls" signal, a batch
// composition change mid-forward, when the last jump is the suspect's.
func (s *stepCtx) shapeJumpStep() string {
	ka := s.x.in.KernelAPI
	call, _ := s.x.suspect()
	if ka == nil || call == nil || len(ka.ShapeJumps) == 0 {
		return ""
	}
	j := ka.ShapeJumps[len(ka.ShapeJumps)-1]
	if j.API != call.API {
		return ""
	}
	return fmt.Sprintf("The input %s of `%s` jumped from %s to %s just before (%s:%d): a batch-composition change mid-forward; check the kernel's dispatch (M/N/K) at the new shape.",
		j.Arg, j.API, j.From, j.To, path.Base(j.File), j.Line)
}

func opName(api string) string {
	op := api
	if i := strings.LastIndexByte(op, '.'); i >= 0 {
		op = op[i+1:]
		if (op == "forward" || op == "apply" || op == "__call__") && i > 0 {
			prev := api[:i]
			op = prev[strings.LastIndexByte(prev, '.')+1:]
		}
	}
	return strings.ToLower(op)
}

// patternSteps are the workflow's "common crash patterns on MI355" checks,
// offered when the suspect call or the evidence points at them.
func (s *stepCtx) patternSteps() string {
	call, _ := s.x.suspect()
	api, dtypes := "", ""
	if call != nil {
		api = strings.ToLower(call.API)
		for _, a := range call.Args {
			dtypes += " " + a.Dtype + " " + strings.ToLower(a.Name)
		}
	}
	var out []string
	if strings.Contains(api, "moe") || strings.Contains(api, "topk") || strings.Contains(api, "expert") || strings.Contains(dtypes, "topk") {
		out = append(out, "MoE dispatch: check `topk_ids` against the expert count and the EP size (an id ≥ num_experts/EP indexes past the expert weights).")
	}
	if strings.Contains(api, "fp8") || strings.Contains(dtypes, "float8") || strings.Contains(api, "scale") {
		kernel := "kernel"
		if s.x.vendor == "amd" {
			kernel = "CK/aiter kernel"
		}
		out = append(out, "FP8: check that the `scale` tensor's M/N dimensions match the block alignment the "+kernel+" expects.")
	}
	if strings.Contains(api, "attention") || strings.Contains(api, "attn") {
		out = append(out, "Attention: check the workspace size against max_seq_len, page size and batch size.")
	}
	if s.x.aiterOn() || strings.Contains(api, "aiter") {
		out = append(out, "If aiter was rebuilt recently, a stale .so can fault like this: re-run `python setup.py develop` in aiter and retry.")
	}
	return strings.Join(out, "\n")
}

func (s *stepCtx) pageFaultStep() string {
	for _, c := range append(append([]*cf(nil), s.ev...), s.x.all...) {
		if c.kind == evidence.GPUPageFault && c.f.Source == evidence.SourceDmesg && !c.hidden {
			loc := c.f.File
			if loc == "" {
				loc = "kmsg.log"
			}
			return fmt.Sprintf("The kernel's report of the fault (%s:%d) names the faulting process, VMID and engine (SDMA/TCP/...): an SDMA fault points at a copy, a TCP/shader fault at a kernel.", loc, c.f.Line)
		}
	}
	return "Check the kernel log (`dmesg`, kmsg.log in the bundle) for the GPU page fault: it names the process, VMID and engine that faulted."
}

func (s *stepCtx) nativeDebugStep() string {
	if s.x.vendor == "amd" {
		return "For a HIP crash outside Python, run under `rocgdb` or with `HSA_ENABLE_DEBUG=1`: `" + s.kcrash(s.prof+",rocm-sync", 0, "--env HSA_ENABLE_DEBUG=1") + "`."
	}
	return ""
}

func (s *stepCtx) assertStep() string {
	for _, c := range append(append([]*cf(nil), s.ev...), s.x.all...) {
		d := c.f.Details
		if f := d.Text(detail.AssertFile); f != "" {
			return fmt.Sprintf("The assert at %s:%s checks `%s`: check the inputs of that op (token ids against the vocabulary size, indices against the tensor's size); the kernel-API log's last calls show their shapes.",
				path.Base(f), d.Text(detail.AssertLine), lsClip(d.Text(detail.Assertion), 120))
		}
	}
	return "The kernel's own `Assertion ... failed` lines name the check; they are printed to stderr before the Python error, so look for them in output.log, or make the launch synchronous (next step) to get them next to the failing call."
}

func (s *stepCtx) hardwareSteps() string {
	for _, c := range s.ev {
		if c.f.Details.Text(detail.Subsystem) == "nvls" {
			return s.nvlsSteps()
		}
	}
	var out []string
	action := ""
	for _, c := range s.ev {
		if a := c.f.Details.Text(detail.Action); a != "" {
			action = a
			break
		}
	}
	st := "This is a GPU hardware fault, not a program bug: drain the node and reset the GPU (or reboot) before running on it again"
	if action != "" {
		st += "; NVIDIA's catalog action is " + action
	}
	out = append(out, st+".")
	consumer := s.x.consumerGPU()
	switch {
	case consumer != "" && s.x.vendor == "amd":
		out = append(out, "This GPU ("+consumer+") keeps no ECC or bad-page records: check its temperature, power and PCIe link (`amd-smi metric`, `lspci -vv`), then swap or reseat the card.")
	case consumer != "":
		out = append(out, "This GPU ("+consumer+") has no row remapping and no DCGM support: check its temperature, power and PCIe link (`nvidia-smi -q -d TEMPERATURE,POWER,PERFORMANCE`, `lspci -vv`), then swap or reseat the card; collect `nvidia-bug-report.sh` for the vendor.")
	case s.x.vendor == "amd":
		out = append(out, "Check the GPU's error counters: `amd-smi metric --ecc` and `amd-smi bad-pages`; file the RAS/CPER records with the vendor.")
	case s.x.vendor == "nvidia":
		out = append(out, "Check ECC and row remapping, then run diagnostics: `nvidia-smi -q -d ECC,ROW_REMAPPER`, `dcgmi diag -r 3`; collect `nvidia-bug-report.sh` for an RMA.")
	default:
		out = append(out, "Check the GPU's error counters with its vendor's tool (`nvidia-smi -q -d ECC` on NVIDIA, `amd-smi metric --ecc` on AMD) and run the vendor's diagnostics before using the GPU again.")
	}
	out = append(out, "Confirm the program is fine by re-running it on another node: `"+s.kcrash(s.prof, 0, "")+"`.")
	return strings.Join(out, "\n")
}

func (s *stepCtx) hostOOMSteps() string {
	for _, c := range s.ev {
		if c.f.Details.Text(detail.Signature) == "ray-memory-monitor-kill" {
			return s.rayOOMSteps(c)
		}
		switch c.f.Details.Text(detail.Signature) {
		case "torch-cpu-allocator-oom", "tf-oom-when-allocating-cpu":
			// The program's own allocation failed (ENOMEM): no OOM killer was involved.
			return strings.Join([]string{
				"This is host (CPU) memory, not GPU memory: the program's own allocation failed (ENOMEM), the process or its container had no host memory left for it. Lower host-side memory use (the batch or input size, DataLoader workers that each hold a copy, CPU offload), or raise the container/cgroup/job memory limit.",
				"See which process grew: memory.json and processes.json in the bundle hold the RSS timeline of the tree; an address-space limit (`ulimit -v`) or strict overcommit (`vm.overcommit_memory=2`) makes allocations fail with memory still free.",
			}, "\n")
		}
		if c.f.Details.Text(detail.Signature) == "dataloader-shm-bus-error" {
			return strings.Join([]string{
				"This is host shared memory, not GPU memory and not a bug in native code: DataLoader workers pass batches through /dev/shm, and a write past its end raises SIGBUS. Check `df -h /dev/shm`.",
				"Give /dev/shm room: `docker run --shm-size=16g` (or `--ipc=host`), a Kubernetes `emptyDir: {medium: Memory}` volume mounted at /dev/shm; or lower `num_workers`/`prefetch_factor`, or set `torch.multiprocessing.set_sharing_strategy('file_system')`.",
			}, "\n")
		}
	}
	who := "a process of the run"
	for _, c := range s.ev {
		if v := c.f.Details.Text(detail.Victim); v != "" {
			who = v
			if c.f.Pid != 0 {
				who += fmt.Sprintf(" (pid %d)", c.f.Pid)
			}
			break
		}
	}
	return strings.Join([]string{
		"This is host (CPU) memory, not GPU memory: the kernel OOM killer killed " + who + ". Raise the container/cgroup/job memory limit, or lower host-side memory use (fewer tokenizer or dataloader workers, no CPU offload, fewer concurrent requests).",
		"See which process grew: memory.json and processes.json in the bundle hold the RSS timeline of the tree.",
		"Container OOM vs GPU OOM: VRAM (gpu.json, rocm-smi/nvidia-smi) was not the limit here; the limit that was hit is the cgroup's (`memory.max`, the pod's memory limit, Slurm's --mem).",
	}, "\n")
}

func (s *stepCtx) gpuOOMSteps() string {
	var d evidence.Details
	gpu := ""
	if len(s.ev) > 0 {
		d, gpu = s.ev[0].f.Details, s.ev[0].f.GPU
	}
	if d.Text(detail.Framework) == "triton" {
		return "This is the GPU's on-chip shared memory, not VRAM: lowering memory fractions does not help. The Triton kernel's launch configuration needs more than this GPU has: use smaller BLOCK sizes or num_stages, or a config tuned for this GPU model (SGLang and vLLM ship per-GPU tuned configs; a missing one falls back to defaults)."
	}
	var out []string
	switch r := d.Text(detail.Requested); {
	case r != "" && d.Text(detail.Free) != "":
		out = append(out, fmt.Sprintf("This is GPU memory, not host memory: GPU %s had %s free of %s when %s was requested; gpu.json shows VRAM over the run and which other processes held it.", human.OrDash(gpu), d.Text(detail.Free), human.OrDash(d.Text(detail.Total)), r))
	case r != "" && gpu != "":
		out = append(out, fmt.Sprintf("This is GPU memory, not host memory: %s was requested on GPU %s; gpu.json shows VRAM over the run and which other processes held it.", r, gpu))
	case r != "":
		out = append(out, fmt.Sprintf("This is GPU memory, not host memory: %s was requested; gpu.json shows VRAM over the run and which other processes held it.", r))
	default:
		out = append(out, "This is GPU memory, not host memory; gpu.json shows VRAM over the run and which other processes held it.")
	}
	switch {
	case d.Text(detail.Framework) == "tensorrt_llm":
		out = append(out, trtllmHeadroomStep)
	case s.ggml():
		out = append(out, ggmlHeadroomStep)
	case s.framework == "vllm":
		out = append(out, "Leave more headroom: lower `--gpu-memory-utilization`, `--max-num-seqs` or `--max-model-len`.")
	case s.framework == "":
		out = append(out, "Leave more headroom: a smaller batch or sequence length, or the serving framework's memory fraction (SGLang `--mem-fraction-static`, vLLM `--gpu-memory-utilization`).")
	default:
		out = append(out, "Leave more headroom: lower SGLang's `--mem-fraction-static` (e.g. by 0.05), `--max-running-requests` or `--chunked-prefill-size` (vLLM: `--gpu-memory-utilization`).")
	}
	res, _ := d.Int(detail.ReservedUnallocatedBytes)
	tot, _ := d.Int(detail.TotalBytes)
	if res > 0 && tot > 0 && res*20 > tot {
		conf, note := "PYTORCH_CUDA_ALLOC_CONF", " (PYTORCH_HIP_ALLOC_CONF on ROCm)"
		switch s.x.vendor {
		case "amd":
			conf, note = "PYTORCH_HIP_ALLOC_CONF", ""
		case "nvidia":
			note = ""
		}
		out = append(out, "Much memory is reserved but unallocated (fragmentation): `"+s.kcrash(s.prof, 0, "--env "+conf+"=expandable_segments:True")+"`"+note+".")
	}
	return strings.Join(out, "\n")
}

func (s *stepCtx) nonfiniteSteps() string {
	var out []string
	if ka := s.x.in.KernelAPI; ka != nil && ka.FirstNonfinite != nil {
		nf := ka.FirstNonfinite
		if strings.HasPrefix(nf.Arg.Name, "return") {
			// Its inputs were finite (they would have been found first): the call itself made the NaN/Inf.
			out = append(out, fmt.Sprintf("The first non-finite tensor is the return value of %s (%s:%d), whose inputs were finite: %s produced it; check its inputs' ranges (zeros, huge values, an eps of 0) and run it alone with them.", nf.Call.API, path.Base(nf.Call.File), nf.Call.Line, nf.Call.API))
		} else {
			out = append(out, fmt.Sprintf("The first non-finite tensor is %s of %s (%s:%d): the call before it produced it; check that call's output and the inputs it was given.", nf.Arg.Name, nf.Call.API, path.Base(nf.Call.File), nf.Call.Line))
		}
	}
	if s.x.kernelAPILevel() < 5 && s.apiLog {
		out = append(out, "Follow nan_count through the calls with level-5 logging: `"+s.kcrash(s.prof, 5, "")+"`.")
	} else if !s.apiLog {
		// No kernel-API logger for this program: what the training loop itself shows.
		out = append(out, "Find the first step whose loss or gradient norm went non-finite and what changed before it (a learning-rate spike or warm-up end, a log, sqrt or division of zero); in PyTorch, `torch.autograd.set_detect_anomaly(True)` names the backward op that made the first NaN.")
	}
	out = append(out,
		"Look for overflow in fp16/bf16 and for zero or infinite quantization scales (FP8 `scale` tensors).")
	return strings.Join(out, "\n")
}

func (s *stepCtx) collectiveSteps() string {
	var out []string
	timeout := false
	for _, c := range s.ev {
		if c.f.Details.Text(detail.Collective) != "" {
			timeout = true
		}
	}
	if peer := s.peerLost(); peer != nil {
		who := "a peer rank"
		if p := peer.f.Details.Text(detail.Peer); p != "" {
			who = "the peer at " + p
		}
		out = append(out, "The connection to "+who+" was closed or reset: that rank most likely failed or was killed first, so its own log holds the cause; collect every rank's bundle and run `kcrash merge DIR` to find it.",
			"If that rank shows nothing, check the network path to it: the NIC's link and error counters (`ip -s link`, `ethtool -S IFACE`, `ibstat` on InfiniBand), kernel messages for link flaps on both hosts, and NCCL_SOCKET_IFNAME pointing at the right interface.")
	} else if g := glooTimeoutStep(s.ev); g != "" {
		out = append(out, g)
	} else if timeout {
		out = append(out, "A collective timeout is usually the symptom of another rank that failed or stalled first: collect every rank's bundle and run `kcrash merge DIR` to find the first failure.")
	} else {
		out = append(out, "A NCCL/RCCL call failed: the NCCL WARN line names the transport (p2p, net, shm); try `--env NCCL_P2P_DISABLE=1` to rule out peer-to-peer, and run `kcrash merge DIR` over all ranks' bundles.")
	}
	out = append(out, "Turn on NCCL logging and PyTorch's flight recorder (dumped on watchdog timeout): `"+s.kcrash(s.prof+",nccl", 0, "")+"`.")
	return strings.Join(out, "\n")
}

func (s *stepCtx) pythonSteps() string {
	var d evidence.Details
	if len(s.ev) > 0 {
		d = s.ev[0].f.Details
	}
	switch d.Text(detail.Family) {
	case "graph_capture":
		return s.graphCaptureSteps()
	case "config_validation":
		return s.configValidationSteps()
	}
	if f := d.Text(detail.FrameFile); f != "" {
		return fmt.Sprintf("The exception %s was raised at %s:%s in %s; the full traceback is in output.log around line %d.", human.OrDash(d.Text(detail.Exception)), f, d.Text(detail.FrameLine), d.Text(detail.FrameFunc), s.ev[0].f.Line)
	}
	return "The traceback is in output.log; its last frame is where the exception was raised."
}

func (s *stepCtx) unknownSteps() string {
	var out []string
	for _, c := range s.x.symptomsOf(evidence.Unknown) {
		switch c.f.Details.Text(detail.Signature) {
		case "sglang-sigquit":
			out = append(out, "SGLang's parent received sigquit because a child process (scheduler, detokenizer) failed: the child's own traceback normally precedes it in output.log; with `--collect always` its output is kept even when the parent exits quietly.")
		case hsaToolInitSig:
			return hsaToolInitStep // a setup problem: no GPU fault to make synchronous
		case "vllm-engine-core-died", "vllm-engine-dead", "vllm-engine-init-failed":
			out = append(out, "vLLM's front end saw its engine core die: the cause is in the `(EngineCore pid=N)` lines before it, or, if the process was killed, in kmsg.log (OOM killer).")
		}
		if len(out) > 0 {
			break
		}
	}
	if !s.x.anyFailure() {
		// Nothing failed that kcrash can see: there is no "next crash" to prepare for.
		return strings.Join(append(out, "No failure was found in what was given: if the program did fail, give kcrash its whole output and the kernel log (`kcrash triage --log FILE --dmesg FILE`), or run it under `kcrash run`, which also records the exit status."), "\n")
	}
	level := 0
	if s.apiLog {
		level = 3
		if s.x.kernelAPILevel() < 3 {
			out = append(out, "Log the kernel-API calls and enable Python's faulthandler, so that the next crash names the last kernel: `"+s.kcrash(s.prof, 3, "")+"`.")
		}
	}
	out = append(out,
		"Make GPU errors synchronous in case an asynchronous fault is being lost: `"+s.kcrash(s.prof+","+s.syncProfile(), level, "")+"`.",
		"If the kernel log could not be read, run `kcrash doctor` to see which collectors work here; `dmesg` on the host may hold a GPU fault or an OOM kill.")
	return strings.Join(out, "\n")
}

// shellJoin quotes argv for a POSIX shell, so that a next step can be pasted.
func shellJoin(argv []string) string {
	var out []string
	for _, a := range argv {
		out = append(out, shellQuote(a))
	}
	return strings.Join(out, " ")
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

func shellQuote(s string) string {
	if s != "" && shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
