package triage

import (
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"github.com/kcrash/kcrash/evidence"
)

// The generic fallback. The rules table reads a log through families (a
// framework's, a driver's, a launcher's own wording); a log from a family it
// has never seen reads `unknown` even when it plainly says "Segmentation
// fault", "Killed" or "out of memory". When (and only when) every rule says
// unknown, Decide reads the log's generic failure wording instead: plain
// English, OS and language-runtime failure words that any reader would list
// without having seen the log. The verdict then has low confidence and its
// summary says that it rests on generic wording, quoting the line.
//
// The scanner notes, for each cue, the last line that carries it (a bounded
// state: one line per cue) and emits those as findings marked
// detailGenericCue. newFacts sets them aside (no rule ever sees them), so a
// verdict that is not unknown cannot change.

// genericFallback switches the fallback reading; only tests turn it off, to
// show that it never changes a verdict the rules reach.
var genericFallback = true

const (
	detailGenericCue  = "generic_cue"  // the cue's name; marks the finding as the fallback's
	detailGenericKind = "generic_kind" // the kind the cue reads
)

// genericCue is one row of the fallback's table. The table's order is the
// precedence: the first cue (by row) found anywhere in the log decides.
type genericCue struct {
	name string
	lits []string      // lower-case words of which a matching line has one (a cheap test first)
	kind evidence.Kind // the kind it reads without GPU context; "" reads nothing
	gpu  evidence.Kind // the kind when the line, or one within two lines, names a GPU runtime; "" is kind
	coll evidence.Kind // the kind when the line names a collective library or operation; "" is none
	exc  evidence.Kind // the kind when the line names an exception; "" is none
	re   *regexp.Regexp
	// kinds maps the first submatch (a signal's name or number, an exit
	// status) to a kind; a value not in it reads nothing.
	kinds map[string]evidence.Kind
	why   string // for docs/verdicts.md
}

// Signals and exit statuses: a crash signal is native_crash, one sent to stop
// the program is killed; an exit status above 128 is 128+N, the shell's and
// the container runtimes' way of telling signal N; torchrun and Python's
// subprocess tell it as -N.
var genericSignalKinds = map[string]evidence.Kind{
	"SEGV": evidence.NativeCrash, "BUS": evidence.NativeCrash, "ILL": evidence.NativeCrash, "FPE": evidence.NativeCrash, "ABRT": evidence.NativeCrash,
	"KILL": evidence.Killed, "TERM": evidence.Killed, "INT": evidence.Killed, "HUP": evidence.Killed, "QUIT": evidence.Killed,
	"11": evidence.NativeCrash, "7": evidence.NativeCrash, "4": evidence.NativeCrash, "8": evidence.NativeCrash, "6": evidence.NativeCrash,
	"9": evidence.Killed, "15": evidence.Killed, "2": evidence.Killed, "1": evidence.Killed, "3": evidence.Killed,
}

// genericExitKinds: an exit status tells a signal only as 128+N or -N; any
// other status (1, 2, 255) is the program's own and reads nothing.
var genericExitKinds = map[string]evidence.Kind{
	"139": evidence.NativeCrash, "135": evidence.NativeCrash, "132": evidence.NativeCrash, "136": evidence.NativeCrash, "134": evidence.NativeCrash,
	"137": evidence.Killed, "143": evidence.Killed, "130": evidence.Killed, "129": evidence.Killed, "131": evidence.Killed,
	"-11": evidence.NativeCrash, "-7": evidence.NativeCrash, "-4": evidence.NativeCrash, "-8": evidence.NativeCrash, "-6": evidence.NativeCrash,
	"-9": evidence.Killed, "-15": evidence.Killed, "-2": evidence.Killed, "-1": evidence.Killed, "-3": evidence.Killed,
}

