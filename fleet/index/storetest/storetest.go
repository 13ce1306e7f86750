// Package storetest is the contract every index.Store backend passes: the
// same calls give the same results on SQLite and, later, PostgreSQL.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/index"
)

// Open opens the store called name, creating it when new; opening the same
// name again after Close must give the same data.
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
		sortSummaries(want)
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

func sortSummaries(l []index.Summary) {
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && (l[j].Time.Before(l[j-1].Time) || l[j].Time.Equal(l[j-1].Time) && l[j].ID < l[j-1].ID); j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}
