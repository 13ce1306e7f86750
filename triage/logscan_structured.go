package triage

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Multi-line evidence is parsed here, in code, because no single-line pattern
// can tell which exception ends which traceback, or which frames belong to the
// crashing thread. Each parser keeps its state per stream, so that the
// interleaved output of two processes (vLLM's `(APIServer pid=1)` and
// `(EngineCore pid=374)`) yields two clean tracebacks.

const (
	tbMaxFrames     = 8   // innermost traceback frames remembered
	tbMaxShown      = 5   // frames put into a finding
	tbMaxJunk       = 2   // foreign lines tolerated inside a traceback
	lsMaxAssertList = 16  // threads/blocks listed for an assert burst
	lsMaxFaultLines = 500 // faulthandler dump lines read before giving up
)

var (
	tbHeaderRe = regexp.MustCompile(`Traceback \(most recent call last\):\s*$`)
	// Python tracebacks print `line N, in func`; faulthandler prints `line N in func`.
	tbFrameRe = regexp.MustCompile(`^\s*File "([^"]+)", line (\d+), in (.+?)\s*$`)
	// tbPrefixedFrameRe: a frame behind a prefix that no prefix rule strips
	// (pdsh's `host:`, DeepSpeed's `worker-5: [rank22]:`), ending in `:` or `]`.
	tbPrefixedFrameRe = regexp.MustCompile(`^(\S[^"]*?[:\]])\s+File "([^"]+)", line (\d+), in (.+?)\s*$`)
	fhFrameRe         = regexp.MustCompile(`^\s*File "([^"]+)", line (\d+) in (.+?)\s*$`)
	excLineRe         = regexp.MustCompile(`^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:(:) ?(.*))?$`)
	excNameRe         = regexp.MustCompile(`(?:Error|Exception|Exit|Interrupt|Warning|Iteration|Failure|Fault|Timeout|Resources|Abort|Aborted)$`)

	fatalPyRe  = regexp.MustCompile(fatalPyLit + `(.+?)\s*$`)
	fhThreadRe = regexp.MustCompile(`^(Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):`)
	// fhThreadAnyRe finds a thread's header anywhere on a line (in bold, in
	// a paste that lost its newlines).
	fhThreadAnyRe = regexp.MustCompile(`(?:^|\W|\\n)(?:Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):`)
	fhStackRe     = regexp.MustCompile(`^(?:Stack|Current thread's C stack trace) \(most recent call first\):`)
	fhTrailingRe  = regexp.MustCompile(`^(?:Extension modules:|\(total: \d+\))`)

	// CUDA: `File.cu:93: operator(): block: [0,0,0], thread: [28,0,0] Assertion `cond` failed.`
	// HIP:  `File.hip:93: operator(): Device-side assertion `cond' failed.`
	assertRe = regexp.MustCompile("^(\\S.*?):(\\d+): (.*?): (?:block: \\[(\\d+,\\d+,\\d+)\\], thread: \\[(\\d+,\\d+,\\d+)\\] )?(?:Device-side )?[Aa]ssertion [`'](.*)[`'] failed\\.?\\s*$")
	// Older CUDA toolkits (PyTorch's THC era, `THCTensorIndex.cu:218: block:
	// [0,0,0], thread: [106,0,0] Assertion ... failed.`) print no function;
	// the block and thread then tell it from a host assert. Same groups, the
	// function's empty.
	assertNoFuncRe = regexp.MustCompile("^(\\S.*?):(\\d+): ()block: \\[(\\d+,\\d+,\\d+)\\], thread: \\[(\\d+,\\d+,\\d+)\\] [Aa]ssertion [`'](.*)[`'] failed\\.?\\s*$")
)

type tbFrame struct {
	file string
	line int
	fn   string
	no   int    // line of the log
	raw  string // the frame's log line, for a truncated traceback
}

func (f tbFrame) String() string { return fmt.Sprintf("%s:%d in %s", f.file, f.line, f.fn) }

type tracebackState struct {
	active    bool
	header    bool
	context   string
	start     int
	frames    []tbFrame // the innermost frames, oldest first
	nframes   int
	junk      int
	lastFrame bool   // the last line read belonged to the traceback
	parallel  string // SGLang's `TP0` from the header line; the frames carry no prefix
	prefix    string // what the frames carry before `File "` that no prefix rule strips (a pdsh host)
	headerRaw string // the header's log line, for a traceback cut right after it
	ctrlC     bool   // the header follows a terminal's `^C` echo (verdict_families16.go)
}

