package journal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
)

// decoded is what a query hands out for a line: the entry, the record's
// text, and its compact form copied from the spans.
type decoded struct {
	e       Entry
	rec     string
	compact string
	err     bool
}

func decodeAll(lines []string, fresh, trusted, noSubject bool) []decoded {
	d := lineDecoder{trusted: trusted, noSubject: noSubject}
	var out []decoded
	for _, l := range lines {
		if fresh {
			d = lineDecoder{trusted: trusted, noSubject: noSubject}
		}
		var e Entry
		err := d.decode(l, &e)
		x := decoded{e: noEmpty(e), rec: d.rec, err: err != nil}
		if err == nil && d.rec != "" {
			x.compact = string(api.AppendCompactSpans(nil, d.rec, &e.Rec, &d.spans))
			if want := string(api.AppendCompact(nil, d.rec, &e.Rec)); x.compact != want {
				x.compact = "spans " + x.compact + " AppendCompact " + want
			}
		}
		out = append(out, x)
	}
	return out
}

func sameDecoded(t *testing.T, what string, got, want []decoded) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if g.err != w.err || g.rec != w.rec || g.compact != w.compact || !sameEntry(g.e, w.e) || !reflect.DeepEqual(g.e.Subject, w.e.Subject) {
			t.Fatalf("%s, line %d:\n%+v\nwant %+v", what, i, g, w)
		}
		if strings.HasPrefix(g.compact, "spans ") {
			t.Fatalf("%s, line %d: %s", what, i, g.compact)
		}
	}
}

