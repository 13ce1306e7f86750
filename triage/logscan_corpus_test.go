package triage

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// lsCorpusDir is the repository's copy of the crash-evidence corpus.
func lsCorpusDir(t testing.TB) string { return testcorpus.Dir(t) }

// lsCorpus returns a corpus file's evidence text: the file as it is, minus its
// 3 header lines (source:, expect:, blank), which describe the sample and
// would otherwise be scanned as evidence.
func lsCorpus(t testing.TB, rel string) string {
	t.Helper()
	return testcorpus.Body(t, rel)
}

// lsWant describes one expected finding. Details are compared by their
// printed value, so 93 matches int64(93); a nil value asserts absence.
type lsWant struct {
	kind    evidence.Kind
	line    int
	pid     int
	gpu     string
	address string
	text    string // substring of Text
	details map[string]any
}

func lsCheck(t *testing.T, name string, got []evidence.Finding, want []lsWant) {
	t.Helper()
	if len(got) != len(want) {
		for _, f := range got {
			t.Logf("got %s line %d %q %v", f.Kind, f.Line, lsClip(f.Text, 120), f.Details)
		}
		t.Fatalf("%s: %d findings, want %d", name, len(got), len(want))
	}
	for i, w := range want {
		f := got[i]
		where := fmt.Sprintf("%s finding %d (line %d)", name, i, f.Line)
		if f.Kind != w.kind {
			t.Errorf("%s: kind %s, want %s", where, f.Kind, w.kind)
		}
		if f.Source != evidence.SourceLog {
			t.Errorf("%s: source %q", where, f.Source)
		}
		if w.line != 0 && f.Line != w.line {
			t.Errorf("%s: line %d, want %d", where, f.Line, w.line)
		}
		if f.Pid != w.pid {
			t.Errorf("%s: pid %d, want %d", where, f.Pid, w.pid)
		}
		if f.GPU != w.gpu {
			t.Errorf("%s: gpu %q, want %q", where, f.GPU, w.gpu)
		}
		if f.Address != w.address {
			t.Errorf("%s: address %q, want %q", where, f.Address, w.address)
		}
		if w.text != "" && !strings.Contains(f.Text, w.text) {
			t.Errorf("%s: text %q does not contain %q", where, f.Text, w.text)
		}
		for k, v := range w.details {
			gv, ok := f.Details[k]
			switch {
			case v == nil && ok:
				t.Errorf("%s: details[%s] = %v, want none", where, k, gv)
			case v != nil && !ok:
				t.Errorf("%s: details[%s] missing, want %v (have %v)", where, k, v, f.Details)
			case v != nil && fmt.Sprint(gv) != fmt.Sprint(v):
				t.Errorf("%s: details[%s] = %v, want %v", where, k, gv, v)
			}
		}
	}
}
