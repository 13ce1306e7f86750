package triage

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Families read for heldout16's misses (issue 25): ggml's abort message, a
// Go runtime dump that ends its stream without its header, and gdb's stacks
// of a live process whose threads all wait.

// ---- ggml's abort ---------------------------------------------------------------------

// ggmlAbortRe: ggml_abort (GGML_ABORT, and GGML_ASSERT through it) prints
// `FILE:LINE: MESSAGE` on a line of its own before it prints the stack and
// calls abort(): `.../ggml/src/ggml-backend.cpp:1623: ggml_backend_sched_alloc_splits:
// unexpected graph reallocation ...`, `C:\...\ggml\src\ggml-impl.h:319: fatal error`.
// The file is one of ggml's own (a `ggml` in its path), the line number has no
// column after it (a compiler's diagnostics have one); a log folded into one
// line keeps it after a space.
var ggmlAbortRe = regexp.MustCompile(`(?:^|\s)(?P<location>\S*ggml\S*\.(?:c|cc|cpp|cu|cuh|h|hpp|m|mm|metal):\d+): (?P<message>\S.*)$`)

// ggmlAbortNot: what a toolchain prints in the same `FILE:LINE: ` form (an old
// compiler without columns, the linker with debug information).
var ggmlAbortNot = regexp.MustCompile(`^(?i:warning|error|note|undefined reference|multiple definition|first defined|in function|relocation)\b`)

// noteGGMLAbort reads ggml's abort line when no signature read the line.
func (st *scanState) noteGGMLAbort(li *lineInfo) {
	c := strings.TrimSpace(strings.Trim(strings.TrimSpace(li.content), "`"))
	if !strings.Contains(c, "ggml") {
		return
	}
	m := ggmlAbortRe.FindStringSubmatch(c)
	if m == nil || ggmlAbortNot.MatchString(m[2]) {
		return
	}
	f := st.newFinding(li, evidence.NativeCrash, 0)
	f.Details.SetText(detail.Signature, ggmlAbortSig)
	f.Details.SetText(detail.Framework, "ggml")
	f.Details.SetText(detail.Signal, "SIGABRT")
	f.Details["location"] = m[1]
	f.Details.SetText(detail.Message, lsClip(m[2], 300))
	st.keepOpen(&openFinding{f: f, stream: li.stream, mergeKey: fmt.Sprintf("ggml-abort:%d", li.no), sig: ggmlAbortSig, until: li.no})
}

const ggmlAbortSig = "ggml-abort"

// ---- a Go runtime dump that ends its stream -------------------------------------------

// The Go runtime prints every goroutine's stack (and, for a signal, the
// registers) only when the program dies: a panic, a fatal error, a signal
// (SIGQUIT's dump exits too). A journal excerpt or a paste that keeps only the
// frames at the end lost the header that says why: read as a native crash with
// low confidence, like native frames that end a log. Frames followed by more
// of the program's output are not read.
var (
	goDumpHeaderRe  = regexp.MustCompile(`^goroutine \d+ (?:gp=0x[0-9a-f]+ m=\S+ (?:mp=0x[0-9a-f]+ )?)?\[[^\]]*\]:$`)
	goDumpCreatedRe = regexp.MustCompile(`^created by \S+(?: in goroutine \d+)?$`)
	goDumpFileRe    = regexp.MustCompile(`^\S+\.(?:go|s):\d+(?: \+0x[0-9a-f]+)?(?: fp=0x[0-9a-f]+ sp=0x[0-9a-f]+ pc=0x[0-9a-f]+)?$`)
	goDumpFuncRe    = regexp.MustCompile(`^(?:[\w.~-]+/)*[\w~-]+(?:\.[\w~-]+)*\.[\w.*()\[\]~-]*?\(.*\)$`)
	goDumpRegRe     = regexp.MustCompile(`^(?:r[a-z0-9]{1,3}|rip|rflags|[cfg]s|lr|sp|pc|fault)\s+0x[0-9a-f]+$`)
)

// goDumpState: the Go dump lines at the end of one stream so far.
type goDumpState struct {
	n, files, regs int
	no             int
	raw            string
	fn             string // the first function shown
}

// goDumpLine strips what a journal or a paste put around a dump line.
func goDumpLine(c string) string {
	if i := strings.Index(c, "]: "); i > 0 && i < 60 {
		c = c[i+3:]
	}
	return strings.TrimSpace(strings.Trim(strings.TrimSpace(c), "`"))
}

// noteGoDump extends or ends the stream's run of Go dump lines.
func (st *scanState) noteGoDump(ss *streamState, li *lineInfo) {
	gd := &ss.gd
	c := goDumpLine(li.content)
	file := goDumpFileRe.MatchString(c) && strings.Contains(c, " +0x")
	reg := !file && goDumpRegRe.MatchString(c)
	fn := !file && !reg && (goDumpHeaderRe.MatchString(c) || goDumpCreatedRe.MatchString(c) || goDumpFuncRe.MatchString(c))
	if !file && !reg && !fn && !goDumpFileRe.MatchString(c) && c != "...additional frames elided..." {
		*gd = goDumpState{}
		return
	}
	if gd.n == 0 {
		*gd = goDumpState{no: li.no, raw: li.raw}
	}
	gd.n++
	switch {
	case file:
		gd.files++
	case reg:
		gd.regs++
	case fn && gd.fn == "" && goDumpFuncRe.MatchString(c):
		gd.fn = lsClip(c[:strings.IndexByte(c, '(')], 200)
	}
}

