package triage

import (
	"fmt"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Readings added for heldout16's misses (issue 25) and the label conventions
// of testdata/unseen/LABELS.md: a traceback after a `^C` echo, SGLang's
// failed health check, the stacks of a live process that all wait, a Go
// dump without its header, and HSA's OUT_OF_RESOURCES from a tool's start-up.

// ---- a traceback after `^C` -------------------------------------------------------------

// ctrlCEcho: what a terminal printed before the traceback's header ends with
// the `^C` it echoes for Ctrl-C (`^CTraceback (most recent call last):`, or
// `^C` on the line above). Python's SIGINT handler raised KeyboardInterrupt
// where the program was; the exception line is often cut from the paste, or
// another exception was raised while it unwound.
func ctrlCEcho(ctx string) bool { return strings.HasSuffix(strings.TrimSpace(ctx), "^C") }

const ctrlCTracebackSig = "ctrl-c-traceback"

// ctrlCTraceback reads a traceback whose header follows `^C` as the signal:
// killed by SIGINT, whole or cut. A traceback whose exception line a
// signature read as another kind (a CUDA error, an OOM) keeps that kind.
func ctrlCTraceback(f *evidence.Finding) {
	if f.Kind != evidence.PythonException {
		return
	}
	f.Kind = evidence.Killed
	f.Details.SetText(detail.Signature, ctrlCTracebackSig)
	f.Details.SetText(detail.Signal, "SIGINT")
	delete(f.Details, string(detail.Truncated)) // the echo, not the exception line, says what happened
}

// ---- SGLang's failed health check -------------------------------------------------------

// sglangHealthSig is SGLang's `Health check failed. Server couldn't get a
// response from detokenizer for last 20 seconds.` (configs/signatures.yaml):
// the server stopped answering. A hang only with no crash shown: a scheduler
// that died of an exception stops answering too.
const sglangHealthSig = "sglang-health-check-failed"

// ---- cut dumps that end a log -------------------------------------------------------------

// cutNativeOrGoDump returns the last run of native frames or of a Go dump
// that ended its stream, or nil.
func (x *facts) cutNativeOrGoDump() []*cf {
	var last *cf
	for _, sig := range []string{"native-frames-cut", goDumpCutSig, pyFramesCutSig} {
		if ev := x.lastPartial(evidence.NativeCrash, sig); len(ev) > 0 && (last == nil || ev[0].f.Line > last.f.Line) {
			last = ev[0]
		}
	}
	if last == nil {
		return nil
	}
	return []*cf{last}
}

// liveStacksWaiting returns gdb's stacks of a live process whose threads all
// wait, when they end the log.
func (x *facts) liveStacksWaiting() []*cf {
	return x.lastPartial(evidence.Hang, liveStacksWaitSig)
}

// headlineGoDumpCut names the first function the dump shows.
func headlineGoDumpCut(d evidence.Details) string {
	s := "A Go runtime dump (goroutine stacks"
	if _, ok := d.Int("registers"); ok {
		s += ", registers"
	}
	s += ") ends the log without the line that says why (`panic:`, `fatal error:`, `SIGSEGV:`): the runtime prints all stacks only when the program dies, so most likely a crash whose header was cut"
	if fn := d.Text(detail.FrameFunc); fn != "" {
		s += "; first frame shown " + fn
	}
	return s
}

// headlineLiveStacks says where the stacks wait.
func headlineLiveStacks(d evidence.Details) string {
	n, _ := d.Int(detail.ThreadsDumped)
	threads := "its one thread shown waits"
	if n > 1 {
		threads = fmt.Sprintf("all %d threads shown wait", n)
	}
	return fmt.Sprintf("hang: a debugger's stacks of the live process end the log, and %s (innermost frame %s): a stuck process, not a crash", threads, d.Text(detail.FrameFunc))
}

// liveStacksStep: the stacks are in the log already.
func liveStacksStep(ev []*cf) string {
	for _, c := range ev {
		if c.f.Details.Text(detail.Signature) == liveStacksWaitSig {
			return "The debugger's stacks in the log already show where each thread waits: find the one that should produce what the others wait for (a peer rank in a collective, a lock's holder, a queue's producer), and take the same stacks on every rank or process of the job (`gdb -p PID -batch -ex 'thread apply all bt'`, `py-spy dump --native --pid PID`) to see which one is elsewhere."
		}
	}
	return ""
}

// ---- HSA's OUT_OF_RESOURCES at a tool's start ----------------------------------------------

// hsaToolInitSig marks `Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES`, the
// way rocminfo (and the tools built on its error macro) reports an HSA call
// that failed, under `hsa api call failure at: rocminfo.cc:N`. At a tool's
// start the runtime returns it when it cannot open /dev/kfd or the GPU's
// render node (a user outside the render/video groups, a container without
// the devices, an unsupported GPU): no memory ran out.
const hsaToolInitSig = "hsa-call-out-of-resources"

// readHSAToolInit reads such a line as a failure with no kind (a symptom of
// the setup) instead of a GPU OOM.
func (x *facts) readHSAToolInit() {
	for _, c := range x.all {
		if c.kind != evidence.GPUOOM || c.f.Details.Text(detail.Status) != "HSA_STATUS_ERROR_OUT_OF_RESOURCES" {
			continue
		}
		if !strings.Contains(c.f.Text, "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES") {
			continue
		}
		c.kind, c.f.Kind, c.w = evidence.Unknown, evidence.Unknown, wSymptom
		c.f.Details.SetText(detail.Signature, hsaToolInitSig)
	}
}

// hsaToolInitStep: check the device nodes before any memory knob.
const hsaToolInitStep = "HSA_STATUS_ERROR_OUT_OF_RESOURCES from a tool's HSA call at start-up (rocminfo, rocm-smi, a runtime's hsa_init) is most often no memory shortage: the user cannot open /dev/kfd or the GPU's /dev/dri/renderD* node. Check `ls -l /dev/kfd /dev/dri/render*` and `groups`, add the user to the groups that own them (`sudo usermod -aG render,video $USER`, then log in again) or compare with `sudo rocminfo`; in a container pass `--device=/dev/kfd --device=/dev/dri`. If root fails too, look in `dmesg` for amdgpu/kfd errors at boot and check that this ROCm supports the GPU."

// ctrlCSteps: a person stopped it; where it was is in the traceback.
func ctrlCSteps(d evidence.Details) string {
	at := ""
	if f := d.Text(detail.FrameFunc); f != "" {
		at = fmt.Sprintf(" (innermost frame %s, %s:%s)", f, d.Text(detail.FrameFile), d.Text(detail.FrameLine))
	}
	return strings.Join([]string{
		"Someone pressed Ctrl-C (or a launcher sent SIGINT): the traceback shows where the program was" + at + "; if it was interrupted because it seemed stuck, that frame is where it waited.",
		"To see what it waits for next time, take its stacks while it is stuck instead of interrupting it (`py-spy dump --pid PID`, with `--native` for C++ frames), or run it under `kcrash run --hang-timeout 10m`, which records them and the process tree when the output stops.",
	}, "\n")
}
