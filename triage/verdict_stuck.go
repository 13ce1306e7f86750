package triage

import (
	"fmt"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

const engineWaitSig = "vllm-engine-start-wait"

// mqWaitSig is vLLM V0's front end (MQLLMEngineClient) logging, every 10 s
// at DEBUG, that no output came from its engine process. It also logs it while
// the engine loads and while a long non-streamed request runs, so only a
// minute of it with nothing after is a stuck engine.
const mqWaitSig = "vllm-mq-output-wait"

// engineWaitMin is how many of vLLM's 10-second "Waiting for ... core engine
// proc(s) to start" lines make a stall: one or two are an ordinary start
// (weights loading), several in a row with nothing after them are an engine
// that never came up. mqWaitMin is the same for the V0 client's wait.
const (
	engineWaitMin = 3
	mqWaitMin     = 6
)

// engineWaitStalled says whether c may stand as a hang: any hang finding
// but the stall lines (vLLM's start-wait and output-wait lines, its stalled
// stats), which stand only when no crash, exit or exception explains the
// wait (then that is the cause, the wait its symptom); the wait lines also
// only when they repeat at least their minimum and are the last findings of
// the log (the stalled stats were counted to the log's end by the scanner).
func (x *facts) engineWaitStalled(c *cf) bool {
	sig := c.f.Details.Text(detail.Signature)
	if sig == sglangHealthSig {
		// A failed health check follows any death of the scheduler: a hang
		// only when nothing shows that something died.
		return len(x.causes(evidence.NativeCrash, evidence.PythonException, evidence.Killed, evidence.CollectiveTimeout)) == 0
	}
	need := map[string]int{engineWaitSig: engineWaitMin, mqWaitSig: mqWaitMin, stalledStatsSig: 1}[sig]
	if need == 0 {
		return true
	}
	if len(x.causes(evidence.NativeCrash, evidence.PythonException, evidence.Killed, evidence.CollectiveTimeout)) > 0 {
		return false
	}
	if sig == stalledStatsSig {
		return true
	}
	n, last := 0, 0
	for _, o := range x.all {
		if o.f.Line > last {
			last = o.f.Line
		}
		if o.f.Details.Text(detail.Signature) == sig {
			r, _ := o.f.Details.Int("repeats")
			n += 1 + int(r)
		}
	}
	return n >= need && x.lastIsWait(last, sig)
}

// lastIsWait: the log's last finding is a wait line of sig (nothing happened
// after the waiting began).
func (x *facts) lastIsWait(last int, sig string) bool {
	for _, o := range x.all {
		if o.f.Line == last && o.f.Details.Text(detail.Signature) != sig {
			return false
		}
	}
	return true
}

// stackDumpSig: the finding is a thread dump (faulthandler's, or frames
// stuck in a collective), which next to a crash is the crash's own report.
func stackDumpSig(sig string) bool {
	return sig == threadDumpSig || sig == "stack-dump-stuck-in-collective" || sig == pyspyIdleMainSig
}

// stallHeadline words a hang that the stall rules found; "" for any other.
func stallHeadline(d evidence.Details) string {
	switch d.Text(detail.Signature) {
	case stalledStatsSig:
		n, _ := d.Int("intervals")
		r, _ := d.Int("running")
		return fmt.Sprintf("hang: vLLM's engine reported %d running request(s) and no prompt or generation throughput for its last %d stats intervals (the engine stopped stepping)", r, n)
	case mqWaitSig:
		return "hang: vLLM's front end waited for output from its engine process (MQLLMEngine) for a minute or more with nothing after (an engine stuck in a step or in its start)"
	case pyspyIdleMainSig:
		return fmt.Sprintf("hang: py-spy shows the main thread idle in %s (%s:%s), waiting on something that never came", d.Text(detail.FrameFunc), d.Text(detail.FrameFile), d.Text(detail.FrameLine))
	}
	return ""
}