type faultHandlerState struct {
	f          evidence.Finding
	inCurrent  bool
	sawCurrent bool
	// currentHeader: a thread's header said "Current thread"; extModules:
	// the dump ended with the fatal handler's "Extension modules:" list.
	// Either proves a headerless dump was not dump_traceback_later's
	// watchdog (see finishFaultHandler).
	currentHeader bool
	extModules    bool
	frames        []tbFrame
	threads       int
	lines         int
}

func (st *scanState) structured(ss *streamState, li *lineInfo) {
	if ss.fh != nil {
		if st.feedFaultHandler(ss, li) {
			return
		}
	}
	c := li.content
	if m := lsFind(fatalPyRe, c, fatalPyLit); m != nil {
		st.finishFaultHandler(ss)
		f := st.newFinding(li, evidence.NativeCrash, 0)
		f.Details.SetText(detail.Signature, "python-faulthandler")
		f.Details.SetText(detail.Message, m[1])
		if sig := lsSignalName(m[1]); strings.HasPrefix(sig, "SIG") {
			f.Details.SetText(detail.Signal, sig)
		}
		ss.fh = &faultHandlerState{f: f}
		return
	}
	if m := lsFind(winFatalRe, c, winFatalLit); m != nil {
		// faulthandler on Windows: its header for a crash, the dump follows.
		st.finishFaultHandler(ss)
		f := st.newFinding(li, evidence.NativeCrash, 0)
		f.Details.SetText(detail.Signature, "python-faulthandler")
		f.Details.SetText(detail.Message, winFatalLit+m[1])
		f.Details.SetText("os", "windows")
		if nt := winFatalCode[m[1]]; nt != "" {
			f.Details.SetText("ntstatus", nt)
		} else if strings.HasPrefix(m[1], "code ") {
			f.Details.SetText("ntstatus", strings.ToLower(strings.TrimPrefix(m[1], "code ")))
		}
		ss.fh = &faultHandlerState{f: f}
		return
	}
	if strings.Contains(c, "(most recent call first):") && fhThreadAnyRe.MatchString(c) {
		// faulthandler's thread dump with no fatal error above it
		// (dump_traceback, a registered signal, dump_traceback_later's
		// watchdog): the stacks were asked for, most often because the
		// program was stuck.
		f := st.newFinding(li, evidence.Hang, 0)
		f.Details.SetText(detail.Signature, threadDumpSig)
		ss.fh = &faultHandlerState{f: f}
		st.feedFaultHandler(ss, li)
		return
	}
	if strings.Contains(c, "ssertion ") {
		m := assertRe.FindStringSubmatch(c)
		if m == nil {
			m = assertNoFuncRe.FindStringSubmatch(c)
		}
		if m != nil {
			st.addAssert(li, m)
			return
		}
	}
	st.feedTraceback(ss, li)
}

// The signatures of a faulthandler dump with no "Fatal Python error" line
// above it: a thread dump that may be a hang's (the watchdog's: only "Thread
// 0x…" headers), and one that the text shows is a fatal error's.
const (
	threadDumpSig          = "python-thread-dump"
	headerlessFatalDumpSig = "python-faulthandler-headerless"
)

// faulthandler on Windows writes "Windows fatal exception: NAME" (no "Fatal
// Python error") for the exceptions it names, "code 0x..." for the others.
// Only crashes are read: C++ exceptions (0xe06d7363) and other codes pass
// through its handler even when the program catches them.
const winFatalLit = "Windows fatal exception: "

var (
	winFatalRe   = regexp.MustCompile(winFatalLit + `(access violation|stack overflow|page error|int divide by zero|code 0x[cC]0000(?:409|005|01[dD]|374|0[fF][dD]))\b`)
	winFatalCode = map[string]string{"access violation": "0xc0000005", "stack overflow": "0xc00000fd"}
)

// fatalPyLit starts faulthandler's report, wherever it lands on a line: glued
// to a progress bar that had no newline, it is still the report.
const fatalPyLit = "Fatal Python error: "

// ---- device-side assert bursts -------------------------------------------------------

