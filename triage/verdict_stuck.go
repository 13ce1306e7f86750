package triage

import (
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

const engineWaitSig = "vllm-engine-start-wait"

// engineWaitMin is how many of vLLM's 10-second "Waiting for ... core engine
// proc(s) to start" lines make a stall: one or two are an ordinary start
// (weights loading), several in a row with nothing after them are an engine
// that never came up.
const engineWaitMin = 3

// engineWaitStalled says whether c may stand as a hang: any hang finding
// but vLLM's start-wait line, which stands only when it repeats at least
// engineWaitMin times, is the last finding of the log and no crash, exit or
// exception explains the wait (then that is the cause, the wait its symptom).
func (x *facts) engineWaitStalled(c *cf) bool {
	if c.f.Details.Text(detail.Signature) != engineWaitSig {
		return true
	}
	if len(x.causes(evidence.NativeCrash, evidence.PythonException, evidence.Killed, evidence.CollectiveTimeout)) > 0 {
		return false
	}
	n, last := 0, 0
	for _, o := range x.all {
		if o.f.Line > last {
			last = o.f.Line
		}
		if o.f.Details.Text(detail.Signature) == engineWaitSig {
			r, _ := o.f.Details.Int("repeats")
			n += 1 + int(r)
		}
	}
	return n >= engineWaitMin && x.lastIsWait(last)
}

// lastIsWait: the log's last finding is a start-wait line (nothing happened
// after the waiting began).
func (x *facts) lastIsWait(last int) bool {
	for _, o := range x.all {
		if o.f.Line == last && o.f.Details.Text(detail.Signature) != engineWaitSig {
			return false
		}
	}
	return true
}

// stackDumpSig: the finding is a thread dump (faulthandler's, or frames
// stuck in a collective), which next to a crash is the crash's own report.
func stackDumpSig(sig string) bool {
	return sig == threadDumpSig || sig == "stack-dump-stuck-in-collective"
}
