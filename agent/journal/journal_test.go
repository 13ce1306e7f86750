package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
)

const testBoot = "5f0c1c7e-1b7a-4a1e-9d3c-0e6f2b4c8a11"

// t0 is recent: retention by age (7 days by default) runs at every segment roll.
var t0 = time.Now().UTC().Truncate(time.Second).Add(-2 * time.Hour)

func rec(seq uint64, wall time.Time, text string) Entry {
	return Entry{Boot: testBoot, Wall: wall, Rec: api.Record{
		Seq: seq, Mono: time.Duration(seq) * time.Millisecond, Level: 4, Text: text,
	}}
}

// fill appends n records one second apart from t0, seq from 1.
func fill(t testing.TB, j *Journal, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		text := fmt.Sprintf("NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python, Graphics Exception: ESR 0x%06x", 1000+i, i)
		if err := j.Append(rec(uint64(i), t0.Add(time.Duration(i)*time.Second), text)); err != nil {
			t.Fatal(err)
		}
	}
}

func query(t testing.TB, j *Journal, since, until time.Time) []uint64 {
	t.Helper()
	var seqs []uint64
	if err := j.Query(context.Background(), since, until, func(e *Entry) bool {
		if e.Gap == nil {
			seqs = append(seqs, e.Rec.Seq)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return seqs
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func sameSeqs(t *testing.T, what string, got, want []uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries %v, want %d %v", what, len(got), trim(got), len(want), trim(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: entry %d is seq %d, want %d", what, i, got[i], want[i])
		}
	}
}

func trim(s []uint64) []uint64 {
	if len(s) > 8 {
		return append(append([]uint64{}, s[:4]...), s[len(s)-4:]...)
	}
	return s
}

func TestQueryWindows(t *testing.T) {
	// Small segments, so that windows cross segment and block edges.
	j, err := Open(t.TempDir(), Limits{SegmentBytes: 150 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 3000 // ~450 KiB: several segments of several blocks
	fill(t, j, n)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

	sameSeqs(t, "everything", query(t, j, time.Time{}, time.Time{}), seqRange(1, n))
	sameSeqs(t, "[10s, 20s]", query(t, j, at(10), at(20)), seqRange(10, 20))
	sameSeqs(t, "since 2990s", query(t, j, at(2990), time.Time{}), seqRange(2990, n))
	sameSeqs(t, "until 5s", query(t, j, time.Time{}, at(5)), seqRange(1, 5))
	sameSeqs(t, "across segments", query(t, j, at(500), at(2500)), seqRange(500, 2500))
	sameSeqs(t, "between records", query(t, j, at(7).Add(time.Millisecond), at(8).Add(-time.Millisecond)), nil)
	sameSeqs(t, "after the end", query(t, j, at(n+1), time.Time{}), nil)
	sameSeqs(t, "before the start", query(t, j, time.Time{}, at(0)), nil)
	sameSeqs(t, "reversed", query(t, j, at(20), at(10)), nil)
	if segs, _ := filepath.Glob(filepath.Join(j.dir, "*.jsonl")); len(segs) < 3 {
		t.Errorf("%d segments, want several: %v", len(segs), segs)
	}

	// fn returning false stops the query.
	var got []uint64
	j.Query(context.Background(), at(100), time.Time{}, func(e *Entry) bool {
		got = append(got, e.Rec.Seq)
		return len(got) < 3
	})
	sameSeqs(t, "stopped after 3", got, seqRange(100, 102))

	// A cancelled query says so.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := j.Query(ctx, time.Time{}, time.Time{}, func(*Entry) bool { return true }); err != context.Canceled {
		t.Errorf("cancelled query: %v", err)
	}

	// Entries come back whole.
	j.Query(context.Background(), at(42), at(42), func(e *Entry) bool {
		want := rec(42, at(42), "")
		if e.Boot != testBoot || !e.Wall.Equal(want.Wall) || e.Rec.Mono != want.Rec.Mono || e.Rec.Level != 4 ||
			e.Rec.Text != "NVRM: Xid (PCI:0000:3b:00): 13, pid=1042, name=python, Graphics Exception: ESR 0x00002a" {
			t.Errorf("entry 42 = %+v", e)
		}
		return true
	})

	// Only the segments that meet the window are read: emptied under the
	// journal, the oldest one is missed by a query of it and by no other.
	if err := os.Truncate(filepath.Join(j.dir, segmentName(1)), 0); err != nil {
		t.Fatal(err)
	}
	sameSeqs(t, "recent, oldest segment emptied", query(t, j, at(2500), time.Time{}), seqRange(2500, n))
	if got := query(t, j, time.Time{}, time.Time{}); len(got) >= n || got[len(got)-1] != n {
		t.Errorf("a query of everything read %d entries, ending %v, with the first segment emptied", len(got), trim(got))
	}
}

// QueryNewest gives what Query gives, newest first, across segment and
// block edges, and stops where fn says.
func TestQueryNewest(t *testing.T) {
	j, err := Open(t.TempDir(), Limits{SegmentBytes: 150 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 3000
	fill(t, j, n)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	newest := func(since, until time.Time) []uint64 {
		var seqs []uint64
		if err := j.QueryNewest(context.Background(), since, until, func(e *Entry) bool {
			seqs = append(seqs, e.Rec.Seq)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return seqs
	}
	for _, w := range []struct {
		name         string
		since, until time.Time
	}{
		{"everything", time.Time{}, time.Time{}},
		{"[10s, 20s]", at(10), at(20)},
		{"across segments", at(500), at(2500)},
		{"since 2990s", at(2990), time.Time{}},
		{"between records", at(7).Add(time.Millisecond), at(8).Add(-time.Millisecond)},
	} {
		want := query(t, j, w.since, w.until)
		slices.Reverse(want)
		sameSeqs(t, "newest first, "+w.name, newest(w.since, w.until), want)
	}
	var got []uint64
	j.QueryNewest(context.Background(), at(100), at(2000), func(e *Entry) bool {
		got = append(got, e.Rec.Seq)
		return len(got) < 3
	})
	sameSeqs(t, "newest first, stopped after 3", got, []uint64{2000, 1999, 1998})
}

func TestRestartKeepsCursorAndEntries(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if c := j.Cursor(); c != (Cursor{}) {
		t.Fatalf("a new journal's cursor = %+v", c)
	}
	fill(t, j, 50)
	gap := Entry{Boot: testBoot, Wall: t0.Add(60 * time.Second), Gap: &GapInfo{From: 51, To: 59, Why: "agent down"}}
	if err := j.Append(gap, rec(60, t0.Add(60*time.Second), "after the gap")); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	var onDisk Cursor
	if b, err := os.ReadFile(filepath.Join(dir, "cursor.json")); err != nil || json.Unmarshal(b, &onDisk) != nil {
		t.Fatalf("cursor.json: %s %v", b, err)
	}
	if want := (Cursor{BootID: testBoot, Seq: 60}); onDisk != want || j.Cursor() != want {
		t.Fatalf("cursor %+v, on disk %+v, want %+v", j.Cursor(), onDisk, want)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j, err = Open(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if c := j.Cursor(); c != (Cursor{BootID: testBoot, Seq: 60}) {
		t.Fatalf("cursor after reopen = %+v", c)
	}
	sameSeqs(t, "after reopen", query(t, j, time.Time{}, time.Time{}), append(seqRange(1, 50), 60))
	var gaps []GapInfo
	j.Query(context.Background(), time.Time{}, time.Time{}, func(e *Entry) bool {
		if e.Gap != nil {
			gaps = append(gaps, *e.Gap)
		}
		return true
	})
	if len(gaps) != 1 || gaps[0] != *gap.Gap {
		t.Errorf("gaps after reopen = %+v", gaps)
	}

	// Killed between an append and its sync: the line reached the file
	// (the writer's buffer was flushed) but cursor.json did not move. The
	// next Open resumes after the line, or the record would be read twice.
	if err := j.Append(rec(61, t0.Add(61*time.Second), "written, never synced")); err != nil {
		t.Fatal(err)
	}
	query(t, j, time.Time{}, time.Time{}) // flushes the writer's buffer
	j.cur.Close()                         // what a kill leaves: no Sync, no Close
	j, err = Open(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if c := j.Cursor(); c.Seq != 61 {
		t.Errorf("cursor after a kill = %+v, want seq 61 (the newest line on disk)", c)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cursor.json")); !json.Valid(b) {
		t.Errorf("cursor.json = %q", b)
	}
	fill2 := rec(62, t0.Add(62*time.Second), "after the second restart")
	if err := j.Append(fill2); err != nil {
		t.Fatal(err)
	}
	sameSeqs(t, "after the kill", query(t, j, time.Time{}, time.Time{}), append(seqRange(1, 50), 60, 61, 62))

	for _, p := range []string{dir + "/journal", dir + "/cursor.json"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: root's alone", p, fi.Mode())
		}
	}
}

// SyncRecords makes records durable at once but rewrites cursor.json at
// most every cursorEvery: a reopen resumes from the segments all the same.
func TestSyncRecordsDefersCursor(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	onDisk := func() Cursor {
		var c Cursor
		if b, err := os.ReadFile(filepath.Join(dir, "cursor.json")); err != nil || json.Unmarshal(b, &c) != nil {
			t.Fatalf("cursor.json: %s %v", b, err)
		}
		return c
	}
	fill(t, j, 5)
	if err := j.SyncRecords(); err != nil {
		t.Fatal(err)
	}
	if c := onDisk(); c.Seq != 5 {
		t.Fatalf("the first SyncRecords wrote cursor %+v, want seq 5", c)
	}
	if err := j.Append(rec(6, t0.Add(6*time.Second), "six")); err != nil {
		t.Fatal(err)
	}
	if err := j.SyncRecords(); err != nil {
		t.Fatal(err)
	}
	if c := onDisk(); c.Seq != 5 {
		t.Errorf("a second SyncRecords within %v rewrote cursor.json: %+v", cursorEvery, c)
	}
	j.cur.Close() // killed: no Close
	j, err = Open(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if c := j.Cursor(); c.Seq != 6 {
		t.Errorf("reopened at %+v, want seq 6 (the segments' newest record)", c)
	}
	if err := j.Append(rec(7, t0.Add(7*time.Second), "seven")); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if c := onDisk(); c.Seq != 7 {
		t.Errorf("Sync left cursor.json at %+v, want seq 7", c)
	}
}

func TestRetentionByBytes(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, Limits{MaxBytes: 200 << 10, SegmentBytes: 50 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 8000 // ~1.2 MiB
	fill(t, j, n)
	j.Sync()
	st := j.Stats()
	if st.Bytes > j.lim.MaxBytes+j.lim.SegmentBytes || st.Bytes < j.lim.MaxBytes-j.lim.SegmentBytes {
		t.Errorf("bytes = %d, want about %d", st.Bytes, j.lim.MaxBytes)
	}
	var onDisk int64
	segs, _ := filepath.Glob(filepath.Join(dir, "journal", "*.jsonl"))
	for _, p := range segs {
		fi, _ := os.Stat(p)
		onDisk += fi.Size()
	}
	if onDisk != st.Bytes {
		t.Errorf("stats say %d bytes, the segments hold %d", st.Bytes, onDisk)
	}
	got := query(t, j, time.Time{}, time.Time{})
	if len(got) == 0 || got[len(got)-1] != n || int64(len(got)) != st.Records {
		t.Fatalf("kept %d records ending %v, stats %d", len(got), trim(got), st.Records)
	}
	// What stays is the newest, whole: a suffix.
	sameSeqs(t, "kept", got, seqRange(got[0], n))
	if got[0] < 1000 {
		t.Errorf("oldest kept is seq %d: little was dropped", got[0])
	}
	if !st.Oldest.Equal(t0.Add(time.Duration(got[0])*time.Second)) || !st.Newest.Equal(t0.Add(n*time.Second)) {
		t.Errorf("oldest %v newest %v", st.Oldest, st.Newest)
	}
}

func TestRetentionByAge(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, Limits{MaxAge: 24 * time.Hour, SegmentBytes: 20 << 10})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	seq := uint64(0)
	add := func(n int, wall time.Time) {
		for range n {
			seq++
			if err := j.Append(rec(seq, wall, "e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex")); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(1000, old) // several segments, all two days old
	add(1000, now)
	j.Prune(now)
	got := query(t, j, time.Time{}, time.Time{})
	if len(got) == 0 || got[len(got)-1] != 2000 {
		t.Fatalf("kept %v", trim(got))
	}
	// Only a segment that also holds a fresh entry may keep old ones.
	if got[0] <= 1000-300 {
		t.Errorf("oldest kept seq %d: the two-day-old segments were not dropped", got[0])
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// Open prunes too, and the segment being written is never dropped.
	j, err = Open(dir, Limits{MaxAge: time.Hour, SegmentBytes: 20 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	add(1, old)
	j.Prune(now.Add(48 * time.Hour))
	sameSeqs(t, "after everything aged", query(t, j, time.Time{}, time.Time{}), []uint64{2001})
	if st := j.Stats(); st.Records != 1 || time.Duration(st.MaxAge) != time.Hour {
		t.Errorf("stats %+v", st)
	}
}

func TestCorruptTailTolerated(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, j, 20)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "journal", segmentName(1))
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// A power loss in the middle of the last line, and a line of garbage
	// before it (a disk that returned zeros).
	b = append(b[:len(b)-40], []byte("\x00\x00\x00\n")...)
	b = append(b, `{"boot":"x","wall":"2026-03-01T12:0`...)
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err = Open(dir, Limits{})
	if err != nil {
		t.Fatalf("a torn tail is fatal: %v", err)
	}
	defer j.Close()
	if c := j.Corrupt(); c != 2 {
		t.Errorf("corrupt = %d, want 2", c)
	}
	sameSeqs(t, "after the tear", query(t, j, time.Time{}, time.Time{}), seqRange(1, 19))
	if c := j.Cursor(); c.Seq != 19 {
		t.Errorf("cursor = %+v, want seq 19, the last whole record", c)
	}
	// Appending goes on in a fresh segment, not after the torn line.
	if err := j.Append(rec(20, t0.Add(20*time.Second), "again")); err != nil {
		t.Fatal(err)
	}
	sameSeqs(t, "appended after the tear", query(t, j, time.Time{}, time.Time{}), seqRange(1, 20))
	if st := j.Stats(); st.Records != 20 {
		t.Errorf("records = %d", st.Records)
	}
}

// Queries run while the source appends and syncs: each sees a prefix of
// what was appended, in order (go test -race checks the locking).
func TestQueryDuringAppend(t *testing.T) {
	j, err := Open(t.TempDir(), Limits{SegmentBytes: 64 << 10, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 4000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= n; i++ {
			if err := j.Append(rec(uint64(i), t0.Add(time.Duration(i)*time.Millisecond), "usb 1-1: new high-speed USB device number 2 using xhci_hcd")); err != nil {
				t.Error(err)
				return
			}
			if i%200 == 0 {
				if err := j.Sync(); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	last := 0
	for last < n {
		got := query(t, j, time.Time{}, time.Time{})
		for i, s := range got {
			if s != uint64(i+1) {
				t.Fatalf("query saw seq %d at %d: not a prefix", s, i)
			}
		}
		if len(got) < last {
			t.Fatalf("a query saw %d entries after one saw %d", len(got), last)
		}
		last = len(got)
		_ = j.Stats()
	}
	wg.Wait()
}

func TestStats(t *testing.T) {
	j, err := Open(t.TempDir(), Limits{MaxBytes: 1 << 20, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if st := j.Stats(); st.Records != 0 || st.Bytes != 0 || !st.Oldest.IsZero() || st.MaxBytes != 1<<20 || time.Duration(st.MaxAge) != time.Hour {
		t.Errorf("empty journal's stats %+v", st)
	}
	fill(t, j, 10)
	j.Append(
		Entry{Boot: testBoot, Wall: t0.Add(11 * time.Second), Gap: &GapInfo{From: 11, To: 14, Why: "overwritten"}},
		rec(15, t0.Add(11*time.Second), "after the overwrite"),
		Entry{Boot: testBoot, Wall: t0.Add(12 * time.Second), Gap: &GapInfo{From: 16, To: 16, Why: "overwritten"}},
		rec(17, t0.Add(12*time.Second), "after the second"),
	)
	st := j.Stats()
	if st.Records != 12 || st.Gaps != 2 || st.Lost != 5 {
		t.Errorf("records %d gaps %d lost %d, want 12 2 5", st.Records, st.Gaps, st.Lost)
	}
	if !st.Oldest.Equal(t0.Add(time.Second)) || !st.Newest.Equal(t0.Add(12*time.Second)) {
		t.Errorf("oldest %v newest %v", st.Oldest, st.Newest)
	}
	j.Sync()
	fi, err := os.Stat(filepath.Join(j.dir, segmentName(1)))
	if err != nil || fi.Size() != st.Bytes {
		t.Errorf("bytes %d, file %v %v", st.Bytes, fi.Size(), err)
	}
}
