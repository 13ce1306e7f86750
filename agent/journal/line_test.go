package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kcrash/kcrash/agent/api"
)

func encoded(t testing.TB, e Entry) []byte {
	e.Wall = e.Wall.UTC()
	b, err := appendLine(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	// What encoding/json writes, byte for byte: the hand-written line is
	// only faster.
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&e); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("appendLine wrote %s\nencoding/json     %s", b, want.Bytes())
	}
	return bytes.TrimSuffix(b, []byte("\n"))
}

var lineSeeds = []Entry{
	rec(1, t0, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) (x86_64-linux-gnu-gcc-13)"),
	{Boot: testBoot, Wall: t0.Add(1500 * time.Microsecond), Rec: api.Record{Seq: 1 << 40, Mono: 5 * time.Hour, Level: 3, Facility: 0,
		Text: "amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32770)\n\t\"quoted\" \\ back <->",
		Dict: "SUBSYSTEM=pci\nDEVICE=+pci:0000:c1:00.0"}},
	{Boot: testBoot, Wall: t0, Rec: api.Record{Seq: 9, Facility: 1, Level: 6, Text: "kcrash-test[abc]: ünïcödé 🚀 \x7f"}},
	{Boot: testBoot, Wall: t0, Gap: &GapInfo{From: 3, To: 9, Why: "overwritten"}},
	{Boot: testBoot, Wall: t0, Rec: api.Record{Seq: 10, Text: "Out of memory: Killed process 4242 (python)"},
		Subject: Subject{Procs: []Proc{{Pid: 4242, UID: 1000, Cgroup: "/user.slice"}}}},
	{Boot: testBoot, Wall: t0, Rec: api.Record{Seq: 11, Text: "amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32770, for process python3 pid 77 thread python3 pid 78)"},
		Subject: Subject{Procs: []Proc{{Pid: 77, UID: -1}, {Pid: 78, UID: 0, Cgroup: "/slurm/uid_1000/job_42/step_0"}},
			Devices: []Device{{BDF: "0000:c1:00.0", Holders: []Holder{{Pid: 77, UID: 1000}, {Pid: 9, UID: -1, Cgroup: "/\"quoted\""}}}, {BDF: "0000:3b:00.0"}}}},
	{Boot: testBoot, Wall: t0, Rec: api.Record{Seq: 12, Text: "amdgpu 0000:c1:00.0:   GCVM_L2_PROTECTION_FAULT_STATUS:0x00800932"},
		Subject: Subject{Procs: []Proc{{Pid: 77, UID: 1000}}, Inherited: true}},
	{Boot: testBoot, Wall: t0, Rec: api.Record{Seq: 13, Text: "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."},
		Subject: Subject{Devices: []Device{{BDF: "0000:3b:00.0", Holders: []Holder{{Pid: 5, UID: 1001}}, Nodes: []string{"c 195:0"}}}}},
	{Boot: testBoot, Wall: t0, Rec: api.Record{Seq: 14, Text: "amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!"},
		Subject: Subject{Devices: []Device{{BDF: "0000:c1:00.0", Nodes: []string{"c 226:0", "c 226:128", "c 235:0"}}}}},
}