func (st *scanState) addAssert(li *lineInfo, m []string) {
	f := st.newFinding(li, evidence.GPUDeviceAssert, 0)
	f.Details.SetText(detail.Signature, "device-assert-line")
	f.Details.SetText(detail.AssertFile, lsClip(m[1], lsMaxKeptLine))
	n, _ := strconv.ParseInt(m[2], 10, 64)
	f.Details["assert_line"] = n
	f.Details.SetText(detail.Function, lsClip(m[3], 300))
	f.Details.SetText(detail.Assertion, lsClip(m[6], 300))
	f.Details["count"] = int64(1)
	if m[4] != "" {
		f.Details["block"] = "[" + m[4] + "]"
		f.Details["blocks"] = []string{"[" + m[4] + "]"}
		f.Details["threads"] = []string{"[" + m[5] + "]"}
	}
	// Every failing GPU thread prints its own line: one finding per assert
	// site, listing the threads, is what a reader needs.
	key := "assert:" + lsClip(m[1], lsMaxKeptLine) + ":" + m[2] + ":" + lsClip(m[6], 300)
	for _, o := range st.open {
		if o.stream == li.stream && o.mergeKey == key && li.no <= o.until+lsMergeWindow {
			o.f.Details["count"] = o.f.Details["count"].(int64) + 1
			if m[4] != "" {
				o.f.Details["blocks"] = lsAppendUnique(o.f.Details["blocks"], "["+m[4]+"]")
				o.f.Details["threads"] = lsAppendUnique(o.f.Details["threads"], "["+m[5]+"]")
			}
			o.until = li.no + lsMergeWindow
			return
		}
	}
	st.keepOpen(&openFinding{f: f, stream: li.stream, mergeKey: key, until: li.no + lsMergeWindow})
}

func lsAppendUnique(v any, s string) []string {
	l, _ := v.([]string)
	for _, x := range l {
		if x == s {
			return l
		}
	}
	if len(l) >= lsMaxAssertList {
		return l
	}
	return append(l, s)
}

// ---- faulthandler dumps ----------------------------------------------------------------

// feedFaultHandler reads one line of a faulthandler dump; false means the dump
// has ended and the line belongs to someone else.
func (st *scanState) feedFaultHandler(ss *streamState, li *lineInfo) bool {
	fh := ss.fh
	fh.lines++
	c := li.content
	t := strings.TrimSpace(c)
	switch {
	case fh.lines > lsMaxFaultLines:
		st.finishFaultHandler(ss)
		return false
	case fhThreadRe.MatchString(t):
		m := fhThreadRe.FindStringSubmatch(t)
		fh.threads++
		fh.inCurrent = m[1] == "Current thread"
		if fh.inCurrent {
			fh.sawCurrent, fh.currentHeader = true, true
			fh.f.Details["thread"] = m[2]
		}
		return true
	case fhStackRe.MatchString(t):
		if !fh.sawCurrent {
			fh.inCurrent, fh.sawCurrent = true, true
		}
		return true
	case fhFrameRe.MatchString(c):
		if fh.inCurrent && len(fh.frames) < tbMaxShown {
			m := fhFrameRe.FindStringSubmatch(c)
			n, _ := strconv.Atoi(m[2])
			fh.frames = append(fh.frames, tbFrame{file: lsClip(m[1], lsMaxKeptLine), line: n, fn: lsClip(m[3], 200), no: li.no})
		}
		return true
	case t == "":
		if fh.sawCurrent && len(fh.frames) > 0 {
			st.finishFaultHandler(ss)
		}
		return true
	case fhTrailingRe.MatchString(t):
		fh.extModules = strings.HasPrefix(t, "Extension modules:")
		st.finishFaultHandler(ss)
		return true
	case t == "<no Python tbFrame>" || strings.HasPrefix(c, " ") || strings.HasPrefix(c, "\t"):
		return true
	}
	st.finishFaultHandler(ss)
	return false
}

