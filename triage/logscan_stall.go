package triage

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Hangs that only a run of lines shows, read while scanning (a single line
// of them is ordinary output):
//
//   - vLLM's periodic engine stats (every 5 s in V0, 10 s in V1) with running
//     requests and no prompt or generation throughput, interval after
//     interval to the end of the log: the engine holds requests and makes no
//     step. An idle server logs zero throughput with `Running: 0 reqs`; one
//     interval at zero is a long prefill or a pause, and any later stats line
//     with throughput (or nothing running) ends the run.
//   - py-spy's dump of a main thread that sits idle in a blocking wait of
//     Python's own synchronisation (threading's wait/join/acquire,
//     concurrent.futures' result, queue's get): a dump is taken of a process
//     that seems stuck, and its main thread waits on something that never
//     came. A server idle in its event loop sits in select, never matched.

// stallStatsMin is how many stalled stats intervals in a row, to the log's
// end, make a stuck engine (30 s at V1's 10 s interval).
const stallStatsMin = 3

const (
	stalledStatsSig  = "vllm-stats-stalled"
	pyspyIdleMainSig = "pyspy-main-thread-waiting"
)

var (
	vllmStatsRe   = regexp.MustCompile(`Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, (?:[^,]*, )*?Running: (\d+) reqs`)
	pyspyThreadRe = regexp.MustCompile(`^Thread (?:0x[0-9A-Fa-f]+|\d+) \((idle|active|active\+gil)\): "MainThread"\s*$`)
	pyspyWaitRe   = regexp.MustCompile(`^\s+(wait|join|acquire|_wait_for_tstate_lock|result|get) \((?:[^()]*/)?(threading\.py|_base\.py|queue\.py):(\d+)\)\s*$`)
)

// stallState follows the runs above across lines.
type stallState struct {
	run     int       // stalled stats intervals in a row
	first   *lineInfo // the run's first line
	running string    // requests running at the run's last line
	// mainIdle: the previous non-blank line was py-spy's header of an idle
	// main thread; its first frame (the innermost) comes next.
	mainIdle *lineInfo
	// cutStats: the last line with a stats line's start did not hold a whole
	// one (a terminal wrapped it); the wrap join may give it back.
	cutStats bool
}

// noteStallJoined reads a line that the wrap join rebuilt from the previous
// line and li, when the previous line began stats that it did not finish.
func (st *scanState) noteStallJoined(joined, li *lineInfo) {
	if st.stall.cutStats && !strings.Contains(li.content, "Avg prompt throughput: ") {
		st.noteStall(joined)
	}
}

// noteStall reads one non-blank line for the runs above.
func (st *scanState) noteStall(li *lineInfo) {
	c := li.content
	ss := &st.stall
	if ss.mainIdle != nil {
		head := ss.mainIdle
		ss.mainIdle = nil
		if m := pyspyWaitRe.FindStringSubmatch(c); m != nil {
			f := st.newFinding(head, evidence.Hang, 0)
			f.Details.SetText(detail.Signature, pyspyIdleMainSig)
			f.Details.SetText(detail.FrameFunc, m[1])
			f.Details.SetText(detail.FrameFile, m[2])
			if n, err := strconv.ParseInt(m[3], 10, 64); err == nil {
				f.Details["frame_line"] = n
			}
			f.Details.SetText("tool", "py-spy")
			st.out.push(f)
		}
	}
	if strings.HasPrefix(c, "Thread ") && strings.Contains(c, `"MainThread"`) {
		if m := pyspyThreadRe.FindStringSubmatch(c); m != nil && m[1] == "idle" {
			ss.mainIdle = li
		}
	}
	if !strings.Contains(c, "Avg prompt throughput: ") {
		return
	}
	ms := vllmStatsRe.FindAllStringSubmatch(c, -1)
	ss.cutStats = len(ms) == 0
	// A log folded into one line holds every interval on it.
	for _, m := range ms {
		if zeroRate(m[1]) && zeroRate(m[2]) && m[3] != "0" {
			if ss.run == 0 {
				cp := *li
				ss.first = &cp
			}
			ss.run++
			ss.running = m[3]
			continue
		}
		ss.run, ss.first = 0, nil
	}
}

func zeroRate(s string) bool {
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && v == 0
}

// finishStall reports a stalled run that lasted to the log's end.
func (st *scanState) finishStall() {
	ss := &st.stall
	if ss.run < stallStatsMin || ss.first == nil {
		return
	}
	f := st.newFinding(ss.first, evidence.Hang, 0)
	f.Details.SetText(detail.Signature, stalledStatsSig)
	f.Details.SetText(detail.Framework, "vllm")
	f.Details.SetInt("intervals", int64(ss.run))
	if n, err := strconv.ParseInt(ss.running, 10, 64); err == nil {
		f.Details.SetInt("running", n)
	}
	st.out.push(f)
}
