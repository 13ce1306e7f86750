// Package storetest is the contract every index.Store backend passes: the
// same calls give the same results on SQLite and PostgreSQL.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/index"
)

// Open opens the store called name, creating it when new; opening the same
// name again after Close must give the same data, and so must opening it
// from several goroutines at once (each a writer of its own, as nodes are).
type Open func(t *testing.T, name string) index.Store

func summary(i int, at time.Time) index.Summary {
	return index.Summary{ID: fmt.Sprintf("kcrash-%03d", i), Path: fmt.Sprintf("/b/%03d.tar.gz", i), Time: at, Host: fmt.Sprintf("node-%d", i%3),
		Job: "j1", Rank: fmt.Sprint(i), SigVersion: 1, Fine: fmt.Sprintf("fine%02d", i%4), Coarse: "c1", Title: "gpu_page_fault amd",
		SigClass: map[bool]string{true: "hardware"}[i%5 == 0], Verdict: "gpu_page_fault",
		GPUs:  []index.GPU{{ID: fmt.Sprintf("GPU-%d", i%7), BusID: "0000:9b:00.0", Name: "H100"}},
		Stack: map[string]string{"sglang": "0.5.3", "kernel": "6.8.0"}}
}

// same compares summaries as the index hands them back: by their JSON, with
// times compared as instants.
func same(t *testing.T, what string, got, want []index.Summary) {
	t.Helper()
	norm := func(l []index.Summary) string {
		c := make([]index.Summary, len(l))
		for i, s := range l {
			s.Time = s.Time.UTC()
			c[i] = s
		}
		b, _ := json.Marshal(c)
		return string(b)
	}
	if g, w := norm(got), norm(want); g != w {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// Run runs the contract against a backend.
func Run(t *testing.T, open Open) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

	t.Run("empty", func(t *testing.T) {
		s := open(t, "empty")
		defer s.Close()
		if n, err := s.Count(ctx); err != nil || n != 0 {
			t.Errorf("count %d %v", n, err)
		}
		if src, err := s.Sources(ctx); err != nil || len(src) != 0 {
			t.Errorf("sources %v %v", src, err)
		}
		if got, err := s.Summaries(ctx, time.Time{}); err != nil || len(got) != 0 {
			t.Errorf("summaries %v %v", got, err)
		}
	})

	t.Run("round trip, order, since", func(t *testing.T) {
		s := open(t, "rt")
		defer s.Close()
		var all []index.Summary
		for i := range 10 {
			// Out of order on purpose, two at the same instant.
			all = append(all, summary(i, t0.Add(time.Duration((i*7)%10)*time.Hour)))
		}
		all = append(all, summary(10, t0.Add(3*time.Hour)))
		if err := s.Put(ctx, all[:6], []index.Source{{Path: "/b", Stamp: index.Stamp{Size: 1, MTime: 2}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, all[6:], nil); err != nil {
			t.Fatal(err)
		}
		want := append([]index.Summary(nil), all...)
		index.SortSummaries(want)
		got, err := s.Summaries(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		same(t, "all", got, want)
		got, _ = s.Summaries(ctx, t0.Add(3*time.Hour))
		var later []index.Summary
		for _, w := range want {
			if !w.Time.Before(t0.Add(3 * time.Hour)) {
				later = append(later, w)
			}
		}
		same(t, "since 3h", got, later)
		if n, _ := s.Count(ctx); n != 11 {
			t.Errorf("count %d", n)
		}
	})

	t.Run("put replaces by id, sources update", func(t *testing.T) {
		s := open(t, "upsert")
		defer s.Close()
		a := summary(1, t0)
		if err := s.Put(ctx, []index.Summary{a}, []index.Source{{Path: "/x.tar.gz", Stamp: index.Stamp{Size: 10, MTime: 20}}}); err != nil {
			t.Fatal(err)
		}
		a.Fine, a.Title, a.Time = "other", "recomputed", t0.Add(time.Minute)
		if err := s.Put(ctx, []index.Summary{a}, []index.Source{{Path: "/x.tar.gz", Stamp: index.Stamp{Size: 11, MTime: 21}}}); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Summaries(ctx, time.Time{})
		same(t, "replaced", got, []index.Summary{a})
		src, _ := s.Sources(ctx)
		if !reflect.DeepEqual(src, map[string]index.Stamp{"/x.tar.gz": {Size: 11, MTime: 21}}) {
			t.Errorf("sources %v", src)
		}
	})

	t.Run("other versions, previous keys", func(t *testing.T) {
		s := open(t, "versions")
		defer s.Close()
		a, b, c := summary(1, t0), summary(2, t0.Add(time.Hour)), summary(3, t0.Add(2*time.Hour))
		b.SigVersion, c.SigVersion = 0, 2
		a.Previous = []string{"v0:fine01", "v1:old"}
		if err := s.Put(ctx, []index.Summary{a, b, c}, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.OtherVersions(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "other than version 1", got, []index.Summary{b, c})
		all, _ := s.Summaries(ctx, time.Time{})
		same(t, "previous kept", all[:1], []index.Summary{a})
	})

	t.Run("persists across open", func(t *testing.T) {
		s := open(t, "persist")
		a, b := summary(1, t0), summary(2, t0.Add(time.Hour))
		if err := s.Put(ctx, []index.Summary{a, b}, []index.Source{{Path: "/d/a", Stamp: index.Stamp{Size: 1, MTime: 1}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, "persist")
		defer s.Close()
		got, _ := s.Summaries(ctx, time.Time{})
		same(t, "reopened", got, []index.Summary{a, b})
		if src, _ := s.Sources(ctx); len(src) != 1 {
			t.Errorf("sources %v", src)
		}
	})

	t.Run("view equals ViewOf", func(t *testing.T) {
		s := open(t, "view")
		defer s.Close()
		all := viewFleet(t0)
		// In three puts, newest first: the latest naming of a GPU must win
		// whatever order bundles arrive in.
		for _, part := range [][]index.Summary{all[40:], all[20:40], all[:20]} {
			if err := s.Put(ctx, part, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Put again: some as they were, and some changed (another
		// signature, another time, no evidence any more), as a recomputed
		// signature or a file read again would.
		again := slices.Clone(all[5:15])
		all[50].Fine, all[50].Time = "fine09", all[50].Time.Add(-20*time.Hour)
		all[51].Verdict = "unknown"
		all[52].Time = t0.Add(-48 * time.Hour)
		all[53].Fine = all[54].Fine
		again = append(again, all[50:54]...)
		if err := s.Put(ctx, again, nil); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name      string
			now, from time.Time
		}{
			{"everything", t0.Add(1000 * time.Hour), time.Time{}},
			{"a window, later bundles after now", t0.Add(30 * time.Hour), t0.Add(12 * time.Hour)},
			{"from on a tie", t0.Add(40 * time.Hour), t0.Add(20 * time.Hour)},
			{"nothing recent", t0.Add(-time.Hour), t0.Add(-2 * time.Hour)},
		} {
			got, err := s.View(ctx, c.now, c.from)
			if err != nil {
				t.Fatal(err)
			}
			sameView(t, c.name, got, index.ViewOf(all, c.now, c.from))
		}
	})

	t.Run("concurrent writers", func(t *testing.T) {
		// Writers of their own (as many nodes are), opening a new index at
		// once, putting overlapping bundles, GPU names and sources.
		const writers, batches, per = 4, 10, 20
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		var want []index.Summary
		for w := range writers {
			var mine []index.Summary
			for i := range batches * per {
				n := w*1000 + i
				if i%4 == 0 {
					n = i // shared by every writer, same content
				}
				mine = append(mine, summary(n, t0.Add(time.Duration(n%97)*time.Minute)))
			}
			want = append(want, mine...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := open(t, "concurrent")
				defer s.Close()
				for b := range batches {
					part := mine[b*per : (b+1)*per]
					src := []index.Source{{Path: fmt.Sprintf("/shared/%d", b), Stamp: index.Stamp{Size: int64(b), MTime: 1}},
						{Path: fmt.Sprintf("/w%d/%d", w, b), Stamp: index.Stamp{Size: 1, MTime: 1}}}
					if err := s.Put(ctx, part, src); err != nil {
						errs <- fmt.Errorf("writer %d batch %d: %v", w, b, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		s := open(t, "concurrent")
		defer s.Close()
		uniq := map[string]index.Summary{}
		for _, w := range want {
			uniq[w.ID] = w
		}
		var all []index.Summary
		for _, w := range uniq {
			all = append(all, w)
		}
		if n, err := s.Count(ctx); err != nil || n != len(all) {
			t.Errorf("count %d %v, want %d", n, err, len(all))
		}
		if src, err := s.Sources(ctx); err != nil || len(src) != batches*(writers+1) {
			t.Errorf("%d sources %v, want %d", len(src), err, batches*(writers+1))
		}
		now := t0.Add(100 * time.Minute)
		got, err := s.View(ctx, now, t0.Add(30*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		sameView(t, "after concurrent writers", got, index.ViewOf(all, now, t0.Add(30*time.Minute)))
	})

	t.Run("cancelled put leaves nothing", func(t *testing.T) {
		s := open(t, "cancel")
		defer s.Close()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Put(cctx, []index.Summary{summary(1, t0)}, []index.Source{{Path: "/c"}}); err == nil {
			t.Fatal("put with a cancelled context: no error")
		}
		if n, _ := s.Count(ctx); n != 0 {
			t.Errorf("count %d after a failed put", n)
		}
		if src, _ := s.Sources(ctx); len(src) != 0 {
			t.Errorf("sources %v after a failed put", src)
		}
	})
}

// viewFleet is 60 bundles that exercise View: ties in time, signatures with
// members before the window and after now, a signature of unknown verdicts
// only, GPUs named by UUID in one bundle and by host/bus id in another, a
// bus id whose GPU was replaced (a new UUID later), and times in a zone
// other than UTC.
func viewFleet(t0 time.Time) []index.Summary {
	zone := time.FixedZone("CET", 3600)
	var all []index.Summary
	for i := range 60 {
		at := t0.Add(time.Duration(i/2) * time.Hour) // two bundles per instant
		if i%7 == 0 {
			at = at.In(zone)
		}
		s := summary(i, at)
		s.ID = fmt.Sprintf("kcrash-%03d", (i*37)%60) // IDs not in time order
		s.Fine = fmt.Sprintf("fine%02d", i%5)
		s.Title = fmt.Sprintf("title of %d", i)
		host := fmt.Sprintf("node-%d", i%3)
		s.Host = host
		bus := fmt.Sprintf("0000:%02x:00.0", i%4)
		switch i % 3 {
		case 0: // named: UUID, changing at i=30 (the GPU was swapped)
			s.GPUs = []index.GPU{{ID: fmt.Sprintf("GPU-%d-%d-%d", i%3, i%4, i/30), UUID: "u", BusID: bus, Name: "H100"}}
		case 1: // only the bus id: host/bus
			s.GPUs = []index.GPU{{ID: host + "/" + bus, BusID: bus}}
		case 2: // two GPUs, one guessed by rank
			s.GPUs = []index.GPU{{ID: fmt.Sprintf("SER%d", i%4), Serial: "s", BusID: bus}, {ID: host + "/rank1", Guessed: true}}
		}
		if s.Fine == "fine04" {
			s.Verdict = "unknown"
		}
		if i%11 == 0 {
			s.Verdict = ""
		}
		all = append(all, s)
	}
	return all
}

// sameView compares views as the index hands them back: times as instants,
// no difference between an empty and a missing list.
func sameView(t *testing.T, what string, got, want index.View) {
	t.Helper()
	norm := func(v index.View) string {
		recent := make([]index.Summary, len(v.Recent))
		for i, s := range v.Recent {
			s.Time = s.Time.UTC()
			recent[i] = s
		}
		sigs := make([]index.SigStats, len(v.Signatures))
		for i, s := range v.Signatures {
			s.First, s.Last = s.First.UTC(), s.Last.UTC()
			sigs[i] = s
		}
		if v.Aliases == nil {
			v.Aliases = map[string]string{}
		}
		v.Recent, v.Signatures = recent, sigs
		b, _ := json.MarshalIndent(v, "", " ")
		return string(b)
	}
	if g, w := norm(got), norm(want); g != w {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}
