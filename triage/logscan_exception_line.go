package triage

import (
	"fmt"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// A Python exception line standing alone (`ValueError: msg`) is what is left
// of a traceback when a paste or a logger kept only the message: logged
// before the traceback (`logger.error(e)` then `logger.exception`), or with
// the traceback cut off. It is weaker evidence than a complete traceback,
// which the verdict prefers (see pythonExceptionCauses).

// exceptionLineSig names the finding of a lone exception line.
const exceptionLineSig = "python-exception-line"

// exceptionLine records a lone exception line: content starting with an
// exception name (`ValueError`, `torch.OutOfMemoryError`) ending in Error
// or Exception, then `: ` and a message, outside any traceback or
// faulthandler dump, on a line no signature matched, and not written at a
// quiet log level (an INFO or WARNING line that quotes an error is no failure).
func (st *scanState) exceptionLine(ss *streamState, li *lineInfo) {
	c := li.content
	if len(c) < 8 || !(c[0] >= 'A' && c[0] <= 'Z' || c[0] >= 'a' && c[0] <= 'z') || !strings.Contains(c, ": ") {
		return
	}
	m := excLineRe.FindStringSubmatch(strings.TrimRight(c, " "))
	if m == nil || m[2] == "" || strings.TrimSpace(m[3]) == "" || !lsIsExceptionName(m[1], true) {
		return
	}
	last := m[1][strings.LastIndexByte(m[1], '.')+1:]
	if !strings.HasSuffix(last, "Error") && !strings.HasSuffix(last, "Exception") {
		return
	}
	if lsQuietLevel(li.raw, m[1]) {
		return
	}
	f := st.newFinding(li, evidence.PythonException, 0)
	f.Details.SetText(detail.Signature, exceptionLineSig)
	f.Details.SetText(detail.Exception, m[1])
	f.Details.SetText(detail.Message, lsClip(strings.TrimSpace(m[3]), 300))
	st.keepOpen(&openFinding{f: f, stream: li.stream, mergeKey: fmt.Sprintf("exc:%d", li.no), until: li.no})
}

// lsQuietLevel: the prefixes stripped from the line name a level below
// error (vLLM's `INFO 06-25 ...`, glog's `I0625`, Python logging's `- INFO -`).
func lsQuietLevel(raw, name string) bool {
	prefix := ""
	if i := strings.Index(raw, name); i > 0 {
		prefix = raw[:i]
	}
	if prefix == "" {
		return false
	}
	for _, lv := range []string{"DEBUG", "INFO", "WARNING", "WARN"} {
		if strings.Contains(prefix, lv) {
			return true
		}
	}
	p := strings.TrimLeft(prefix, "[")
	return len(p) > 1 && (p[0] == 'I' || p[0] == 'W') && lsDigit(p[1])
}

// pythonExceptionCauses are the exceptions the python_exception verdict may
// rest on: complete (or cut) tracebacks first; lone exception lines only
// when there is none, and not against a report of the process being killed,
// which explains a lone line better than the line explains the end.
func (x *facts) pythonExceptionCauses() []*cf {
	all := x.causes(evidence.PythonException)
	var tracebacks []*cf
	for _, c := range all {
		if c.f.Details.Text(detail.Signature) != exceptionLineSig {
			tracebacks = append(tracebacks, c)
		}
	}
	if len(tracebacks) > 0 || len(all) == 0 {
		return tracebacks
	}
	if len(x.causes(evidence.Killed)) > 0 {
		return nil
	}
	return all
}
