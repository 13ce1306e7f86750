package kmsgsource

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/journal"
)

const bootA, bootB = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"

var zero = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC) // the printk clock's zero in these tests

// running is a Source started by a test, stopped by stop or at cleanup.
type running struct {
	src    *Source
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, g *fakeRing, j *journal.Journal, boot string) *running {
	t.Helper()
	s := &Source{
		Path:       "/dev/kmsg",
		Journal:    j,
		BootID:     func() (string, error) { return boot, nil },
		SyncEvery:  20 * time.Millisecond,
		open:       g.open,
		bootTime:   func() time.Time { return zero },
		retryPause: 10 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{src: s, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Source.Run did not return after its context ended")
		return nil
	}
}

// line is an entry as the tests compare them: "boot seq text" or
// "gap from..to why".
func entries(t *testing.T, j *journal.Journal) []string {
	t.Helper()
	var out []string
	if err := j.Query(context.Background(), time.Time{}, time.Time{}, func(e *journal.Entry) bool {
		if e.Gap != nil {
			out = append(out, fmt.Sprintf("gap %d..%d %s", e.Gap.From, e.Gap.To, e.Gap.Why))
		} else {
			out = append(out, fmt.Sprintf("%s %d %s", e.Boot[:1], e.Rec.Seq, e.Rec.Text))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitEntries waits until the journal holds want entries, then checks them.
func waitEntries(t *testing.T, j *journal.Journal, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		if got = entries(t, j); len(got) >= len(want) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling the condition, with a deadline
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("journal holds\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func recs(boot string, from, to int, prefix string) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s %d %s %d", boot[:1], i, prefix, i))
	}
	return out
}

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func openJournal(t *testing.T, dir string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, journal.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// A restart resumes after the cursor: what the ring still holds of what was
// read is not journaled again, and what came while the agent was down is.
func TestResumeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	g := newRing(t)
	g.write(5, "before")
	j := openJournal(t, dir)
	r := start(t, g, j, bootA)
	waitEntries(t, j, recs(bootA, 1, 5, "before")...)
	g.write(2, "while up")
	waitEntries(t, j, cat(recs(bootA, 1, 5, "before"), recs(bootA, 6, 7, "while up"))...)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Run synced on its way out: the cursor is on disk.
	if c := readCursor(t, dir); c != (journal.Cursor{BootID: bootA, Seq: 7}) {
		t.Errorf("cursor.json = %+v", c)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	g.write(3, "while down")
	j = openJournal(t, dir)
	defer j.Close()
	start(t, g, j, bootA)
	want := cat(recs(bootA, 1, 5, "before"), recs(bootA, 6, 7, "while up"), recs(bootA, 8, 10, "while down"))
	waitEntries(t, j, want...)
	g.write(1, "after")
	waitEntries(t, j, append(want, recs(bootA, 11, 11, "after")...)...)
}

// Records the ring overwrote while the agent was down become one gap entry
// of the right size, "agent down".
func TestGapWhileAgentDown(t *testing.T) {
	dir := t.TempDir()
	g := newRing(t)
	g.write(5, "before")
	j := openJournal(t, dir)
	r := start(t, g, j, bootA)
	waitEntries(t, j, recs(bootA, 1, 5, "before")...)
	r.stop(t)
	j.Close()

	g.write(15, "while down") // 6..20
	g.overwrite(12)           // 6..12 gone before anyone read them
	j = openJournal(t, dir)
	defer j.Close()
	start(t, g, j, bootA)
	waitEntries(t, j, cat(recs(bootA, 1, 5, "before"), []string{"gap 6..12 agent down"}, recs(bootA, 13, 20, "while down"))...)
	if st := j.Stats(); st.Gaps != 1 || st.Lost != 7 || st.Records != 13 {
		t.Errorf("stats %+v, want 1 gap, 7 lost, 13 records", st)
	}
}

// While following, records overwritten before they were read (EPIPE) are a
// gap entry, "overwritten"; the gap's wall is the next record's.
func TestOverwriteGap(t *testing.T) {
	g := newRing(t)
	g.write(3, "first")
	j := openJournal(t, t.TempDir())
	defer j.Close()
	start(t, g, j, bootA)
	waitEntries(t, j, recs(bootA, 1, 3, "first")...)
	g.mu.Lock() // a burst the reader cannot keep up with: written and overwritten at once
	for i := 4; i <= 9; i++ {
		g.recs = append(g.recs, ringRec{uint64(i), fmt.Sprintf("6,%d,%d,-;burst %d\n", i, i*10_000, i)})
	}
	g.seq = 9
	g.recs = g.recs[len(g.recs)-2:] // 8, 9 left
	g.mu.Unlock()
	g.notify()
	waitEntries(t, j, cat(recs(bootA, 1, 3, "first"), []string{"gap 4..7 overwritten"}, recs(bootA, 8, 9, "burst"))...)
	j.Query(context.Background(), time.Time{}, time.Time{}, func(e *journal.Entry) bool {
		if want := zero.Add(80 * time.Millisecond); e.Gap != nil && !e.Wall.Equal(want) {
			t.Errorf("gap wall %v, want %v (the next record's)", e.Wall, want)
		}
		if e.Gap == nil && !e.Wall.Equal(zero.Add(e.Rec.Mono)) {
			t.Errorf("seq %d: wall %v, want boot time + %v", e.Rec.Seq, e.Wall, e.Rec.Mono)
		}
		return true
	})
}

// A new boot id means a new ring: it is read from its start, seqs start
// again, and the old boot's cursor is no reason for a gap.
func TestRebootStartsFreshCursor(t *testing.T) {
	dir := t.TempDir()
	g := newRing(t)
	g.write(40, "boot a")
	g.overwrite(30)
	j := openJournal(t, dir)
	r := start(t, g, j, bootA)
	// A first run on a ring that lost its start: no gap, nothing was ours.
	waitEntries(t, j, recs(bootA, 31, 40, "boot a")...)
	r.stop(t)
	j.Close()

	g.reboot()
	g.write(3, "boot b")
	j = openJournal(t, dir)
	defer j.Close()
	start(t, g, j, bootB)
	waitEntries(t, j, cat(recs(bootA, 31, 40, "boot a"), recs(bootB, 1, 3, "boot b"))...)
	if c := j.Cursor(); c != (journal.Cursor{BootID: bootB, Seq: 3}) {
		t.Errorf("cursor %+v", c)
	}
}

// A read error other than EAGAIN and EPIPE is reported and the ring is
// reopened, which neither repeats nor loses records; EOF (not a ring) ends Run.
func TestReadErrorReopens(t *testing.T) {
	g := newRing(t)
	g.write(3, "first")
	j := openJournal(t, t.TempDir())
	defer j.Close()
	r := start(t, g, j, bootA)
	waitEntries(t, j, recs(bootA, 1, 3, "first")...)

	// The error stays until the reopened descriptor catches up.
	g.mu.Lock()
	g.errs = append(g.errs, syscall.EIO, syscall.EIO)
	g.mu.Unlock()
	g.notify()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.src.Err(), "input/output error") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !strings.Contains(r.src.Err(), "input/output error") {
		t.Fatalf("Err() = %q after EIO", r.src.Err())
	}
	g.write(2, "after the error")
	waitEntries(t, j, cat(recs(bootA, 1, 3, "first"), recs(bootA, 4, 5, "after the error"))...)
	for r.src.Err() != "" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if e := r.src.Err(); e != "" {
		t.Errorf("Err() = %q after reading again", e)
	}
	g.mu.Lock()
	opens := g.opens
	g.mu.Unlock()
	if opens != 3 {
		t.Errorf("%d opens, want 3 (the first and one after each EIO)", opens)
	}

	g.fail(io.EOF)
	select {
	case err := <-r.done:
		r.done <- err
		if err == nil || !strings.Contains(err.Error(), "not the kernel's message ring") {
			t.Errorf("Run at EOF: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run goes on after EOF")
	}
}

// Records are synced within SyncEvery (cursor.json moves), and a quiet
// source sleeps in poll with no timeout of its own to wake for.
func TestSyncBatchedAndIdle(t *testing.T) {
	dir := t.TempDir()
	g := newRing(t)
	j := openJournal(t, dir)
	defer j.Close()
	var mu sync.Mutex
	var seen []string
	var prevs []uint64
	s := &Source{Journal: j, BootID: func() (string, error) { return bootA, nil }, SyncEvery: 30 * time.Millisecond,
		open: g.open, bootTime: func() time.Time { return zero },
		Annotate: func(prev, e *journal.Entry) {
			p := uint64(0)
			if prev != nil {
				p = prev.Rec.Seq
			}
			mu.Lock()
			prevs = append(prevs, p)
			mu.Unlock()
			e.Subject.Inherited = e.Rec.Seq == 2
		},
		Observe: func(e *journal.Entry) {
			mu.Lock()
			seen = append(seen, fmt.Sprint(e.Rec.Seq))
			mu.Unlock()
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	g.write(3, "burst")
	deadline := time.Now().Add(10 * time.Second)
	for readCursor(t, dir).Seq != 3 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	if c := readCursor(t, dir); c.Seq != 3 {
		t.Fatalf("cursor.json %+v: the burst was not synced", c)
	}
	mu.Lock()
	if strings.Join(seen, ",") != "1,2,3" || fmt.Sprint(prevs) != "[0 1 2]" {
		t.Errorf("observed %v, annotated with prev %v", seen, prevs)
	}
	mu.Unlock()
	j.Query(context.Background(), time.Time{}, time.Time{}, func(e *journal.Entry) bool {
		if e.Subject.Inherited != (e.Rec.Seq == 2) {
			t.Errorf("seq %d: the subject Annotate set is not in the journal", e.Rec.Seq)
		}
		return true
	})
	// After the sync the source waits for records only.
	lastWait := func() time.Duration {
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.waits) == 0 {
			return 0
		}
		return g.waits[len(g.waits)-1]
	}
	for lastWait() != idleWait && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	if last := lastWait(); last != idleWait {
		t.Errorf("idle wait %v, want %v", last, idleWait)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.waits); n > 6 {
		t.Errorf("%d waits for 3 records: the source ticks", n)
	}
}

func readCursor(t *testing.T, dir string) journal.Cursor {
	t.Helper()
	var c journal.Cursor
	b, err := os.ReadFile(filepath.Join(dir, "cursor.json"))
	if err == nil {
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("cursor.json %q: %v", b, err)
		}
	}
	return c
}

// A pass that read records pauses (Batch) before the next, so that a flood
// is read in batches; a query's wait for the journal (WaitCaughtUp) ends
// the pause at once, and finds what was written during it journaled.
func TestCaughtUpEndsBatchPause(t *testing.T) {
	dir := t.TempDir()
	g := newRing(t)
	j := openJournal(t, dir)
	defer j.Close()
	s := &Source{Journal: j, BootID: func() (string, error) { return bootA, nil }, Batch: time.Hour, SyncEvery: time.Hour,
		open: g.open, bootTime: func() time.Time { return zero }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	g.write(3, "first")
	waitEntries(t, j, recs(bootA, 1, 3, "first")...)
	// The pass that read them pauses for an hour: only the query ends it.
	g.write(2, "during the pause")
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if !s.WaitCaughtUp(wctx, time.Now()) {
		t.Fatal("WaitCaughtUp did not end the batch's pause within 5 s")
	}
	if got, want := entries(t, j), cat(recs(bootA, 1, 3, "first"), recs(bootA, 4, 5, "during the pause")); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after WaitCaughtUp the journal holds %q, want %q", got, want)
	}
}

// Records below KERN_ERR wait for SyncEvery; a pass that read one at
// KERN_ERR or worse syncs within UrgentSyncEvery.
func TestUrgentRecordSyncedSooner(t *testing.T) {
	dir := t.TempDir()
	g := newRing(t)
	j := openJournal(t, dir)
	defer j.Close()
	synced := make(chan struct{}, 16)
	s := &Source{Journal: j, BootID: func() (string, error) { return bootA, nil },
		SyncEvery: time.Hour, UrgentSyncEvery: 10 * time.Millisecond,
		open: g.open, bootTime: func() time.Time { return zero },
		synced: func() { synced <- struct{}{} }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	g.write(2, "chatter")
	waitEntries(t, j, recs(bootA, 1, 2, "chatter")...)
	// The pass that read them ends in a wait of about an hour: no sync is
	// due before that.
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		var last time.Duration
		if n := len(g.waits); n > 0 {
			last = g.waits[n-1]
		}
		g.mu.Unlock()
		if last > 50*time.Minute {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after two info records the source waits %v, not for the hour SyncEvery leaves", last)
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case <-synced:
		t.Fatal("info records were synced before SyncEvery")
	default:
	}
	g.writeLevel(3, 1, "amdgpu: page fault")
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("a KERN_ERR record was not synced within UrgentSyncEvery")
	}
}
