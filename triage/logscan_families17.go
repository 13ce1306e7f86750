package triage

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Families read for heldout17's misses (issue 25): Python faulthandler's
// frames that end a stream without any header. The NVIDIA open driver's
// NV_ERR_GPU_IS_LOST lines are read in kernlog/gpu_lost.go.

// ---- faulthandler frames without their header -----------------------------------------

// faulthandler writes a frame as `File "PATH", line N in FUNC` (a traceback
// has `, in`) under a header: `Fatal Python error: ...` then `Current
// thread 0x... (most recent call first):` for a crash (read in
// logscan_structured.go), `Timeout (H:MM:SS)!` then `Thread 0x...` for
// dump_traceback_later's timer (a hang), `Thread 0x...`/`Current thread
// 0x...` alone for dump_traceback() or a registered signal (the process goes
// on). A paste or a log's cut that keeps only the frames at the end lost all
// of them. faulthandler is on by default where these logs come from (Ray's
// workers, torchelastic's, PYTHONFAULTHANDLER) only for fatal signals; the
// timer and the signal dumps are asked for. So frames that are their
// stream's last words, with nothing after them, no header of a thread or a
// timeout anywhere in the stream, and a first frame that is no idle wait of
// the standard library, read as a crash whose header was cut: native_crash
// at low confidence, like native frames or a Go dump that end a log. Frames
// stuck in a torch.distributed collective are a hang (configs/signatures.yaml
// `stack-dump-stuck-in-collective`), which outranks this reading.

// pyFramesState: faulthandler frames at the end of one stream so far.
type pyFramesState struct {
	n      int
	no     int
	raw    string
	fn     string // the first frame shown: its function and file
	file   string
	header bool // a thread's or a timer's header was seen in this stream
}

// pyFrameWait: a first frame shown that sits in an idle wait of the standard
// library (a thread of a dump that the timer or a signal asked for).
var pyFrameWait = regexp.MustCompile(`^(?:wait|_wait_for_tstate_lock|join|acquire|get|select|poll|sleep|recv\w*|accept|readline|read|run_forever|_run_once|serve_forever)$`)

var pyFrameWaitFile = regexp.MustCompile(`(?:^|/)(?:threading|queue|selectors|socket|subprocess|base_events|connection|popen_fork)\.py$`)

// fhTimeoutRe: dump_traceback_later's header.
var fhTimeoutRe = regexp.MustCompile(`^Timeout \(\d+:\d{2}:\d{2}(?:\.\d+)?\)!`)

// notePyFrames extends or ends the stream's run of headerless faulthandler
// frames.
func (st *scanState) notePyFrames(ss *streamState, li *lineInfo) {
	pf := &ss.pf
	c := strings.TrimSpace(strings.Trim(strings.TrimSpace(li.content), "`"))
	if fhTimeoutRe.MatchString(c) || strings.Contains(c, "(most recent call first):") {
		pf.header = true
	}
	m := fhFrameRe.FindStringSubmatch(c)
	if m == nil || ss.fh != nil {
		// Another line, or a frame of a dump whose header was read.
		pf.n = 0
		return
	}
	if pf.n == 0 {
		pf.no, pf.raw, pf.file, pf.fn = li.no, li.raw, lsClip(m[1], lsMaxKeptLine), lsClip(m[3], 200)
	}
	pf.n++
}

// finishPyFrames: three faulthandler frames or more end the stream.
func (st *scanState) finishPyFrames(ss *streamState) {
	pf := ss.pf
	ss.pf = pyFramesState{}
	if pf.n < 3 || pf.header || pyFrameWait.MatchString(pf.fn) && pyFrameWaitFile.MatchString(pf.file) {
		return
	}
	st.keepDumpEnd(ss, "pf", pf.no, pf.raw, evidence.NativeCrash, pyFramesCutSig, func(d evidence.Details) {
		d.SetText(detail.FrameFunc, pf.fn)
		d.SetText(detail.FrameFile, pf.file)
	})
}

const pyFramesCutSig = "python-faulthandler-frames-cut"

// headlinePyFramesCut names the first frame shown.
func headlinePyFramesCut(d evidence.Details) string {
	return fmt.Sprintf("Python faulthandler frames (`File \"...\", line N in f`) end the log without their header: faulthandler prints them unasked only for a fatal signal, so most likely a crash whose `Fatal Python error` line was cut; first frame shown %s (%s)",
		d.Text(detail.FrameFunc), lsBase(d.Text(detail.FrameFile)))
}

func lsBase(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}
