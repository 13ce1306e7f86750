package kernlog

import (
	"os"
	"strings"
)

// kcrash's own tests write real-looking GPU faults into the kernel log (only
// when asked: KCRASH_TEST_KMSG=1, which CI sets). Every such record starts
// with a marker, "kcrash-test[TOKEN]: ", so that a human, a site's health
// check and kcrash itself can tell them from the driver's. kcrash reads a
// marked record as no evidence at all, so that `kcrash collect` after the
// test suite finds no GPU failure on a host without a GPU, unless its
// environment holds TestMarkEnv=TOKEN: the test that wrote the record runs
// kcrash with its own token, and sees its records with the marker removed,
// as the driver would have printed them; other tests' records stay
// invisible to it, so tests of different packages can run at once.
const (
	// TestMarkPrefix starts every kernel record a kcrash test writes.
	TestMarkPrefix = "kcrash-test["
	// TestMarkEnv names the environment variable whose value is the one
	// token whose marked records kcrash reads as evidence.
	TestMarkEnv = "KCRASH_TEST_MARK"
)

// TestMark is the marker for token, to put before a record's text.
func TestMark(token string) string { return TestMarkPrefix + token + "]: " }

// testMark is how a parser treats marked records: accepted is the token of
// TestMarkEnv ("" accepts none); hiding is set while the lines of a marked
// record not accepted are being read. Tests mark every line of a
// multi-line record, so that no line of it reads as the driver's; a
// later line without a marker is hidden with its record all the same.
type testMark struct {
	accepted string
	hiding   bool
}

func newTestMark() testMark { return testMark{accepted: AcceptedTestMark()} }

// AcceptedTestMark is the one token whose marked records this process reads
// as evidence ("" for none): what a reader passes on when another reads the
// ring for it (the node agent).
func AcceptedTestMark() string { return os.Getenv(TestMarkEnv) }

// filter returns the text the parser should see for r: unchanged for an
// unmarked record, without the marker for an accepted one, and empty for
// the lines of any other marked record.
func (m *testMark) filter(r *rec) string {
	if !r.cont {
		m.hiding = false
	} else if m.hiding {
		return ""
	}
	body, indent := r.text, ""
	if r.cont { // a later line of a record, indented under its first
		body = strings.TrimLeft(body, " \t")
		indent = r.text[:len(r.text)-len(body)]
	}
	rest, ok := strings.CutPrefix(body, TestMarkPrefix)
	if !ok {
		return r.text
	}
	token, text, ok := strings.Cut(rest, "]: ")
	if ok && m.accepted != "" && token == m.accepted {
		return indent + text
	}
	m.hiding = true
	return ""
}