// The hand-read fast path and encoding/json agree on every line: where one
// reads a line the other reads the same entry, and what json rejects the
// journal skips.
func FuzzJournalLine(f *testing.F) {
	for _, e := range lineSeeds {
		f.Add(encoded(f, e))
	}
	f.Add([]byte(`{"boot":"b","wall":"2026-03-01T12:00:00Z","rec":{"seq":01,"mono_ns":0,"level":0,"facility":0,"text":""}}`))
	f.Add([]byte(`{"boot":"b","wall":"2026-03-01T12:00:00Z","rec":{"seq":1,"mono_ns":-5,"level":256,"facility":0,"text":"\ud800"}}`))
	f.Add([]byte(`{"boot":"b","wall":"2026-03-01T12:00:00Z","rec":{"seq":1,"mono_ns":0,"level":0,"facility":0,"text":"\xff\u00e9\ud83d\ude80"}}`))
	f.Add([]byte("{\"boot\":\"b\",\"wall\":\"2026-03-01T12:00:00Z\",\"rec\":{\"seq\":1,\"mono_ns\":0,\"level\":0,\"facility\":0,\"text\":\"\t\"}}"))
	f.Fuzz(func(t *testing.T, line []byte) {
		var d lineDecoder
		var got Entry
		gotErr := d.decode(string(line), &got)
		var want Entry
		wantErr := json.Unmarshal(line, &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("journal: %v, json: %v", gotErr, wantErr)
		}
		if gotErr != nil {
			return
		}
		if !sameEntry(got, want) {
			t.Fatalf("journal read %+v\njson read    %+v", got, want)
		}
		// A reader that skips subjects (root's query) reads the rest the
		// same, and the same record text.
		bare := lineDecoder{noSubject: true}
		var gotBare Entry
		if err := bare.decode(string(line), &gotBare); err != nil {
			t.Fatalf("without subjects: %v", err)
		}
		wantBare := got
		if bare.rec != "" {
			// The fast path left the subject out; encoding/json, which
			// reads what it does not take, reads it all.
			wantBare.Subject = Subject{}
		}
		if !sameEntry(noEmpty(gotBare), noEmpty(wantBare)) {
			t.Fatalf("without subjects read %+v\nwant %+v", gotBare, wantBare)
		}
		// The record text handed out is the record read (a subject the
		// full reader sends to encoding/json, "{}", is skipped here).
		if bare.rec != "" {
			var r api.Record
			if err := json.Unmarshal([]byte(bare.rec), &r); err != nil || r != gotBare.Rec || d.rec != "" && d.rec != bare.rec {
				t.Fatalf("without subjects: rec %q (%v), want the record %+v (full reader: %q)", bare.rec, err, gotBare.Rec, d.rec)
			}
		}
		// What the journal writes, it reads back the same (as JSON: an
		// empty list in a subject comes back as none).
		if got.Wall.Year() < 0 || got.Wall.Year() > 9999 {
			return // RFC 3339 cannot write it
		}
		again := encoded(t, got)
		var back Entry
		if err := d.decode(string(again), &back); err != nil || !sameEntry(noEmpty(back), noEmpty(got)) {
			t.Fatalf("round trip of %s: %+v (%v)", again, back, err)
		}
		if w, ok := wallOf(string(again)); !ok || !w.Equal(got.Wall) {
			t.Fatalf("wallOf(%s) = %v %v", again, w, ok)
		}
		// A user's query judges a line by its subject, found without
		// reading the record: the boot and subject the full reader reads,
		// and every subject the journal writes is found so.
		for _, l := range [][]byte{line, again} {
			boot, subject, ok := lineSubject(string(l))
			var full Entry
			if !ok || d.decode(string(l), &full) != nil {
				continue
			}
			var s Subject
			if !ParseSubject(subject, &s) {
				continue // the query decodes the line and judges it so
			}
			if boot != full.Boot || !sameEntry(noEmpty(Entry{Subject: s}), noEmpty(Entry{Subject: full.Subject})) {
				t.Fatalf("lineSubject(%s) = %q %q %v, want %q %+v", l, boot, subject, ok, full.Boot, full.Subject)
			}
		}
		// A line the journal wrote is found the same from its end.
		if b, sub, ok := lineSubject(string(again)); ok {
			if tb, tsub, tok := lineSubjectTrusted(string(again)); !tok || tb != b || tsub != sub {
				t.Fatalf("lineSubjectTrusted(%s) = %q %q %v, lineSubject %q %q", again, tb, tsub, tok, b, sub)
			}
		}
		named := len(got.Subject.Procs) > 0 || len(got.Subject.Devices) > 0 || got.Subject.Inherited
		if _, subject, ok := lineSubject(string(again)); got.Gap == nil && named && (!ok || !ParseSubject(subject, new(Subject))) {
			t.Fatalf("lineSubject(%s) did not find its subject (%q)", again, subject)
		}
	})
}

func noEmpty(e Entry) Entry {
	s := &e.Subject
	if len(s.Procs) == 0 {
		s.Procs = nil
	}
	if len(s.Devices) == 0 {
		s.Devices = nil
	}
	for i := range s.Devices {
		if len(s.Devices[i].Holders) == 0 {
			s.Devices[i].Holders = nil
		}
		if len(s.Devices[i].Nodes) == 0 {
			s.Devices[i].Nodes = nil
		}
	}
	return e
}