// genericCues is the table, in precedence order. What a failure says about
// its cause comes first (memory, a build for another GPU, a bad access, a
// non-finite loss), then how the process ended (a crash signal, a kill), then
// what only says it stopped moving (hang, timeout), then an assert, and last
// an exception's name, the least telling: an explicit signal or exit status
// wins over a generic error line.
var genericCues = []genericCue{
	{name: "out-of-memory", lits: []string{"memory", "oom", "alloc"}, kind: evidence.HostOOM, gpu: evidence.GPUOOM,
		re:  regexp.MustCompile(`(?i)out[ _-]?of[ _-]?memory|\bOOM\b|\b(?:cannot|can't|could not|couldn't|unable to|failed to) allocate\b|\bmemory allocation failed|\bnot enough memory|\binsufficient memory|\bbad_alloc\b|\bMemoryError\b`),
		why: "out of memory, OOM, cannot/failed to allocate, bad_alloc: gpu_oom when the line names a GPU runtime, else host_oom"},
	{name: "arch-not-supported", lits: []string{"sm_", "gfx", "compute capability"}, kind: evidence.GPUArchMismatch,
		re:  regexp.MustCompile(`(?i)(?:not supported|unsupported|does not support|doesn't support|no kernel image|not compiled for|no binary for|cannot find|can't find|could not find|cannot read)\b.*\b(?:sm_\d{2,3}a?|gfx[0-9a-f]{3,4}|compute capability)\b|\b(?:sm_\d{2,3}a?|gfx[0-9a-f]{3,4}|compute capability)\b.*\b(?:not supported|unsupported|is not compatible|incompatible)\b`),
		why: "not supported / not compiled for / cannot find next to a GPU arch name (sm_NN, gfxNNNN, compute capability)"},
	{name: "gpu-page-fault", lits: []string{"fault"}, gpu: evidence.GPUPageFault,
		re:  regexp.MustCompile(`(?i)\b(?:page fault|mmu fault|memory access fault)\b`),
		why: "page fault, MMU fault, memory access fault on a line that names the GPU; without GPU context it reads nothing"},
	{name: "illegal-access", lits: []string{"illegal", "invalid", "misaligned"}, kind: evidence.NativeCrash, gpu: evidence.GPUIllegalMemoryAccess,
		re:  regexp.MustCompile(`(?i)\b(?:illegal|invalid) (?:memory )?(?:access|address)\b|\bmisaligned address\b|\binvalid (?:global|shared|local) (?:read|write)\b`),
		why: "illegal/invalid memory access or address, misaligned address: a GPU kernel's bad access when the line names a GPU runtime, else a native crash"},
	{name: "non-finite-loss", lits: []string{"nan", "inf", "finite"}, kind: evidence.NumericalNonfinite,
		// The nan/inf word must not end a hyphenated name: Megatron's timer
		// `optimizer-unscale-and-check-inf` is printed every iteration next to
		// `...-main-grad` timers. A sign before it (`loss: -inf`) is a value.
		re:  regexp.MustCompile(`(?i)\b(?:loss|grad\w*|weights?|norm)\b.{0,40}(?:[^\w-]|[^A-Za-z0-9]-)(?:nan|inf|infinity|non-?finite)\b|(?:^|[^\w-]|[^A-Za-z0-9]-)(?:nan|inf|non-?finite)\b.{0,40}\b(?:loss|grad\w*|gradients?|weights?)\b`),
		why: "nan/inf/non-finite next to loss, grad, gradient, weights or norm (a nan elsewhere is a metric, not a failure; `check-inf` ending a name is not a value)"},
	{name: "collective-failure", lits: []string{"nccl", "rccl", "gloo", "collective", "reduce", "gather", "processgroup"}, kind: evidence.CollectiveTimeout,
		re:  regexp.MustCompile(`(?i)(?:nccl|rccl|gloo|\bcollective|all_?reduce|all_?gather|reduce_?scatter|processgroup)\w*\b.*\b(?:timed out|timeout|failed|failure|error)\b`),
		why: "a collective library or operation (NCCL, RCCL, Gloo, all_reduce, ProcessGroup...) and a failure word after it on the line: ranked above the crash words because a collective's watchdog aborts the process (SIGABRT) after it"},
	{name: "crash-signal", lits: []string{"segment", "segfault", "violation", "0xc0000005", "core dumped", "illegal instruction", "bus error", "floating point", "stack smashing", "double free", "terminate called", "panic", "fatal signal"}, kind: evidence.NativeCrash,
		re:  regexp.MustCompile(`(?i)\bsegmentation fault\b|\bsegfault\b|\baccess violation\b|\b0xc0000005\b|\bcore dumped\b|\billegal instruction\b|\bbus error\b|\bfloating point exception\b|\bstack smashing detected\b|\bdouble free\b|\bterminate called after throwing\b|^\s*panic: |\bpanicked at\b|\bfatal signal\b`),
		why: "Segmentation fault, segfault, access violation (0xC0000005), core dumped, illegal instruction, bus error, floating point exception, stack smashing, double free, C++'s terminate, a Go or Rust panic"},
	{name: "signal", lits: []string{"sig"}, re: regexp.MustCompile(`\bSIG(SEGV|BUS|ILL|FPE|ABRT|KILL|TERM|INT|HUP|QUIT)\b|(?i:\bsignal:? (\d{1,2})\b)`), kinds: genericSignalKinds,
		why: "a signal by name or number (SIGSEGV/BUS/ILL/FPE/ABRT: native_crash; SIGKILL/TERM/INT/HUP/QUIT: killed)"},
	{name: "exit-status", lits: []string{"exit", "return"}, re: regexp.MustCompile(`(?i)\bexit(?:ed)?[ _]?(?:with )?(?:code|status)"?[\s:=]{0,4}(-?\d{1,3})\b|\breturn ?code[\s:=]{0,4}(-?\d{1,3})\b`), kinds: genericExitKinds,
		why: "an exit status 128+N or -N that tells a signal (137, 143, 139, 134, -9...)"},
	{name: "killed", lits: []string{"killed"}, kind: evidence.Killed,
		re:  regexp.MustCompile(`(?i)\bkilled\b`),
		why: "Killed (the shell's word for a SIGKILL, a scheduler's kill)"},
	{name: "hang", lits: []string{"hang", "hung", "stuck", "deadlock", "not responding", "timed out", "time out", "timeout", "deadline"}, kind: evidence.Hang, gpu: evidence.GPUHang, coll: evidence.CollectiveTimeout,
		re:  regexp.MustCompile(`(?i)\b(?:hang|hangs|hung|stuck|deadlock(?:ed)?|not responding)\b|\btimed out\b|\btime ?out (?:error|exceeded|expired|reached)\b|\bdeadline exceeded\b`),
		why: "hang, hung, stuck, deadlock, not responding, timed out, timeout exceeded: collective_timeout when the line names a collective (NCCL, RCCL, Gloo, all_reduce...), gpu_hang when it names the GPU"},
	{name: "device-assert", lits: []string{"block: ["}, kind: evidence.GPUDeviceAssert,
		re:  regexp.MustCompile(`\bblock: \[\d+, ?\d+, ?\d+\], thread: \[\d+, ?\d+, ?\d+\].*\bAssertion\b`),
		why: "an Assertion with a kernel's block and thread coordinates (the device assert's own format, whatever kernel printed it)"},
	{name: "assertion", lits: []string{"assert", "check failed"}, kind: evidence.NativeCrash, exc: evidence.PythonException,
		// glog's and absl's CHECK prints "Check failed: cond", capital and
		// colon: a "health check failed" is a probe's answer, not an assert.
		re:  regexp.MustCompile(`(?i:\bassertion\b.*\bfailed\b|\bassert(?:ion)? failed\b)|\bCheck failed: `),
		why: "Assertion ... failed, glog's `Check failed:`: an assert aborts the process; python_exception when the line says it was raised as an exception"},
	{name: "exception", lits: []string{"error", "exception", "traceback"}, kind: evidence.PythonException,
		re:  regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*(?:Error|Exception)\b(?::|$)|^\s*Traceback \(most recent call last\)`),
		why: "an exception's name (SomethingError:, SomethingException:) or a traceback's header"},
}

// genericNotFailure are lines whose failure word is not a failure: a count
// of none ("0 errors", "errors: 0", a cgroup's "oom 0"), an option or a
// config echo ("--oom-score-adj", "timeout=1800"), advice or a hedge ("to
// avoid deadlocks", "Hint: ...", "typically means"), a line logged at
// INFO/DEBUG/TRACE level, an allocation of resources that are not memory.
var genericNotFailure = []struct {
	lits []string // a cheap test first: the line has one of these (lower case), or lits is nil
	re   *regexp.Regexp
}{
	{[]string{"no ", "0", "zero", "without"}, regexp.MustCompile(`(?i)\b(?:no|0|zero|without) (?:errors?|failures?|faults?)\b|\b(?:errors?|failures?|faults?|oom\w*|kill\w*|timeouts?)\W{0,3}0\b`)},
	{[]string{"avoid", "prevent", "may", "might", "could", "possib", "potential", "if"}, regexp.MustCompile(`(?i)\b(?:avoid|prevent|may|might|could|possible|potential(?:ly)?|if)\b.{0,20}\b(?:hangs?|deadlocks?|oom|out of memory)\b`)},
	{[]string{"oom", "timeout", "kill"}, regexp.MustCompile(`(?i)(?:^|\s)--?[\w-]*(?:oom|timeout|kill)[\w-]*|\b\w*(?:oom|timeout|kill)\w*\s*[=:]\s*\d`)},
	{[]string{"hint", "tip", "note", "typically", "usually"}, regexp.MustCompile(`(?i)^\W*(?:hint|tip|note)\b|\b(?:typically|usually)\b`)},
	{[]string{"info", "debug", "trace"}, regexp.MustCompile(`(?i)^.{0,80}?(?:\b|level=)(?:INFO|DEBUG|TRACE)\b`)},
	{nil, regexp.MustCompile(`^\W{0,3}I\d{4}\b`)},
	// Resources that are not memory: HSA's OUT_OF_RESOURCES text ("failed to
	// allocate the necessary resources ... spawn threads or create internal
	// OS-specific events"), which rocminfo prints when it cannot open /dev/kfd.
	{[]string{"resources"}, regexp.MustCompile(`(?i)\ballocate (?:the )?(?:necessary |required )?resources\b`)},
}

// genericSent: a signal being sent, not received. A launcher stopping its own
// workers (torchrun's "Sending process N closing signal SIGTERM") says the
// run was stopped, not why: it does so after a worker failed, and also as its
// own cleanup at the end of a run. Its cue reads only when another cue in the
// log says something failed.
var genericSent = regexp.MustCompile(`(?i)\bsend(?:s|ing)?\b.{0,40}\bsignal\b|\bsend(?:s|ing)? (?:a )?SIG[A-Z]+\b`)

const detailGenericSent = "generic_sent" // the cue's line sends the signal

func genericIsNotFailure(line, lower string) bool {
	for _, n := range genericNotFailure {
		if (n.lits == nil || hasAny(lower, n.lits)) && n.re.MatchString(line) {
			return true
		}
	}
	return false
}

// genericGPUContext: the line names a GPU runtime or device.
var genericGPUContext = regexp.MustCompile(`(?i)cuda|\bhip|gpu|vram|rocm|cudnn|cublas|miopen|rocblas|\bdevice\b|\bgfx\d|\bsm_\d`)

// genericCollContext: the line names a collective library or operation.
var genericCollContext = regexp.MustCompile(`(?i)nccl|rccl|gloo|\bcollective|all_?reduce|all_?gather|reduce_?scatter|\bbarrier\b|processgroup`)

// genericExcContext: the line names an exception (the failure was raised as one).
var genericExcContext = regexp.MustCompile(`(?i)\bexception\b|[a-z]Error\b`)

// genericFinite: a loss or gradient with a finite value. A later such line
// means a non-finite one before it was a skipped step, not the failure.
var genericFinite = regexp.MustCompile(`(?i)\b(?:loss|grad\w*)\b\W{0,3}[-+]?\d`)

// genericHandled: the program says it handled the failure (retried, fell
// back, recovered); a cue on this line or the two before it is no failure.
var genericHandled = regexp.MustCompile(`(?i)\bretr(?:y|ying|ied|act\w*)\b|\bfall(?:ing)? ?back\b|\brecovered\b|\btry(?:ing)? again\b`)

// Cheap tests before the regexps, for a log of millions of lines.
var (
	genericGPULits     = []string{"cuda", "hip", "gpu", "vram", "rocm", "cudnn", "cublas", "miopen", "rocblas", "device", "gfx", "sm_"}
	genericHandledLits = []string{"retr", "fall", "recovered", "again"}
	genericFiniteLits  = []string{"loss", "grad"}
)

// litPairs holds, for each lit of a list, each of its byte pairs in every
// case: a line whose pair table (lsBigrams, ASCII) lacks one of a lit's
// pairs cannot hold the lit in any case, so the lower-cased line is searched
// only for lists that may match. The scanner fills that table for each line
// anyway; searching every line for every cue's words was most of what the
// cues cost.
type litPairs [][][]uint16 // lit, its pairs, each pair's case variants

func newLitPairs(lits []string) litPairs {
	out := make(litPairs, 0, len(lits))
	for _, l := range lits {
		var pairs [][]uint16
		for i := 0; i+1 < len(l); i++ {
			var v []uint16
			for _, a := range caseVariants(l[i]) {
				for _, b := range caseVariants(l[i+1]) {
					v = append(v, uint16(a)<<8|uint16(b))
				}
			}
			pairs = append(pairs, v)
		}
		out = append(out, pairs)
	}
	return out
}

func caseVariants(c byte) []byte {
	if c >= 'a' && c <= 'z' {
		return []byte{c, c - 'a' + 'A'}
	}
	return []byte{c}
}

// may reports whether a line with pair table bg may hold one of the lits.
func (lp litPairs) may(bg *lsBigrams) bool {
	for _, pairs := range lp {
		if allPairs(bg, pairs) {
			return true
		}
	}
	return false
}

func allPairs(bg *lsBigrams, pairs [][]uint16) bool {
	for _, v := range pairs {
		found := false
		for _, p := range v {
			if bg.has(p) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// genericPairGate turns the pair tables' test on (tests compare the cues
// found with and without it).
var genericPairGate = true

var (
	genericCuePairs = func() []litPairs {
		out := make([]litPairs, len(genericCues))
		for i := range genericCues {
			out[i] = newLitPairs(genericCues[i].lits)
		}
		return out
	}()
	genericHandledPairs = newLitPairs(genericHandledLits)
	genericFinitePairs  = newLitPairs(genericFiniteLits)
)

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func hasAny(lower string, lits []string) bool {
	for _, l := range lits {
		if strings.Contains(lower, l) {
			return true
		}
	}
	return false
}

// read is the kind a line's cue reads (false: none), given whether a GPU
// runtime is named near it.
func (g *genericCue) read(line, raw string, gpuNear func() bool) (evidence.Kind, bool) {
	if g.kinds == nil && !g.re.MatchString(line) {
		return "", false
	}
	if g.kinds != nil {
		m := g.re.FindStringSubmatch(line)
		if m == nil {
			return "", false
		}
		for _, v := range m[1:] {
			if v != "" {
				k, ok := g.kinds[strings.ToUpper(v)]
				return k, ok
			}
		}
		return "", false
	}
	// The context may be in the line's prefix (a glog header's source file).
	if g.exc != "" && genericExcContext.MatchString(raw) {
		return g.exc, true
	}
	if g.coll != "" && genericCollContext.MatchString(raw) {
		return g.coll, true
	}
	if g.gpu != "" && gpuNear() {
		return g.gpu, true
	}
	return g.kind, g.kind != ""
}

// genericState is what the scanner remembers for the fallback: per cue, the
// last line that carried it.
type genericState struct {
	last []*evidence.Finding
	// causeList: the last line opened a list of possible causes, which its
	// wrapped rest continues.
	causeList bool
	// The two lines before, for a GPU named near a cue: looked at only
	// when a cue needs them.
	prevRaw [2]string
	prevNo  [2]int
}

func genericGPULine(raw string) bool {
	return hasAny(strings.ToLower(raw), genericGPULits) && genericGPUContext.MatchString(raw)
}

// genericNear is how many lines apart a GPU's name, or a "retrying", still
// counts as the same event's.
const genericNear = 2

// note looks for the first cue (by precedence) on one line.
func (g *genericState) note(st *scanState, li *lineInfo) {
	// Lower-casing can turn a non-ASCII letter into an ASCII one (the
	// Kelvin sign into k), which the pair table would not show: such a
	// line is searched in full.
	gate := genericPairGate && isASCII(li.content)
	may := func(lp litPairs) bool { return !gate || lp.may(st.bg) }
	var lower string
	lowered := false
	lowerLine := func() string {
		if !lowered {
			lower, lowered = strings.ToLower(li.content), true
		}
		return lower
	}
	defer func() {
		g.prevRaw[0], g.prevNo[0] = g.prevRaw[1], g.prevNo[1]
		g.prevRaw[1], g.prevNo[1] = li.raw, li.no
	}()
	text := g.causeListText(li, may, lowerLine) // not a list of possible causes
	gpuLine := -1                               // not looked at yet
	isGPU := func() bool {
		if gpuLine < 0 {
			gpuLine = 0
			if genericGPULine(li.raw) {
				gpuLine = 1
			}
		}
		return gpuLine == 1
	}
	for i, f := range g.last { // a cue just before, whose GPU this line names
		if f != nil && genericCues[i].gpu != "" && li.no-f.Line <= genericNear && f.Details.Text(detailGenericKind) == string(genericCues[i].kind) && isGPU() {
			f.Details[detailGenericKind] = string(genericCues[i].gpu)
		}
	}
	if i := genericNonfinite; g.last != nil && g.last[i] != nil && may(genericFinitePairs) && hasAny(lowerLine(), genericFiniteLits) && genericFinite.MatchString(li.content) && !genericCues[i].re.MatchString(li.content) {
		g.last[i] = nil // finite again: the non-finite step was skipped
	}
	if may(genericHandledPairs) && hasAny(lowerLine(), genericHandledLits) && genericHandled.MatchString(li.content) {
		for i, f := range g.last {
			if f != nil && li.no-f.Line <= genericNear {
				g.last[i] = nil
			}
		}
		return
	}
	gpuNear := func() bool {
		if isGPU() {
			return true
		}
		for j, raw := range g.prevRaw {
			if g.prevNo[j] > 0 && li.no-g.prevNo[j] <= genericNear && genericGPULine(raw) {
				return true
			}
		}
		return false
	}
	for i := range genericCues {
		if !may(genericCuePairs[i]) || !hasAny(lowerLine(), genericCues[i].lits) {
			continue
		}
		k, ok := genericCues[i].read(text, li.raw, gpuNear)
		if !ok {
			continue
		}
		if genericIsNotFailure(li.content, lowerLine()) {
			return
		}
		if g.last == nil {
			g.last = make([]*evidence.Finding, len(genericCues))
		}
		f := st.newFinding(li, evidence.Unknown, 0)
		f.Details[detailGenericCue] = genericCues[i].name
		f.Details[detailGenericKind] = string(k)
		// A terminal's hard wrap may have cut the words that say it is sent
		// ("Sending process N closing sign|al SIGHUP"); a previous line that
		// says so whole is a line of its own, not this one's first half.
		if strings.Contains(lower, "send") && genericSent.MatchString(li.content) || li.wrapPrev != "" && !genericSent.MatchString(li.wrapPrev) && genericSent.MatchString(li.wrapPrev+li.content) {
			f.Details[detailGenericSent] = true
		}
		g.last[i] = &f
		return
	}
}

// findings are the cues' last lines, one finding per cue found.
func (g *genericState) findings() []evidence.Finding {
	var out []evidence.Finding
	for _, f := range g.last {
		if f != nil {
			out = append(out, *f)
		}
	}
	return out
}

// ScanLogWithCues is ScanLog plus the generic fallback's cues (findings of
// kind unknown marked generic_cue, which no rule reads): what Decide needs
// for a log no rule may know. ScanLog's own findings are the same.
func ScanLogWithCues(r io.Reader, file string) ([]evidence.Finding, error) {
	return lsCurrentScanner().scan(r, file, &genericState{})
}

var genericNonfinite = genericCueIndex("non-finite-loss")

func genericCueIndex(name string) int {
	for i := range genericCues {
		if genericCues[i].name == name {
			return i
		}
	}
	panic("no generic cue " + name)
}

func isGenericCue(f evidence.Finding) bool {
	_, ok := f.Details[detailGenericCue]
	return ok
}

// genericReading is the fallback's reading of the cues newFacts set aside:
// the cue of highest precedence, read as a rule of low confidence.
func (x *facts) genericReading() (rule, []*cf) {
	read := map[string]bool{} // lines a rule's finding came from: read, and set aside
	for _, c := range x.all {
		if !c.synth && c.f.Source == evidence.SourceLog {
			read[fmt.Sprintf("%s:%d", c.f.File, c.f.Line)] = true
		}
	}
	var best *cf
	bestAt := len(genericCues)
	for _, c := range x.generic {
		if read[fmt.Sprintf("%s:%d", c.f.File, c.f.Line)] {
			continue
		}
		name := c.f.Details.Text(detailGenericCue)
		for i := range genericCues {
			if genericCues[i].name == name && i < bestAt {
				best, bestAt = c, i
			}
		}
	}
	if best == nil || best.f.Details.Bool(detailGenericSent) && !x.otherCue(best, read) {
		return rule{}, nil
	}
	k := evidence.Kind(best.f.Details.Text(detailGenericKind))
	best.kind, best.f.Kind, best.w = k, k, wCause
	best.order = len(x.all)
	x.all = append(x.all, best)
	x.vendor = x.guessVendor()
	return rule{kind: k, confidence: Low, when: "generic fallback: " + genericCues[bestAt].why}, []*cf{best}
}

// genericSummary says that the verdict rests on generic wording, and quotes it.
func genericSummary(k evidence.Kind, c *cf) string {
	where := ""
	if c.f.File != "" {
		where = fmt.Sprintf(" (%s:%d)", path.Base(c.f.File), c.f.Line)
	}
	return fmt.Sprintf("%s, read from generic failure wording only (no rule knows this log's family), so confidence is low: %q%s",
		kindPhrase(k), lsClip(strings.TrimSpace(c.f.Text), 200), where)
}

// kindPhrase names a kind for the generic summary.
func kindPhrase(k evidence.Kind) string {
	switch k {
	case evidence.HostOOM:
		return "Host out of memory"
	case evidence.GPUOOM:
		return "GPU out of memory"
	case evidence.GPUArchMismatch:
		return "The program was not built for this GPU"
	case evidence.GPUPageFault:
		return "GPU page fault"
	case evidence.GPUIllegalMemoryAccess:
		return "GPU illegal memory access"
	case evidence.NumericalNonfinite:
		return "Non-finite values (NaN/Inf) in training"
	case evidence.NativeCrash:
		return "Native crash"
	case evidence.Killed:
		return "Killed by a signal"
	case evidence.Hang:
		return "Hang"
	case evidence.GPUHang:
		return "GPU hang"
	case evidence.PythonException:
		return "Uncaught exception"
	case evidence.CollectiveTimeout:
		return "A collective (NCCL/RCCL/Gloo) failed or timed out"
	case evidence.GPUDeviceAssert:
		return "A GPU kernel's device-side assert"
	}
	return string(k)
}

// otherCue: a cue other than c, on a line no rule read and not itself a
// signal being sent, says something failed.
func (x *facts) otherCue(c *cf, read map[string]bool) bool {
	for _, o := range x.generic {
		if o != c && !read[fmt.Sprintf("%s:%d", o.f.File, o.f.Line)] && !o.f.Details.Bool(detailGenericSent) {
			return true
		}
	}
	return false
}
