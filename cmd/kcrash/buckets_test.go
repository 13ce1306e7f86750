package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/fleet/index/sqlstore/pgtest"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// fleetDir writes a few bundles with kcrash's writer: one GPU that fell off
// the bus, and one bug on three hosts.
func fleetDir(t *testing.T, now time.Time) string {
	t.Helper()
	corpus := testcorpus.Dir(t)
	dir := t.TempDir()
	bus := fleettest.Corpus(t, corpus, "3-nvidia-xid/xid79-modal-gpu-health-wrapped.txt")
	hip := fleettest.Corpus(t, corpus, "2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	fleettest.Write(t, fleettest.Spec{Out: dir, Host: "gpu-07", Time: now.Add(-time.Hour), Job: "41", Log: bus, BusID: "0000:c6:00.0", Seed: 1})
	for i, h := range []string{"gpu-01", "gpu-02", "gpu-03"} {
		fleettest.Write(t, fleettest.Spec{Out: filepath.Join(dir, h), Host: h, Time: now.Add(-time.Duration(30+i) * time.Hour), Job: "42", Rank: i, LocalRank: i,
			Log: hip, Stack: map[string]string{"sglang": "0.5.3"}, Seed: uint64(10 + i)})
	}
	return dir
}

func TestBucketsRunJSONAndTable(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	dir := fleetDir(t, now)
	io, out, _ := iostreams.Test()
	o := &bucketsOptions{IO: io, sources: []string{dir}, since: days(7 * 24 * time.Hour), window: days(7 * 24 * time.Hour), k: 3, m: 3, n: 2,
		asJSON: true, now: now.Format(time.RFC3339)}
	if err := runBuckets(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Buckets []map[string]any `json:"buckets"`
		GPUs    []map[string]any `json:"gpus"`
		Read    int              `json:"read"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Buckets) != 2 || got.Read != 4 {
		t.Fatalf("%d buckets, read %d:\n%s", len(got.Buckets), got.Read, out)
	}
	for _, b := range got.Buckets {
		for _, k := range []string{"signature", "title", "count", "first_seen", "last_seen", "hosts", "gpus", "class", "jobs", "ranks", "stacks", "new"} {
			if _, ok := b[k]; !ok {
				t.Errorf("bucket without %q: %v", k, b)
			}
		}
	}
	if b := got.Buckets[0]; b["class"] != "software-suspect" || b["count"] != 3.0 || b["component"] != "sglang=0.5.3" {
		t.Errorf("first bucket: %v", b)
	}
	if b := got.Buckets[1]; b["class"] != "hardware-suspect" || !strings.HasPrefix(b["title"].(string), "gpu-fell-off-bus") {
		t.Errorf("second bucket: %v", b)
	}

	io, out, _ = iostreams.Test()
	o.IO, o.asJSON, o.html = io, false, filepath.Join(t.TempDir(), "buckets.html")
	if err := runBuckets(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(o.html)
	if err != nil || !strings.Contains(string(page), "gpu-fell-off-bus | nvidia Xid 79") || !strings.Contains(string(page), "software-suspect") {
		t.Errorf("--html: %v\n%s", err, page)
	}
	text := out.String()
	for _, want := range []string{"4 bundles (4 read now, 0 already indexed, 0 signatures recomputed); 2 buckets since 2026-11-26 12:00 UTC; classes over the last 7d", "SIGNATURE         COUNT  NEW  CLASS", "software-suspect", "gpu-fell-off-bus | nvidia Xid 79",
		"hardware-suspect GPUs:\n  gpu-07/0000:c6:00.0 (gpu-07, 0000:c6:00.0, Test GPU): hardware record"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}

	io, _, _ = iostreams.Test()
	o.IO, o.sources = io, []string{filepath.Join(dir, "none")}
	if err := runBuckets(context.Background(), o); err == nil {
		t.Error("a missing source: no error")
	}
}

func TestNewBucketsCmd(t *testing.T) {
	noUserConfig(t)
	o, _, err := cmdOptions(t, newBucketsCmd, "--since", "2d", "--window", "36h", "-k", "4", "a", "b")
	if err != nil || o == nil || time.Duration(o.since) != 48*time.Hour || time.Duration(o.window) != 36*time.Hour || o.k != 4 || o.m != 3 || len(o.sources) != 2 {
		t.Fatalf("%v %+v", err, o)
	}
	var ue *usageError
	if _, _, err := cmdOptions(t, newBucketsCmd, "-m", "0", "a"); !errors.As(err, &ue) {
		t.Errorf("-m 0: %v", err)
	}
	if _, _, err := cmdOptions(t, newBucketsCmd, "--since", "soon", "a"); err == nil {
		t.Error("--since soon: no error")
	}
	if _, _, err := cmdOptions(t, newBucketsCmd, "--apply", "a"); !errors.As(err, &ue) || !strings.Contains(err.Error(), "only with --drain") {
		t.Errorf("--apply without --drain: %v", err)
	}
	if o, _, err := cmdOptions(t, newBucketsCmd, "--drain", "--textfile-dir", "/d", "a"); err != nil || !o.act.drain || o.act.apply || o.act.textfileDir != "/d" {
		t.Errorf("--drain --textfile-dir: %v %+v", err, o)
	}
	if _, _, err := cmdOptions(t, newBucketsCmd); !errors.As(err, &ue) {
		t.Errorf("no SOURCE, no --index: %v", err)
	}
	if o, _, err := cmdOptions(t, newBucketsCmd, "--index", "postgres://h/db"); err != nil || o.index != "postgres://h/db" || len(o.sources) != 0 {
		t.Errorf("--index alone: %v %+v", err, o)
	}
}

// With --index, a second run opens no bundle it read before (they are
// overwritten with garbage of the same size and time, which would fail to
// read), reads only the new one, and reports from the index the same
// buckets plus the new member.
func TestBucketsIndexIncremental(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	dir := fleetDir(t, now)
	idx := filepath.Join(t.TempDir(), "fleet.db")
	run := func() bucketsReport {
		t.Helper()
		io, out, errOut := iostreams.Test()
		o := &bucketsOptions{IO: io, sources: []string{dir}, since: days(7 * 24 * time.Hour), window: days(7 * 24 * time.Hour), k: 3, m: 3, n: 2,
			asJSON: true, index: idx, now: now.Format(time.RFC3339)}
		if err := runBuckets(context.Background(), o); err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		var rep bucketsReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	first := run()
	if first.Read != 4 || first.Skipped != 0 || len(first.Buckets) != 2 {
		t.Fatalf("first run: read %d skipped %d, %d buckets", first.Read, first.Skipped, len(first.Buckets))
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*", "kcrash-*.tar.gz"))
	top, _ := filepath.Glob(filepath.Join(dir, "kcrash-*.tar.gz"))
	for _, p := range append(old, top...) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(p, make([]byte, fi.Size()), 0o644)
		os.Chtimes(p, fi.ModTime(), fi.ModTime())
	}
	hip := fleettest.Corpus(t, testcorpus.Dir(t), "2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	fleettest.Write(t, fleettest.Spec{Out: dir, Host: "gpu-04", Time: now.Add(-2 * time.Hour), Job: "43", Log: hip,
		Stack: map[string]string{"sglang": "0.5.3"}, Seed: 99})
	second := run()
	if second.Read != 1 || second.Skipped != 4 || len(second.Errors) != 0 || second.Bundles != 5 {
		t.Fatalf("second run: read %d skipped %d errors %v bundles %d", second.Read, second.Skipped, second.Errors, second.Bundles)
	}
	if b := second.Buckets[0]; b.Count != 4 || b.Signature != first.Buckets[0].Signature || len(b.Hosts) != 4 {
		t.Errorf("after the new bundle: %+v", b)
	}
}

// The same report, byte for byte, from no index, a SQLite index and a real
// PostgreSQL server (scripts/pg-test-server.sh): first when every bundle is
// read, then from the indexes alone (no SOURCE), then after a new bundle.
func TestBucketsSameOnSQLiteAndPostgres(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	pg := pgtest.Schema(t, "kcrash buckets --index postgres://")
	dir := fleetDir(t, now)
	// A GPU named by its UUID in a bundle older than the window, and by its
	// bus id alone in newer ones (Xid 13 lines): one GPU, by its UUID.
	const uuid = "GPU-11111111-2222-3333-4444-555555555555"
	named := fleettest.Corpus(t, testcorpus.Dir(t), "3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt")
	fleettest.Write(t, fleettest.Spec{Out: dir, Host: "gpu-09", Time: now.Add(-10 * 24 * time.Hour), Job: "40", Log: named,
		BusID: "0000:9b:00.0", UUID: uuid, Seed: 49})
	xid := fleettest.Corpus(t, testcorpus.Dir(t), "3-nvidia-xid/xid13-xid109-pt_main_thread-dmesg-ctime.txt")
	for i := range 3 {
		fleettest.Write(t, fleettest.Spec{Out: dir, Host: "gpu-09", Time: now.Add(-time.Duration(5+i) * time.Hour), Job: "44", Log: xid,
			BusID: "0000:9b:00.0", Seed: uint64(50 + i)})
	}
	lite := filepath.Join(t.TempDir(), "fleet.db")
	run := func(index string, sources ...string) string {
		t.Helper()
		io, out, errOut := iostreams.Test()
		o := &bucketsOptions{IO: io, sources: sources, since: days(2 * 24 * time.Hour), window: days(7 * 24 * time.Hour), k: 3, m: 3, n: 2,
			asJSON: true, index: index, now: now.Format(time.RFC3339)}
		if err := runBuckets(context.Background(), o); err != nil {
			t.Fatalf("--index %q: %v: %s", index, err, errOut)
		}
		return out.String()
	}
	same := func(what, a, b string) {
		t.Helper()
		if a != b {
			t.Errorf("%s differ:\n%s\n----\n%s", what, a, b)
		}
	}
	plain := run("", dir)
	onLite, onPG := run(lite, dir), run(pg, dir)
	same("no index and SQLite", plain, onLite)
	same("SQLite and PostgreSQL", onLite, onPG)
	if !strings.Contains(onPG, `"read": 8`) || !strings.Contains(onPG, "hardware-suspect") || !strings.Contains(onPG, "software-suspect") ||
		!strings.Contains(onPG, `"id": "`+uuid+`"`) || strings.Contains(onPG, "gpu-09/0000:9b:00.0") {
		t.Errorf("the report does not exercise the classes:\n%s", onPG)
	}
	same("SQLite and PostgreSQL from the index alone", run(lite), run(pg))
	hip := fleettest.Corpus(t, testcorpus.Dir(t), "2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	fleettest.Write(t, fleettest.Spec{Out: dir, Host: "gpu-04", Time: now.Add(-2 * time.Hour), Job: "43", Log: hip,
		Stack: map[string]string{"sglang": "0.5.3"}, Seed: 99})
	onLite, onPG = run(lite, dir), run(pg, dir)
	same("SQLite and PostgreSQL after a new bundle", onLite, onPG)
	if !strings.Contains(onPG, `"read": 1,`) || !strings.Contains(onPG, `"skipped": 8`) {
		t.Errorf("the second run read again:\n%s", onPG)
	}
}
