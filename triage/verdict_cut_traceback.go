package triage

import (
	"fmt"
	"path"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// A traceback that runs to the end of its stream without its exception line:
// the scanner keeps it only when nothing but its frames (or nothing at all)
// follows its header until the stream ends (finishTraceback), so a traceback
// that was logged and handled, with the program's progress after it, never
// gets here. Python prints the exception line last; a log or a paste that
// stops before it most likely lost the message of an uncaught exception, so
// it is read as one, with low confidence, and only when no rule found a
// cause.

// cutTracebacks returns the last cut traceback, or nil.
func (x *facts) cutTracebacks() []*cf {
	return x.lastPartial(evidence.PythonException, "python-traceback")
}

// lastPartial returns the last partial finding (a dump that ended its
// stream, kept by the scanner without the line that would say what
// happened) of kind k found by signature sig, or nil.
func (x *facts) lastPartial(k evidence.Kind, sig string) []*cf {
	var last *cf
	for _, c := range x.all {
		if !c.hidden && c.w == wPartial && c.kind == k && c.f.Details.Text(detail.Signature) == sig {
			last = c
		}
	}
	if last == nil {
		return nil
	}
	return []*cf{last}
}

// headlineCutTraceback says that the exception line is missing and names the
// innermost frame, where the exception was raised.
func headlineCutTraceback(d evidence.Details) string {
	f := d.Text(detail.FrameFile)
	if f == "" {
		return "Python traceback cut right after its header (`Traceback (most recent call last):` ends the log): the exception line is missing, most likely an uncaught exception whose message was not kept"
	}
	return fmt.Sprintf("Python traceback without its exception line (the log ends after its frames), most likely an uncaught exception whose message was cut; innermost frame %s (%s:%s)",
		d.Text(detail.FrameFunc), path.Base(f), d.Text(detail.FrameLine))
}
