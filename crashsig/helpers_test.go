package crashsig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/kernelapi"
	"github.com/kcrash/kcrash/triage"
)

// corpusDir is kcrash's evidence corpus: real logs from public issue threads.
const corpusDir = "../testdata/corpus"

// triageText triages a log the way `kcrash triage FILE` does.
func triageText(t testing.TB, name, text string, kapi string) triage.Result {
	t.Helper()
	fs, err := triage.ScanEvidenceText(strings.NewReader(text), name, 2026)
	if err != nil {
		t.Fatal(err)
	}
	in := triage.Input{Findings: fs, Checked: []string{"log " + name}}
	if kapi != "" {
		rep, err := kernelapi.AnalyzeReaders([]kernelapi.NamedReader{{Name: "kernel-api.log", Reader: strings.NewReader(kapi)}})
		if err != nil {
			t.Fatal(err)
		}
		in.KernelAPI = rep
	}
	return triage.Decide(in)
}

func sigOf(t testing.TB, name, text, kapi string) bundle.Signature {
	t.Helper()
	return Compute(FromTriage(triageText(t, name, text, kapi), ""))
}

// corpusText is a corpus file without its two header lines.
func corpusText(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for range 2 {
		if _, rest, ok := strings.Cut(s, "\n"); ok && (strings.HasPrefix(s, "source:") || strings.HasPrefix(s, "expect:")) {
			s = rest
		}
	}
	return s
}
