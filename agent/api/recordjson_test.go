package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

var answerSeeds = []KmsgResponse{
	{BootID: "b", Records: []Record{}},
	{BootID: "6c1a1b4e-7d2f-4a59-9a3e-0c6f1d2b3a4c", BootTime: time.Date(2026, 3, 1, 11, 0, 0, 123456789, time.UTC),
		Records: []Record{
			{Seq: 1, Mono: 5 * time.Second, Level: 3, Text: "amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault <->\n\t\"quoted\" \\ ünï 🚀 \u2028 \x7f \x01"},
			{Seq: 1 << 63, Mono: -1, Level: 7, Facility: 1, Text: "kcrash-test[abc]: x", Dict: "SUBSYSTEM=pci\nDEVICE=+pci:0000:c1:00.0"},
			{Text: "bad utf-8 \xff\xfe"},
		},
		Gaps: []Gap{{From: 3, To: 9}, {From: 1 << 40, To: 1<<40 + 1}}, Withheld: 42,
		JournalStart: time.Date(2026, 2, 28, 0, 0, 0, 0, time.FixedZone("x", 3600)), Notes: []string{"one & <two>", ""}},
	{BootID: "b", Records: nil, Withheld: -1},
}

func jsonOf(t testing.TB, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The hand-written answer is what encoding/json writes, and reads back as
// encoding/json reads it.
func TestKmsgResponseJSON(t *testing.T) {
	for _, k := range answerSeeds {
		got := k.AppendJSON(nil)
		if want := jsonOf(t, &k); !bytes.Equal(got, want) {
			t.Errorf("AppendJSON wrote\n%s\nencoding/json\n%s", got, want)
		}
		var want KmsgResponse
		if err := json.Unmarshal(got, &want); err != nil {
			t.Fatal(err)
		}
		if !scanKmsgResponse(string(got), new(KmsgResponse)) {
			t.Errorf("the fast path refused %s", got)
		}
		back, err := DecodeKmsgResponse(got)
		if err != nil || !sameAnswer(back, want) {
			t.Errorf("read back %+v (%v)\nwant %+v", back, err, want)
		}
	}
}

func sameAnswer(a, b KmsgResponse) bool {
	if !a.BootTime.Equal(b.BootTime) || !a.JournalStart.Equal(b.JournalStart) {
		return false
	}
	a.BootTime, b.BootTime, a.JournalStart, b.JournalStart = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// Whatever an answer holds, the hand reader and encoding/json agree.
func FuzzDecodeKmsgResponse(f *testing.F) {
	for _, k := range answerSeeds {
		f.Add(k.AppendJSON(nil))
	}
	f.Add([]byte(`{"boot_id":"b","boot_time":"2026-03-01T12:00:00Z","records":[{"seq":01,"mono_ns":0,"level":0,"facility":0,"text":""}],"withheld":0}`))
	f.Add([]byte(`{"boot_id":"b","boot_time":"2026-03-01T12:00:00Z","records":[{"seq":1,"mono_ns":0,"level":0,"facility":0,"text":"\ud800"}],"withheld":0}`))
	for _, k := range answerSeeds[:2] {
		f.Add(compactOf(&k, true))
	}
	f.Add([]byte(`{"boot_id":"b","boot_time":"2026-03-01T12:00:00Z","count":3,"recs":[[1,2,3,4,"t","d"],[1,2,3,4,"t",null],[1,2,3,4]],"withheld":0}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotErr := DecodeKmsgResponse(body)
		// encoding/json, the compact form's arrays read item by item.
		want, wantErr := unmarshalKmsgResponse(body)
		// (encoding/json folds a key's case, Unicode's too, and unescapes
		// it: only a plain ASCII body without "recs" is surely without.)
		if !bytes.Contains(bytes.ToLower(body), []byte(`recs`)) && !bytes.Contains(body, []byte(`\u`)) && plainBytes(body) {
			var plain KmsgResponse
			if err := json.Unmarshal(body, &plain); (err == nil) != (wantErr == nil) || err == nil && !sameAnswer(plain, want) {
				t.Fatalf("without a compact list: %+v (%v), json read %+v (%v)", want, wantErr, plain, err)
			}
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("hand: %v, json: %v", gotErr, wantErr)
		}
		if gotErr == nil && !sameAnswer(got, want) {
			t.Fatalf("hand read %+v\njson read %+v", got, want)
		}
	})
}

func plainBytes(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
