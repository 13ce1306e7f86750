package triage

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// lsFuzzSeeds returns the corpus samples of the categories as fuzz seeds.
func lsFuzzSeeds(t testing.TB, cats ...string) []string {
	var out []string
	for _, c := range cats {
		for _, f := range testcorpus.Glob(t, c+"/*.txt") {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
	}
	return out
}

// FuzzScanLog: any input scans without panic into bounded, well-formed
// findings, and the verdict and summary built on them do not panic either.
// Run: go test -run=^$ -fuzz=FuzzScanLog -fuzztime=20s ./triage/
func FuzzScanLog(f *testing.F) {
	for _, s := range lsFuzzSeeds(f, "6-program-log", "2-rocm-userspace-fault") {
		f.Add(s)
	}
	f.Add("Traceback (most recent call last):\n  File \"a\", line 1, in b\nFatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n")
	f.Add("(A pid=1) x\r(B pid=2)   File \"y\", line 2, in z\r\n\x1b[31m[rank0]: KeyError: 1\x1b")
	f.Add("f.cu:1: g: block: [0,0,0], thread: [1,0,0] Assertion `x` failed.\n")
	f.Fuzz(func(t *testing.T, in string) {
		fs, err := ScanLog(strings.NewReader(in), "o.log")
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) > lsKeepHead+lsKeepTail {
			t.Fatalf("%d findings", len(fs))
		}
		lines := strings.Count(in, "\n") + 1
		for i, x := range fs {
			if x.Source != evidence.SourceLog || x.File != "o.log" || x.Line < 1 || x.Line > lines {
				t.Fatalf("finding %d: %s %s:%d (input has %d lines)", i, x.Source, x.File, x.Line, lines)
			}
			if !lsValidKind(x.Kind) || !utf8.ValidString(x.Text) || len(x.Text) > lsMaxText+8 {
				t.Fatalf("finding %d: kind %q text %q", i, x.Kind, x.Text)
			}
			if i > 0 && fs[i-1].Line > x.Line {
				t.Fatalf("findings out of line order")
			}
		}
		r := Decide(Input{Findings: fs, Signal: "SIGABRT"})
		_ = Summary(r, SummaryMeta{Command: []string{"x", in}, LastLines: strings.Split(in, "\n")})
	})
}

// FuzzLoadSignatures: any YAML either loads into signatures that compile and
// scan, or fails with an error naming the file.
func FuzzLoadSignatures(f *testing.F) {
	if b, err := configs.FS.ReadFile("signatures.yaml"); err == nil {
		f.Add(string(b))
	}
	f.Add("signatures:\n  - name: a\n    kind: gpu_oom\n    pattern: 'x(?P<n>\\d+)'\n    extract: ['(?P<m>y)']\n")
	f.Add("signatures: [{name: b, kind: hang, pattern: '^$'}]\n")
	f.Fuzz(func(t *testing.T, data string) {
		sigs, err := LoadSignatures([]byte(data), "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		sc, err := NewScanner(sigs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sc.Scan(strings.NewReader(data), "self"); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzStripPrefixes: what is left of a line is always a suffix of it, and
// stripping never loops.
func FuzzStripPrefixes(f *testing.F) {
	for _, s := range []string{
		"2025-03-01T10:00:00.1Z stderr F (EngineCore_DP0 pid=1) ERROR 08-28 06:16:24 [a.py:1] x",
		"[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] y",
		"[2025-02-21 22:59:28 DP0 TP0 EP0] z", "Oct  7 12:58:23 host kernel: [ 1.0] w", "svc  | v",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, l := lsStripPrefixes(s)
		if !strings.HasSuffix(s, c) {
			t.Fatalf("%q is not a suffix of %q", c, s)
		}
		_ = l.stream()
	})
}
