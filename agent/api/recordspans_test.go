package api

import (
	"bytes"
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
		ok := ScanRecordSpans(&q, &got, trusted, &sp)
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
		if p := (jsonfast.Scanner{S: written}); !ScanRecordSpans(&p, &got, true, nil) || !p.Done() {
			t.Fatalf("trusted reader refused AppendJSON's %s", written)
		}
	})
}
