package api

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/jsonfast"
)

// checkTrusted holds ScanRecordSpans, trusted or not, to ScanRecord on
// raw: where the validating reader takes it, the trusting one reads the
// same record to the same place, and the compact form copied from the
// spans is the one AppendCompact writes from raw.
func checkTrusted(t *testing.T, raw string) {
	t.Helper()
	want, wantOK := Record{}, false
	p := jsonfast.Scanner{S: raw}
	wantOK = ScanRecord(&p, &want)
	for _, trusted := range []bool{false, true} {
		var got Record
		var sp RecordSpans
		q := jsonfast.Scanner{S: raw}
		ok := ScanRecordSpans(&q, &got, trusted, &sp, &StrArena{})
		if !wantOK {
			if ok && !trusted {
				t.Fatalf("%q: ScanRecordSpans took what ScanRecord refused", raw)
			}
			continue
		}
		if !ok || got != want || q.I != p.I {
			t.Fatalf("%q trusted=%v: %+v %v at %d, ScanRecord read %+v at %d", raw, trusted, got, ok, q.I, want, p.I)
		}
		rec := raw[:q.I]
		if c, w := AppendCompactSpans(nil, rec, &got, &sp), AppendCompact(nil, rec, &want); !bytes.Equal(c, w) {
			t.Fatalf("%q: from the spans %s, AppendCompact %s", rec, c, w)
		}
	}
}

var trustedSeeds = []string{
	`{"seq":1,"mono_ns":5,"level":3,"facility":0,"text":"amdgpu: page fault"}`,
	`{"seq":18446744073709551615,"mono_ns":-9223372036854775808,"level":255,"facility":255,"text":"a\"b\\c\u2028","dict":"SUBSYSTEM=pci\nDEVICE=+pci:0000:c1:00.0"}`,
	`{"seq":1,"mono_ns":0,"level":0,"facility":0,"text":"x","dict":""}`,
	`{"seq":1,"mono_ns":0,"level":0,"facility":0,"text":"a\",\"dict\":\"b","dict":"\","}`,
	"{\"seq\":1,\"mono_ns\":0,\"level\":0,\"facility\":0,\"text\":\"\xff\x01\"}",
	`{"seq":01,"mono_ns":0,"level":256,"facility":0,"text":""}`,
}

func TestTrustedRecordAgrees(t *testing.T) {
	for _, s := range trustedSeeds {
		checkTrusted(t, s)
		checkTrusted(t, s+`,"more":1}`)
	}
}

// Any text: where ScanRecord reads a record, ScanRecordSpans reads the
// same, trusting or not; every record AppendJSON writes is read the same
// trusting it; and the spans' compact form is AppendCompact's.
func FuzzTrustedRecord(f *testing.F) {
	for _, s := range trustedSeeds {
		f.Add(s, uint64(1), int64(-5), uint8(3), uint8(1), "ünïcödé \x01\xff \"q\" \\", "K=V")
	}
	f.Fuzz(func(t *testing.T, raw string, seq uint64, mono int64, level, fac uint8, text, dict string) {
		checkTrusted(t, raw)
		r := Record{Seq: seq, Mono: time.Duration(mono), Level: level, Facility: fac, Text: text, Dict: dict}
		written := string(r.AppendJSON(nil))
		checkTrusted(t, written)
		var got Record
		if p := (jsonfast.Scanner{S: written}); !ScanRecordSpans(&p, &got, true, nil, nil) || !p.Done() {
			t.Fatalf("trusted reader refused AppendJSON's %s", written)
		}
	})
}

// scanUint and scanInt read what jsonfast's Scanner.Uint and Int read, to
// the same place.
func FuzzScanUint(f *testing.F) {
	for _, s := range []string{"0", "01", "-0", "18446744073709551615", "18446744073709551616", "9223372036854775807,", "-9223372036854775808", "255}", "256", "12345678901234567890123", "-", "x"} {
		f.Add(s, uint64(255))
		f.Add(s, uint64(1<<64-1))
	}
	f.Fuzz(func(t *testing.T, s string, limit uint64) {
		a, b := jsonfast.Scanner{S: s}, jsonfast.Scanner{S: s}
		v, ok := a.Uint(limit)
		w, ok2 := scanUint(&b, limit)
		if ok != ok2 || ok && (v != w || a.I != b.I) {
			t.Fatalf("Uint(%q, %d) = %d %v at %d, scanUint %d %v at %d", s, limit, v, ok, a.I, w, ok2, b.I)
		}
		a, b = jsonfast.Scanner{S: s}, jsonfast.Scanner{S: s}
		i, ok := a.Int()
		j, ok2 := scanInt(&b)
		if ok != ok2 || ok && (i != j || a.I != b.I) {
			t.Fatalf("Int(%q) = %d %v at %d, scanInt %d %v at %d", s, i, ok, a.I, j, ok2, b.I)
		}
	})
}

// StrArena's reading of a string is Scanner.Str's, to the same place, and
// what it handed out before stays as it was.
func FuzzArenaStr(f *testing.F) {
	for _, s := range []string{`"a\"b"`, `"\ud83d\ude80 \u00e9\n\t\/"x`, `"\ud800"`, `"\ud800\u0041"`, `"\u12"`, "\"\xff\\n\"", "\"\x01\\n\"", `"\\"`, `"\\\"`, `"\q"`, `"plain"`, `""`, "\"0123456789\xffabc\"", "\"0123456789\x1fabc\"", "\"ünïcödé 🚀\"", "\"\x7f\xe2\x80\xa8\""} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		var a StrArena
		a.buf = make([]byte, 0, n&63) // a chunk nearly full, at times
		var kept []string
		var copies []string
		for range 3 {
			p, q := jsonfast.Scanner{S: s}, jsonfast.Scanner{S: s}
			want, ok := p.Str()
			got, ok2 := a.str(&q)
			if ok != ok2 || ok && (got != want || p.I != q.I) {
				t.Fatalf("Str(%q) = %q %v at %d, arena %q %v at %d", s, want, ok, p.I, got, ok2, q.I)
			}
			kept, copies = append(kept, got), append(copies, strings.Clone(got))
		}
		for i := range kept {
			if kept[i] != copies[i] {
				t.Fatalf("string %d changed: %q, was %q", i, kept[i], copies[i])
			}
		}
	})
}

// stopAt, eight bytes at a time, finds the byte a loop over each finds.
func FuzzStopAt(f *testing.F) {
	for _, s := range []string{`plain text, nothing to stop at`, `apparmor=\"DENIED\" operation=\"open\"`, "a\x1fb\"c\\d", "\x00\xff\x7f\x80\xa0\x20\x21\x22", "ünïcödé 🚀 \"", "\xe2\x80\xa8\\u2028"} {
		f.Add(s, 0)
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, i int) {
		if i < 0 || i > len(s) {
			i = 0
		}
		want := len(s)
		for k := i; k < len(s); k++ {
			if c := s[k]; c == '"' || c == '\\' || c < 0x20 {
				want = k
				break
			}
		}
		if got := stopAt(s, i); got != want {
			t.Fatalf("stopAt(%q, %d) = %d, want %d", s, i, got, want)
		}
	})
}
