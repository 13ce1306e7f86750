package kmsgsource

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/internal/testlock"
)

// The real ring: records written while the source runs and while it is
// down are each journaled exactly once, in order, across the restart.
func TestRealKmsgRestartNeitherLosesNorRepeats(t *testing.T) {
	w := testlock.Kmsg(t)
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close() }()

	run := func() (stop func()) {
		s := &Source{Path: "/dev/kmsg", Journal: j}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		return func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
		}
	}
	marked := func() []string {
		var out []string
		j.Query(context.Background(), time.Time{}, time.Time{}, func(e *journal.Entry) bool {
			if text, ok := strings.CutPrefix(e.Rec.Text, w.Mark()); ok && e.Gap == nil {
				out = append(out, text)
			}
			return true
		})
		return out
	}
	waitMarked := func(n int) []string {
		deadline := time.Now().Add(15 * time.Second)
		for len(marked()) < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling the journal, with a deadline
		}
		return marked()
	}

	stop := run()
	var want []string
	for i := 1; i <= 3; i++ {
		want = append(want, fmt.Sprintf("agent journal test: up %d", i))
		w.Write(t, 6, want[len(want)-1])
	}
	if got := waitMarked(3); len(got) != 3 {
		t.Fatalf("journal holds %q of this test's records, want 3", got)
	}
	stop()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		want = append(want, fmt.Sprintf("agent journal test: down %d", i))
		w.Write(t, 6, want[len(want)-1])
	}
	if j, err = journal.Open(dir, journal.Limits{}); err != nil {
		t.Fatal(err)
	}
	stop = run()
	got := waitMarked(6)
	stop()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("journal holds this test's records\n\t%s\nwant each once, in order\n\t%s",
			strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	// No record of the ring at all was journaled twice.
	seen := map[uint64]bool{}
	j.Query(context.Background(), time.Time{}, time.Time{}, func(e *journal.Entry) bool {
		if e.Gap == nil {
			if seen[e.Rec.Seq] {
				t.Errorf("seq %d journaled twice: %q", e.Rec.Seq, e.Rec.Text)
			}
			seen[e.Rec.Seq] = true
		}
		return true
	})
	if c := j.Cursor(); c.BootID == "" || !seen[c.Seq] {
		t.Errorf("cursor %+v is not a journaled record", c)
	}
}