func sameEntry(a, b Entry) bool {
	if !a.Wall.Equal(b.Wall) {
		return false
	}
	a.Wall, b.Wall = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func TestFastPathTakesPlainRecords(t *testing.T) {
	var d lineDecoder
	var e Entry
	for _, seed := range lineSeeds {
		if seed.Gap != nil {
			if d.fast(string(encoded(t, seed)), &e) {
				t.Errorf("fast path took %s, a gap", encoded(t, seed))
			}
			continue
		}
		if !d.fast(string(encoded(t, seed)), &e) {
			t.Errorf("fast path refused %s", encoded(t, seed))
		}
		if !sameEntry(e, seed) {
			t.Errorf("fast path read %+v, want %+v", e, seed)
		}
	}
	// Without subjects, a line with one is read on the fast path still,
	// its subject left empty.
	bare := lineDecoder{noSubject: true}
	for _, seed := range lineSeeds {
		if seed.Gap != nil {
			continue
		}
		if !bare.fast(string(encoded(t, seed)), &e) {
			t.Errorf("fast path without subjects refused %s", encoded(t, seed))
		}
		want := seed
		want.Subject = Subject{}
		if !sameEntry(e, want) {
			t.Errorf("fast path without subjects read %+v, want %+v", e, want)
		}
	}
	// A subject in another shape than appendLine's goes to encoding/json.
	for _, odd := range []string{`{}`, `{"procs":[]}`, `{"devices":[{"bdf":"x"}],"procs":[{"pid":1,"uid":2}]}`, `{"inherited":false}`, `{"procs":[{"uid":2,"pid":1}]}`} {
		line := bytes.Replace(encoded(t, lineSeeds[0]), []byte(`}}`), []byte(`},"subject":`+odd+`}`), 1)
		if d.fast(string(line), &e) {
			t.Errorf("fast path took %s", line)
		}
	}
}

// Whatever a segment file holds (a torn write, zeros from a disk, another
// program's lines), Open reads it, counts every line as an entry or as
// corrupt, and the journal goes on.
func FuzzJournalSegment(f *testing.F) {
	var whole []byte
	for _, e := range lineSeeds {
		whole = append(append(whole, encoded(f, e)...), '\n')
	}
	f.Add(whole)
	f.Add(whole[:len(whole)-17])
	f.Add(append([]byte("\x00\x00\n\n"), whole...))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "journal"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "journal", segmentName(1)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := Open(dir, Limits{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer j.Close()
		lines := int64(bytes.Count(data, []byte("\n")))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			lines++
		}
		st := j.Stats()
		if st.Records+st.Gaps+j.Corrupt() != lines {
			t.Fatalf("%d records + %d gaps + %d corrupt, in %d lines", st.Records, st.Gaps, j.Corrupt(), lines)
		}
		n := int64(0)
		if err := j.Query(context.Background(), time.Time{}, time.Time{}, func(*Entry) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		if n > st.Records+st.Gaps {
			t.Fatalf("query returned %d entries of %d", n, st.Records+st.Gaps)
		}
		last := rec(1<<40, time.Now(), "after")
		if err := j.Append(last); err != nil {
			t.Fatal(err)
		}
		var got *Entry
		j.Query(context.Background(), time.Time{}, time.Time{}, func(e *Entry) bool { got = e; return true })
		if got == nil || got.Rec.Seq != 1<<40 {
			t.Fatalf("the entry appended last reads back as %+v", got)
		}
	})
}

// Subjects in every shape a caller could build (empty lists that are not
// nil, a device with neither holders nor nodes, escapes in a cgroup) are
// written as encoding/json writes them (encoded compares the two).
func TestSubjectLineIsEncodingJSONs(t *testing.T) {
	for _, s := range []Subject{
		{Procs: []Proc{}},
		{Devices: []Device{}, Inherited: true},
		{Procs: []Proc{{Pid: 1, UID: -1, Cgroup: "/a\tb\"c\\ü\u2028"}}, Devices: []Device{{BDF: "", Holders: []Holder{}, Nodes: []string{}}}},
		{Devices: []Device{{BDF: "0000:c1:00.0", Nodes: []string{"c 226:128", "<b>"}}, {BDF: "0000:3b:00.0", Holders: []Holder{{Pid: 1 << 30, UID: 1 << 31}}}}},
	} {
		e := rec(20, t0, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1")
		e.Subject = s
		encoded(t, e)
	}
}

// parseWall reads what time's own reader reads, the same instant and
// location, or gives up where it gives up.
func FuzzParseWall(f *testing.F) {
	for _, s := range []string{"2026-03-01T12:00:00Z", "2026-03-01T12:00:00.123456789Z", "2026-03-01T12:00:00.1Z", "2024-02-29T23:59:59.5Z",
		"2023-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-03-01T24:00:00Z", "2026-03-01T12:00:60Z", "2026-03-01T12:00:00.Z",
		"2026-03-01T12:00:00.1234567891Z", "2026-03-01T12:00:00+01:00", "2026-03-01T12:00:00,5Z", "0000-01-01T00:00:00Z", "2026-3-01T12:00:00Z", "20x6-03-01T12:00:00Z", "0000-01-01T0:00:00+00:01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseWall(s)
		var want time.Time
		wantErr := want.UnmarshalText([]byte(s))
		if ok != (wantErr == nil) {
			t.Fatalf("parseWall(%q) ok %v, time: %v", s, ok, wantErr)
		}
		// A fixed zone is a new *Location at each reading: UTC's readings
		// are equal as values.
		if ok && (!got.Equal(want) || got.Location().String() != want.Location().String() || want.Location() == time.UTC && got != want) {
			t.Fatalf("parseWall(%q) = %v, time %v", s, got, want)
		}
	})
}

// plainText, eight bytes at a time, says what a loop over each byte and
// utf8.ValidString say.
func FuzzPlainText(f *testing.F) {
	for _, s := range []string{"0f0a2b9c-2d4e-4b8e-9f6a-1c2d3e4f5a6b", "\xba", `a\u0041b`, "0f0a2b9c-2d4e-4b8e\x7f9f6a", "0f0a2b9c\x1f2d4e", "ü0f0a2b9c-2d4e-4b8e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := utf8.ValidString(s)
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '\\' {
				want = false
			}
		}
		if got := plainText(s); got != want {
			t.Fatalf("plainText(%q) = %v", s, got)
		}
	})
}