// A decoder reading lines one after another (the boot and the wall's hour
// it keeps from line to line) reads each as a fresh one does; trusting
// the lines reads those the validating fast path takes, and every line
// appendLine writes, the same.
func FuzzTrustedLine(f *testing.F) {
	for _, e := range lineSeeds {
		f.Add(encoded(f, e))
	}
	f.Add([]byte(`{"boot":"5f0c1c7e-1b7a-4a1e-9d3c-0e6f2b4c8a11","wall":"` + t0.Format(time.RFC3339Nano) + `","rec":{"seq":1,"mono_ns":0,"level":0,"facility":0,"text":"\u0041\x01"}}`))
	f.Add([]byte(`{"boot":"5f0c1c7e-1b7a-4a1e-9d3c-0e6f2b4c8a11","wall":"2026-02-29T12:30:00Z","rec":{"seq":1,"mono_ns":0,"level":0,"facility":0,"text":"x"}}`))
	f.Add([]byte(`{"boot":"5f0c1c7e-1b7a-4a1e-9d3c-0e6f2b4c8a11\"","wall":"2026-03-01T12:59:60Z","rec":{"seq":1,"mono_ns":0,"level":0,"facility":0,"text":"x"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var seeds []string
		for _, e := range lineSeeds {
			seeds = append(seeds, string(encoded(t, e)))
		}
		// The line among lines of the same boot and hour, before and
		// after them, and again as appendLine writes what it read.
		lines := append(append([]string{string(line)}, seeds...), string(line))
		written := map[int]bool{}
		for i := range seeds {
			written[1+i] = true
		}
		var e Entry
		var d lineDecoder
		if d.decode(string(line), &e) == nil && e.Wall.Year() >= 0 && e.Wall.Year() <= 9999 {
			written[len(lines)] = true
			lines = append(lines, string(encoded(t, e)))
			e.Wall = e.Wall.Add(time.Hour)
			e.Boot += "x"
			written[len(lines)] = true
			lines = append(lines, string(encoded(t, e)), string(line))
		}
		for _, noSubject := range []bool{false, true} {
			want := decodeAll(lines, true, false, noSubject)
			sameDecoded(t, "one decoder", decodeAll(lines, false, false, noSubject), want)
			trusting := decodeAll(lines, false, true, noSubject)
			for i := range lines {
				if want[i].rec == "" && !written[i] {
					// Left to encoding/json by the validating fast path,
					// and not appendLine's: a trusted segment holds no
					// such line.
					trusting[i] = want[i]
				}
			}
			sameDecoded(t, "trusting", trusting, want)
		}
	})
}

// writeJournal fills a journal of several segments under dir and closes
// it: every line appendLine's.
func writeJournal(t *testing.T, dir string, n int) {
	t.Helper()
	j, err := Open(dir, Limits{MaxBytes: 64 << 20, SegmentBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		e := rec(uint64(i), t0.Add(time.Duration(i)*time.Second), fmt.Sprintf("NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python, ESR 0x%06x \"q\"", 1000+i, i))
		if i%5 == 0 {
			e.Rec.Dict = "SUBSYSTEM=pci\nDEVICE=+pci:0000:c1:00.0"
		}
		if i%7 == 0 {
			e.Subject.Procs = []Proc{{Pid: 1000 + i, UID: 1000, Cgroup: "/user.slice"}}
		}
		if err := j.Append(e); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if err := j.Append(Entry{Boot: testBoot, Wall: e.Wall, Gap: &GapInfo{From: uint64(i), To: uint64(i), Why: "overwritten"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// scanned is all a root's and a user's ScanNewest hand out.
func scanned(t *testing.T, j *Journal) []decoded {
	t.Helper()
	var out []decoded
	for _, subjects := range []bool{false, true} {
		err := j.ScanNewest(context.Background(), time.Time{}, time.Time{}, subjects, nil, func(e *Entry, rec string, sp *api.RecordSpans) bool {
			x := decoded{e: noEmpty(*e), rec: rec}
			x.e.Boot = strings.Clone(e.Boot)
			x.e.Rec.Text, x.e.Rec.Dict = strings.Clone(e.Rec.Text), strings.Clone(e.Rec.Dict)
			x.e.Subject = Subject{}
			if subjects {
				x.e.Subject = noEmpty(Entry{Subject: *e.Subject.clone()}).Subject
			}
			if sp != nil {
				x.compact = string(api.AppendCompactSpans(nil, rec, &e.Rec, sp))
				x.rec = strings.Clone(rec)
			}
			out = append(out, x)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// clone copies s and its strings too: a string of ScanNewest's, a view
// of a block read into a buffer that the next block is read into, is good
// only until its callback returns.
func (s Subject) clone() *Subject {
	c := s
	c.Procs = append([]Proc(nil), s.Procs...)
	for i := range c.Procs {
		c.Procs[i].Cgroup = strings.Clone(c.Procs[i].Cgroup)
	}
	c.Devices = append([]Device(nil), s.Devices...)
	for i := range c.Devices {
		d := &c.Devices[i]
		d.BDF = strings.Clone(d.BDF)
		d.Holders = append([]Holder(nil), d.Holders...)
		for k := range d.Holders {
			d.Holders[k].Cgroup = strings.Clone(d.Holders[k].Cgroup)
		}
		d.Nodes = append([]string(nil), d.Nodes...)
		for k := range d.Nodes {
			d.Nodes[k] = strings.Clone(d.Nodes[k])
		}
	}
	return &c
}

// scanBoth is scanned, trusting the journal's own segments and not.
func scanBoth(t *testing.T, j *Journal) (trusting, validating []decoded) {
	t.Helper()
	trusting = scanned(t, j)
	trustOwnLines = false
	defer func() { trustOwnLines = true }()
	return trusting, scanned(t, j)
}

// Segments the journal wrote are trusted, and a damaged one is read
// validating every line, as before: damage found at Open (a control
// character and invalid UTF-8 in a text, a torn line) makes the segment
// untrusted; damage to a trusted segment after Open that breaks a line's
// shape sends that line to the validating reader. Either way the query
// hands out what the validating reader does.
func TestTrustedSegments(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, 600)
	j, err := Open(dir, Limits{MaxBytes: 64 << 20, SegmentBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(j.segs) < 4 {
		t.Fatalf("%d segments", len(j.segs))
	}
	for _, s := range j.segs {
		if !s.trusted {
			t.Fatalf("segment %d, read through at Open, untrusted", s.num)
		}
	}
	a, b := scanBoth(t, j)
	sameDecoded(t, "intact", a, b)
	j.Close()

	seg := func(i int) string { return filepath.Join(dir, "journal", segmentName(uint64(i))) }
	data, err := os.ReadFile(seg(2))
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte("name=python, ESR"), []byte("name=py\x01on, ESR"), 1)
	data = bytes.Replace(data, []byte("name=python, ESR"), []byte("name=py\xffon, ESR"), 1)
	data = append(data, `{"boot":"x","wall":"2026-03-01T12:0`...)
	if err := os.WriteFile(seg(2), data, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err = Open(dir, Limits{MaxBytes: 64 << 20, SegmentBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, s := range j.segs {
		if s.trusted != (s.num != 2) {
			t.Fatalf("segment %d trusted=%v after segment 2 was damaged", s.num, s.trusted)
		}
	}
	if j.Corrupt() != 2 { // the control character's line and the torn one
		t.Fatalf("corrupt = %d", j.Corrupt())
	}
	a, b = scanBoth(t, j)
	sameDecoded(t, "damaged before Open", a, b)
	if bytes.Contains([]byte(fmt.Sprint(a)), []byte("py\xffon")) || !bytes.Contains([]byte(fmt.Sprint(a)), []byte("py\uFFFDon")) {
		t.Fatal("the invalid UTF-8 was not read as encoding/json reads it")
	}

	// Damage in place to a trusted segment after Open: a key, a number,
	// a text's closing quote and the line's end.
	data, err = os.ReadFile(seg(3))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{`,"text":`, `,"texx":`}, {`"level":4`, `"level":x`}, {`\"q\""}`, `\"q\\"}`}, {`"q\""}}`, `"q\""}]`}} {
		if !bytes.Contains(data, []byte(r[0])) {
			t.Fatalf("segment 3 holds no %s", r[0])
		}
		data = bytes.Replace(data, []byte(r[0]), []byte(r[1]), 1)
	}
	if err := os.WriteFile(seg(3), data, 0o600); err != nil {
		t.Fatal(err)
	}
	a, b = scanBoth(t, j)
	sameDecoded(t, "damaged after Open", a, b)
	if len(a) >= 2*(600+12) {
		t.Fatalf("%d entries: the damaged lines were read", len(a)/2)
	}
}
