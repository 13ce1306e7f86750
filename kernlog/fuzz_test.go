package kernlog

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// fuzzSeeds returns corpus samples and the synthetic shapes of the tests.
func fuzzSeeds(t testing.TB) []string {
	seeds := []string{
		"",
		"\n\n\r\n",
		"[ 1.0] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No\n",
		"6,1,2,-;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: fallen off the bus\n",
		"x invoked oom-killer: gfp_mask=0x0\noom-kill:constraint=CONSTRAINT_MEMCG,mems_allowed=0,2,task=a,pid=1,uid=0\n",
		"a[1]: segfault at 0 ip 1 sp 2 error 14 in b[3,4+5] likely on CPU 1\nCode: 00\n",
		"traps: a[1] trap divide error ip:1 sp:2 error:0 in b[3+4]\n",
		"amdgpu 0000:01:00.0: GPU fault detected: 146 0x0 for process x pid 1 thread x pid 1\n",
		benchLogSample(),
	}
	for _, fb := range faultBlocks {
		seeds = append(seeds, strings.Join(fb, "\n")+"\n")
	}
	for _, f := range testcorpus.Glob(t, "[1-5]-*/*.txt") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	return seeds
}

func benchLogSample() string { return string(benchLog(8 << 10)) }

func FuzzParseReader(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add([]byte(s), 2025)
	}
	f.Fuzz(func(t *testing.T, data []byte, year int) {
		fs, err := ParseReader(bytes.NewReader(data), year)
		if err != nil {
			t.Fatalf("reading from memory failed: %v", err)
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		checkInvariants(t, fs, lines)
	})
}

func FuzzSplitPrefix(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		for line := range strings.Lines(s) {
			f.Add(line, 2025)
		}
	}
	f.Fuzz(func(t *testing.T, raw string, year int) {
		l := SplitPrefix(raw, 3, year)
		if l.N != 3 || l.Raw != raw {
			t.Fatalf("N, Raw = %d, %q", l.N, l.Raw)
		}
		// Prefixes are only removed, never rewritten: the text is part of the line.
		if !strings.Contains(raw, l.Text) {
			t.Fatalf("Text %q is not part of %q", l.Text, raw)
		}
		if l.Time != nil && (l.Time.Year() < 0 || l.Time.Year() > 10000) {
			t.Fatalf("implausible time %v", l.Time)
		}
		if l.Mono != nil && *l.Mono < 0 {
			t.Fatalf("negative uptime %v", *l.Mono)
		}
		_ = Parse([]Line{l})
	})
}

func checkInvariants(t *testing.T, fs []evidence.Finding, lines int) {
	t.Helper()
	if len(fs) > MaxFindings {
		t.Fatalf("%d findings over the cap", len(fs))
	}
	prev := 0
	for _, f := range fs {
		if !slices.Contains(evidence.Kinds, f.Kind) {
			t.Fatalf("kind %q is not a SPEC kind", f.Kind)
		}
		if f.Line < 1 || f.Line > lines || f.Line < prev {
			t.Fatalf("line %d out of range/order (lines %d, previous %d)", f.Line, lines, prev)
		}
		prev = f.Line
		if len(f.Text) > maxTextBytes+len("…") {
			t.Fatalf("text of %d bytes", len(f.Text))
		}
		if f.Source != evidence.SourceDmesg && f.Source != evidence.SourceLog {
			t.Fatalf("source %q", f.Source)
		}
		if f.Details["event"] == nil {
			t.Fatalf("finding without event: %+v", f)
		}
		if utf8.ValidString(f.Text) && !utf8.ValidString(clip(f.Text, maxTextBytes)) {
			t.Fatalf("clip broke UTF-8")
		}
	}
}