func (st *scanState) finishFaultHandler(ss *streamState) {
	fh := ss.fh
	if fh == nil {
		return
	}
	ss.fh = nil
	f := fh.f
	if f.Details.Text(detail.Signature) == threadDumpSig && (fh.currentHeader || fh.extModules) {
		// CPython writes "Current thread 0x…" only when the thread doing the
		// dump is a Python thread: the fatal-error handler (on the thread
		// the signal hit), a register()ed signal, dump_traceback(). The one
		// dumper made for hangs, dump_traceback_later's watchdog, runs on a
		// C thread and passes no current thread (3.6 on), so it never
		// writes it; nor does it end with "Extension modules:", which only
		// the fatal handler prints. Of the dumpers left only the fatal
		// handler is on by default (faulthandler.enable(),
		// PYTHONFAULTHANDLER, torchelastic's workers): a dump like this
		// with its header missing is a crash whose "Fatal Python error"
		// line the paste or the log's cut lost.
		f.Kind = evidence.NativeCrash
		f.Details.SetText(detail.Signature, headerlessFatalDumpSig)
	}
	if fh.threads > 0 {
		f.Details.SetInt(detail.ThreadsDumped, int64(fh.threads))
	}
	// faulthandler prints the most recent call first: frames[0] is innermost.
	if len(fh.frames) > 0 {
		in := fh.frames[0]
		f.Details.SetText(detail.FrameFile, in.file)
		f.Details["frame_line"] = int64(in.line)
		f.Details.SetText(detail.FrameFunc, in.fn)
		var fs []string
		for _, x := range fh.frames {
			fs = append(fs, x.String())
		}
		f.Details["frames"] = fs
	}
	st.keepOpen(&openFinding{f: f, stream: ss.key, mergeKey: fmt.Sprintf("fh:%d", f.Line), until: f.Line})
}

// ---- Python tracebacks ----------------------------------------------------------------

func (st *scanState) feedTraceback(ss *streamState, li *lineInfo) {
	tb := &ss.tb
	c := li.content
	var loc []int
	if strings.Contains(c, "Traceback (most") {
		loc = tbHeaderRe.FindStringIndex(c)
	}
	if loc != nil {
		ctx := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(c[:loc[0]]), ":"))
		if ctx == "" && ss.prev != "" && ss.prevNo >= li.no-2 && !tb.active {
			ctx = strings.TrimSpace(ss.prev)
		}
		*tb = tracebackState{active: true, header: true, context: lsClip(ctx, 200), start: li.no, lastFrame: true, parallel: li.labels.parallel, headerRaw: lsClip(li.raw, lsMaxKeptLine), ctrlC: ctrlCEcho(ctx)}
		return
	}
	m, prefix := lsFind(tbFrameRe, c, `File "`), ""
	if m == nil && strings.Contains(c, `File "`) {
		if pm := tbPrefixedFrameRe.FindStringSubmatch(c); pm != nil {
			m, prefix = append([]string{pm[0]}, pm[2:]...), pm[1]
		}
	}
	if m != nil {
		if !tb.active {
			// Ring buffers and pasted excerpts often begin mid-traceback.
			*tb = tracebackState{active: true, start: li.no}
		}
		n, _ := strconv.Atoi(m[2])
		tb.frames = append(tb.frames, tbFrame{file: lsClip(m[1], lsMaxKeptLine), line: n, fn: lsClip(m[3], 200), no: li.no, raw: lsClip(li.raw, lsMaxKeptLine)})
		if len(tb.frames) > tbMaxFrames {
			tb.frames = tb.frames[1:]
		}
		tb.nframes++
		tb.lastFrame, tb.junk = true, 0
		tb.prefix = prefix
		return
	}
	if !tb.active {
		return
	}
	if c != "" && (c[0] == ' ' || c[0] == '\t') || tb.sourceBehindPrefix(c) {
		tb.lastFrame = true // source line or caret marks under a frame
		return
	}
	if tb.prefix != "" {
		c = strings.TrimSpace(strings.TrimPrefix(c, tb.prefix))
	}
	if m := excLineRe.FindStringSubmatch(strings.TrimRight(c, " ")); m != nil && tb.nframes > 0 && lsIsExceptionName(m[1], m[2] != "") {
		st.emitTraceback(ss, li, m[1], m[3])
		return
	}
	// Someone else's line inside the traceback (another thread, a progress
	// bar). A blank one (a paste's or a prefixed stream's trailing line) does
	// not end a traceback that ran to the end.
	if strings.TrimSpace(c) != "" {
		tb.lastFrame = false
	}
	tb.junk++
	if tb.junk > tbMaxJunk {
		*tb = tracebackState{}
	}
}

// sourceBehindPrefix: a frame's source line behind the prefix its frames
// carry (`host:     code`); the line after the prefix is indented at least
// two columns, as Python indents it, so the same host's own log lines are not
// taken for the traceback's.
func (tb *tracebackState) sourceBehindPrefix(c string) bool {
	rest, ok := strings.CutPrefix(c, tb.prefix)
	return ok && tb.prefix != "" && len(rest) > 2 && (rest[0] == ' ' || rest[0] == '\t') && (rest[1] == ' ' || rest[1] == '\t')
}