// finishGoDump: three Go dump lines or more with a frame's `file.go:N +0x..`
// among them end the stream.
func (st *scanState) finishGoDump(ss *streamState) {
	gd := ss.gd
	ss.gd = goDumpState{}
	if gd.n < 3 || gd.files == 0 {
		return
	}
	st.keepDumpEnd(ss, "gd", gd.no, gd.raw, evidence.NativeCrash, goDumpCutSig, func(d evidence.Details) {
		if gd.fn != "" {
			d.SetText(detail.FrameFunc, gd.fn)
		}
		if gd.regs > 0 {
			d["registers"] = int64(gd.regs)
		}
	})
}

// keepDumpEnd keeps open the finding of a dump that ends stream ss (its
// last line no, raw): kind, signature sig, marked truncated (the dump's
// head is not in the log), with the details set adds.
func (st *scanState) keepDumpEnd(ss *streamState, key string, no int, raw string, kind evidence.Kind, sig string, set func(evidence.Details)) {
	content, labels := lsStripPrefixes(raw)
	li := &lineInfo{no: no, raw: raw, content: content, stream: ss.key, labels: labels}
	f := st.newFinding(li, kind, 0)
	f.Details.SetText(detail.Signature, sig)
	f.Details.SetBool(detail.Truncated, true)
	set(f.Details)
	st.keepOpen(&openFinding{f: f, stream: ss.key, mergeKey: fmt.Sprintf("%s:%d", key, no), until: no})
}

const goDumpCutSig = "go-dump-cut"

// ---- gdb's stacks of a live process -----------------------------------------------------

// A debugger attached to a running process (`gdb -p PID`, `bt`, `thread apply
// all bt`) prints each thread's stack; when every thread's innermost frame is a
// wait (sched_yield, futex, a condition variable, poll, epoll_wait, nanosleep,
// a blocking read) and no frame is a crash's (abort, raise, a signal handler,
// a backtrace printer), the process was alive and stuck: nobody attaches a
// debugger to a run that is going well. Read when those stacks, with gdb's own
// lines around them (thread headers, the `(gdb)` prompt, source lines it
// cannot find), end the stream.
type liveStacksState struct {
	threads, waits int
	crash          bool
	inThread       bool // the current thread's innermost frame was read
	no             int
	raw            string
	fn             string // the innermost frame of the first thread that waits
}

// liveStacksCrash: frames of a crash's report or of a process that dies.
var liveStacksCrash = regexp.MustCompile(`(?i)backtrace|pthread_kill|^(?:__GI_)?raise$|^gsignal$|^(?:__GI_)?abort$|ggml_abort|uncaught_exception|terminate|__cxa_throw|_Unwind|<signal handler called>|sigreturn`)

// liveStacksNoise: gdb's own lines between and after the frames.
var liveStacksNoise = regexp.MustCompile(`^(?:\(gdb\).*|Thread \d+ \(.*\):?|\[(?:New |Switching to |Thread debugging|Inferior |Detaching ).*|Using host libthread_db.*|\d+\s+(?:in )?\S+: No such file or directory\.?|\d+\s+in \S+|warning: .*|--Type <RET>.*|\[Current thread is .*|Reading symbols from .*|Attaching to .*|0x[0-9a-f]+ in \S+ \(.*|at \S+:\d+)$`)

var liveStackFrameRe = regexp.MustCompile(`^#(\d{1,3})\s+`)

// noteLiveStacks extends or ends the stream's run of gdb stacks.
func (st *scanState) noteLiveStacks(ss *streamState, li *lineInfo) {
	ls := &ss.ls
	c := strings.TrimSpace(strings.Trim(strings.TrimSpace(li.content), "`"))
	if m := liveStackFrameRe.FindStringSubmatch(c); m != nil {
		fr := nativeFrameRes[1].FindStringSubmatch(c)
		fn := ""
		if fr != nil {
			for j, name := range nativeFrameRes[1].SubexpNames() {
				if name == "func" && fr[j] != "" {
					fn = fr[j]
				}
			}
		}
		if fn == "" && strings.Contains(c, "<signal handler called>") {
			fn = "<signal handler called>"
		}
		fn, _, _ = strings.Cut(fn, "@@") // pthread_cond_wait@@GLIBC_2.3.2
		if ls.threads == 0 && !ls.inThread {
			*ls = liveStacksState{no: li.no, raw: li.raw}
		}
		if liveStacksCrash.MatchString(fn) {
			ls.crash = true
		}
		if m[1] == "0" {
			ls.threads++
			ls.inThread = true
			if nativeFrameNamed(fn) && nativeFrameWait.MatchString(fn) {
				ls.waits++
				if ls.fn == "" {
					ls.fn = fn
				}
			}
		}
		return
	}
	if ls.threads > 0 && liveStacksNoise.MatchString(c) {
		return
	}
	*ls = liveStacksState{}
}

// finishLiveStacks: stacks whose threads all wait end the stream.
func (st *scanState) finishLiveStacks(ss *streamState) {
	ls := ss.ls
	ss.ls = liveStacksState{}
	if ls.threads == 0 || ls.waits < ls.threads || ls.crash {
		return
	}
	st.keepDumpEnd(ss, "ls", ls.no, ls.raw, evidence.Hang, liveStacksWaitSig, func(d evidence.Details) {
		d.SetText(detail.FrameFunc, ls.fn)
		d[string(detail.ThreadsDumped)] = int64(ls.threads)
	})
}

const liveStacksWaitSig = "native-stacks-waiting"
