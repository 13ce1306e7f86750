package triage

import (
	"fmt"
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
