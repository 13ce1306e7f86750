package triage

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Native stack frames that are their stream's last words. A crash handler
// prints the frames after the line that says what crashed (ggml's abort
// message, "Caught signal 11", gdb's "received signal SIGSEGV"); a paste or a
// journal excerpt that keeps only the frames lost that line. Frames followed
// by the program's own output are not read (a handled error's backtrace, a
// debugger session that goes on), nor frames whose innermost call is a wait
// (gdb attached to a live, maybe hung, process prints the same frames), nor
// Go's goroutine dumps, which SIGQUIT prints as well as a panic.
var nativeFrameRes = []*regexp.Regexp{
	// glibc's backtrace_symbols (ggml_print_backtrace, segfault handlers):
	// `libggml-base.so(ggml_abort+0x152)[0x72edb99cda02]`, `./llama-server(+0x5e0c5)[0x61a2522f70c5]`
	regexp.MustCompile(`^\s*(?P<file>\S+)\((?P<func>[^()\s]*?)(?:\+0x[0-9a-fA-F]+)?\)\s*\[0x[0-9a-fA-F]+\]\s*$`),
	// gdb: `#5  0x000078b371ae59b1 in llama_context::graph_reserve(...) () from /usr/local/lib/ollama/libllama.so.0`,
	// `#1  __pthread_kill_internal (signo=6, ...) at ./nptl/pthread_kill.c:78`
	regexp.MustCompile(`^\s*#\d{1,3}\s+(?:0x[0-9a-fA-F]+ in (?P<func>[^\s(]+).*?(?: from (?P<file>\S+)| at (?P<file>\S+):\d+)?|(?P<func>[^\s(]+) \(.*\) at (?P<file>\S+):\d+)\s*$`),
	// UCX's backtrace (Ray's and vLLM's workers): `17 0x0000000000150a7b _PyObject_MakeTpCall()  ???:0`
	regexp.MustCompile(`^\s*\d{1,3}\s+0x[0-9a-fA-F]+ (?P<func>\S+?)\(\)\s+(?P<file>\S+):\d+\s*$`),
}

// nativeFrameWait: an innermost frame that waits (a live process's stack),
// by its whole name past glibc's prefixes (`__GI___poll`, `__libc_recv`).
var nativeFrameWait = regexp.MustCompile(`(?i)^(?:__GI_+|__libc_|_+)?(?:futex\w*|\w*_wait\w*|pthread_cond_\w+|e?poll\w*|p?select|\w*nanosleep|sched_yield|u?sleep|wait(?:4|pid)?|read|recv\w*|accept4?|sigsuspend|pause|syscall\w*)$`)

// nativeFramesState: the frames at the end of one stream so far.
type nativeFramesState struct {
	n      int // frames in a row, blank lines between them allowed
	format int
	no     int
	raw    string
	fns    [][2]string // the first frames' function and file, innermost first
}

// nativeFrameHandler: frames of the report's own printing, of the signal's
// delivery and of C++'s terminate, above the frame that failed; ggml's
// printer waits for the gdb it forked (`wait4` under ggml_print_backtrace).
var nativeFrameHandler = regexp.MustCompile(`(?i)backtrace|pthread_kill|^(?:__GI_)?raise$|^gsignal$|uncaught_exception|terminate|__cxa_throw`)

// nativeFrameNamed: a frame whose function the report names (not `??`).
func nativeFrameNamed(fn string) bool { return strings.Trim(fn, "?") != "" }

// innermost is the innermost frame that failed: the first named frame past
// the handler's own, or past the last handler frame when the printer's wait
// comes first.
func (nf *nativeFramesState) innermost() (fn, file string) {
	last := -1
	for i, f := range nf.fns {
		if nativeFrameNamed(f[0]) && nativeFrameHandler.MatchString(f[0]) {
			last = i
		}
	}
	for i, f := range nf.fns {
		if i > last && nativeFrameNamed(f[0]) && !nativeFrameHandler.MatchString(f[0]) {
			return f[0], f[1]
		}
	}
	// Only the handler's frames past the abort: the abort is the innermost.
	for _, f := range nf.fns {
		if nativeFrameNamed(f[0]) && !nativeFrameHandler.MatchString(f[0]) {
			return f[0], f[1]
		}
	}
	return "", ""
}

// noteNativeFrame extends or ends the stream's run of native frames.
func (st *scanState) noteNativeFrame(ss *streamState, li *lineInfo) {
	nf := &ss.nf
	c := li.content
	// A journal prefix the scanner does not strip (a month that is not
	// English: `7月 21 11:33:14 host ollama[1166693]: #5  0x…`).
	if i := strings.Index(c, "]: "); i > 0 && i < 60 && !strings.HasPrefix(c, "#") {
		c = c[i+3:]
	}
	// Inline code around each line (a paste's backticks).
	c = strings.Trim(strings.TrimSpace(c), "`")
	// A cheap test first: every format holds "0x" or gdb's " at FILE:LINE".
	if strings.Contains(c, "0x") || strings.Contains(c, ") at ") {
		for i, re := range nativeFrameRes {
			m := re.FindStringSubmatch(c)
			if m == nil {
				continue
			}
			if nf.n > 0 && nf.format == i {
				nf.n++
			} else {
				*nf = nativeFramesState{n: 1, format: i, no: li.no, raw: li.raw}
			}
			if len(nf.fns) >= 8 {
				return
			}
			var fr [2]string
			for j, name := range re.SubexpNames() {
				switch {
				case name == "func" && m[j] != "":
					fr[0] = m[j]
				case name == "file" && m[j] != "":
					fr[1] = m[j]
				}
			}
			nf.fns = append(nf.fns, fr)
			return
		}
	}
	nf.n = 0
}

// finishNativeFrames: at the end of the stream, three frames or more in a
// row with nothing after them read as a crash whose report was cut.
func (st *scanState) finishNativeFrames(ss *streamState) {
	nf := ss.nf
	ss.nf = nativeFramesState{}
	fn, file := nf.innermost()
	if nf.n < 3 || fn != "" && nativeFrameWait.MatchString(fn) {
		return
	}
	content, labels := lsStripPrefixes(nf.raw)
	li := &lineInfo{no: nf.no, raw: nf.raw, content: content, stream: ss.key, labels: labels}
	f := st.newFinding(li, evidence.NativeCrash, 0)
	f.Details.SetText(detail.Signature, "native-frames-cut")
	f.Details.SetBool(detail.Truncated, true)
	if fn != "" {
		f.Details.SetText(detail.FrameFunc, fn)
	}
	if file != "" && file != "???" {
		f.Details.SetText(detail.FrameFile, file)
	}
	st.keepOpen(&openFinding{f: f, stream: ss.key, mergeKey: fmt.Sprintf("nf:%d", nf.no), until: nf.no})
}

// headlineNativeFramesCut names the innermost frame shown.
func headlineNativeFramesCut(d evidence.Details) string {
	s := "Native stack frames end the log without the line that says what crashed (a signal, an abort message): most likely a crash whose report was cut"
	fn, file := d.Text(detail.FrameFunc), d.Text(detail.FrameFile)
	switch {
	case fn != "" && file != "":
		return fmt.Sprintf("%s; innermost frame shown %s (%s)", s, fn, path.Base(file))
	case fn != "":
		return s + "; innermost frame shown " + fn
	case file != "":
		return s + "; innermost frame shown in " + path.Base(file)
	}
	return s
}

// cutNativeFrames returns the last run of native frames that ended its
// stream, or nil.
func (x *facts) cutNativeFrames() []*cf {
	return x.lastPartial(evidence.NativeCrash, "native-frames-cut")
}