func lsIsExceptionName(name string, colon bool) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" || last[0] < 'A' || last[0] > 'Z' || strings.ToUpper(last) == last {
		return false // `ERROR:`, `Message:` and other capitalised words that are no exception
	}
	if excNameRe.MatchString(last) {
		return true
	}
	return colon && strings.Contains(name, ".")
}

func (st *scanState) emitTraceback(ss *streamState, li *lineInfo, exc, msg string) {
	tb := ss.tb
	ss.tb = tracebackState{}
	d := evidence.Details{}
	d.SetText(detail.Exception, exc)
	if msg = strings.TrimSpace(msg); msg != "" {
		d.SetText(detail.Message, lsClip(msg, 300))
	}
	tb.describe(d)
	if o := st.findOpen(li.stream, li.no); o != nil {
		// The exception line also matched a signature (a CUDA error, an OOM):
		// one finding of the signature's kind, enriched with where it was raised.
		for k, v := range d {
			lsSetDetailAny(&o.f, k, v)
		}
		if tb.ctrlC {
			ctrlCTraceback(&o.f)
		}
		return
	}
	f := st.newFinding(li, evidence.PythonException, 0)
	f.Details.SetText(detail.Signature, "python-traceback")
	for k, v := range d {
		f.Details[k] = v
	}
	if tb.ctrlC {
		ctrlCTraceback(&f)
	}
	st.keepOpen(&openFinding{f: f, stream: li.stream, mergeKey: fmt.Sprintf("tb:%d", li.no), until: li.no})
}

func (tb *tracebackState) describe(d evidence.Details) {
	if tb.context != "" {
		d["context"] = tb.context
		// SGLang's scheduler logs its fatal exception this way before the
		// parent gets sigquit: the exception is the child's failure.
		if strings.Contains(tb.context, "Scheduler hit an exception") {
			d["framework"], d["component"] = "sglang", "scheduler"
		}
	}
	if tb.header {
		d["traceback_line"] = int64(tb.start)
	}
	if tb.parallel != "" {
		d["parallel_rank"] = tb.parallel
	}
	if n := len(tb.frames); n > 0 {
		in := tb.frames[n-1]
		d.SetText(detail.FrameFile, in.file)
		d["frame_line"] = int64(in.line)
		d.SetText(detail.FrameFunc, in.fn)
		var fs []string
		for i := n - 1; i >= 0 && len(fs) < tbMaxShown; i-- {
			fs = append(fs, tb.frames[i].String())
		}
		d["frames"] = fs
	}
}

// finishTraceback ends a stream's traceback at the end of input. The output
// often stops inside one (the process was killed while printing, a ring
// buffer was cut), so a traceback that was still going is kept, marked
// truncated, when it is clearly one.
func (st *scanState) finishTraceback(ss *streamState, eof bool) {
	tb := ss.tb
	ss.tb = tracebackState{}
	if !eof || !tb.active || !tb.lastFrame || (!tb.header && tb.nframes < 3) {
		return
	}
	// A header with nothing after it to the end of its stream is a
	// traceback cut right after it (the paste or the log ends there).
	no, raw := tb.start, tb.headerRaw
	if n := len(tb.frames); n > 0 {
		no, raw = tb.frames[n-1].no, tb.frames[n-1].raw
	}
	content, labels := lsStripPrefixes(raw)
	li := &lineInfo{no: no, raw: raw, content: content, stream: ss.key, labels: labels}
	f := st.newFinding(li, evidence.PythonException, 0)
	f.Details.SetText(detail.Signature, "python-traceback")
	f.Details.SetBool(detail.Truncated, true)
	tb.describe(f.Details)
	if tb.ctrlC {
		ctrlCTraceback(&f)
	}
	st.keepOpen(&openFinding{f: f, stream: ss.key, mergeKey: fmt.Sprintf("tb:%d", no), until: no})
}

func lsClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// lsFind runs re only on lines holding lit, which every match contains: most
// lines are ordinary output, and a substring test is much cheaper.
func lsFind(re *regexp.Regexp, s, lit string) []string {
	if !strings.Contains(s, lit) {
		return nil
	}
	return re.FindStringSubmatch(s)
}
