package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/crashsig"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/fleet/index/sqlstore"
	"github.com/kcrash/kcrash/internal/iostreams"
)

// An index written by a kcrash of an older signature version: its bundles
// are read again, their new signatures remember the old ones, every old
// bucket maps to a bucket of this version (--diff), and --recompute reads
// them all again even when nothing is stale.
func TestBucketsIndexVersionBump(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	dir := fleetDir(t, now)
	idx := filepath.Join(t.TempDir(), "fleet.db")
	run := func(recompute bool) (bucketsReport, string) {
		t.Helper()
		io, out, errOut := iostreams.Test()
		o := &bucketsOptions{IO: io, sources: []string{dir}, since: days(7 * 24 * time.Hour), window: days(7 * 24 * time.Hour), k: 3, m: 3, n: 2,
			asJSON: true, index: idx, now: now.Format(time.RFC3339), diff: true, recompute: recompute}
		if err := runBuckets(ctx, o); err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		var rep bucketsReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		io, text, _ := iostreams.Test()
		o.IO, o.asJSON = io, false
		if err := runBuckets(ctx, o); err != nil {
			t.Fatal(err)
		}
		return rep, text.String()
	}
	first, _ := run(false)
	if first.Read != 4 || len(first.Buckets) != 2 || len(first.Changes) != 0 {
		t.Fatalf("first run: read %d, %d buckets, changes %+v", first.Read, len(first.Buckets), first.Changes)
	}

	// What an older kcrash left in the index: the same bundles under
	// version-0 signatures, two of the three software bundles under one
	// fine signature and the third under another (v0 split what v1 joins).
	store, err := sqlstore.Open(ctx, idx)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := store.Summaries(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	current := map[string]string{}
	for i := range sums {
		s := &sums[i]
		current[s.ID] = s.Key()
		s.SigVersion = crashsig.Version - 1
		s.Fine = "v0-" + s.Fine[:8]
		if s.Host == "gpu-03" {
			s.Fine = "v0-other"
		}
	}
	if err := store.Put(ctx, sums, nil); err != nil {
		t.Fatal(err)
	}
	store.Close()

	bumped, text := run(false)
	if bumped.Read != 4 || bumped.Skipped != 4 {
		t.Errorf("after the bump: read %d, skipped %d (want the 4 stale bundles read again)", bumped.Read, bumped.Skipped)
	}
	if len(bumped.Buckets) != 2 {
		t.Fatalf("after the bump: %d buckets", len(bumped.Buckets))
	}
	soft := bumped.Buckets[0]
	if soft.Class != "software-suspect" || soft.Count != 3 || len(soft.Previous) != 2 {
		t.Errorf("software bucket: %s count %d previous %v", soft.Class, soft.Count, soft.Previous)
	}
	if len(bumped.Changes) != 3 {
		t.Fatalf("changes: %+v", bumped.Changes)
	}
	for _, c := range bumped.Changes {
		if !strings.HasPrefix(c.Old, index.SigKey(crashsig.Version-1, "v0-")) || len(c.New) != 1 {
			t.Errorf("change %+v", c)
		}
	}
	if !strings.Contains(text, "merged") || !strings.Contains(text, index.SigKey(crashsig.Version-1, "v0-other")+" (1 bundles) -> "+index.SigKey(crashsig.Version, soft.Signature)) {
		t.Errorf("--diff text:\n%s", text)
	}

	// Now nothing is stale: a plain run reads nothing; --recompute reads all.
	again, _ := run(false)
	if again.Read != 0 {
		t.Errorf("a run after the recompute read %d", again.Read)
	}
	forced, _ := run(true)
	if forced.Read != 4 || forced.Recomputed != 4 {
		t.Errorf("--recompute: read %d, recomputed %d", forced.Read, forced.Recomputed)
	}
	for id, k := range current {
		found := false
		for _, b := range forced.Buckets {
			if index.SigKey(b.Version, b.Signature) == k {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: its signature %s has no bucket after --recompute", id, k)
		}
	}
}
