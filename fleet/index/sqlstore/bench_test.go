package sqlstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/bucket"
	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/fleet/index/sqlstore"
	"github.com/kcrash/kcrash/fleet/index/sqlstore/pgtest"
	"github.com/kcrash/kcrash/fleet/source"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// BenchmarkBucketQuery is issue 26's "bucket query": a report's buckets
// answered from an index that already holds every bundle (no source read),
// as `kcrash buckets --index X` does: the store's View for a 7-day window,
// grouped by bucket.GroupView. The index holds N summaries at 500 bundles a
// day ("hundreds of bundles a day"), so the window holds 3,500 of them
// whatever N is. "before" is the query as it was: every summary loaded,
// then bucket.Group.
//
//	go test -run '^$' -bench BucketQuery -benchtime 20x ./fleet/index/sqlstore
//
// PostgreSQL rows need KCRASH_TEST_POSTGRES_DSN (scripts/pg-test-server.sh up).
func BenchmarkBucketQuery(b *testing.B) {
	templates := summaryTemplates(b)
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	opts := bucket.Options{Now: now, Window: 7 * 24 * time.Hour}
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%d", backend, n), func(b *testing.B) {
				dsn := filepath.Join(b.TempDir(), "fleet.db")
				if backend == "postgres" {
					dsn = pgtest.Schema(b, "the PostgreSQL bucket query")
				}
				ctx := context.Background()
				s, err := sqlstore.Open(ctx, dsn)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				fill(b, s, templates, n, now)
				now, from := opts.ViewRange()
				b.Run("view", func(b *testing.B) {
					buckets, recent := 0, 0
					var inView, inGroup time.Duration
					cpu0 := cpuTime(b)
					for b.Loop() {
						t0 := time.Now()
						v, err := s.View(ctx, now, from)
						if err != nil {
							b.Fatal(err)
						}
						t1 := time.Now()
						buckets, recent = len(bucket.GroupView(v, opts).Buckets), len(v.Recent)
						inView, inGroup = inView+t1.Sub(t0), inGroup+time.Since(t1)
					}
					// This process's CPU time (the SQLite engine runs in it;
					// a PostgreSQL server's is not counted): what the
					// query costs whatever else the machine runs.
					b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
					b.ReportMetric(float64(buckets), "buckets")
					b.ReportMetric(float64(recent), "in-window")
					b.ReportMetric(float64(inView.Milliseconds())/float64(b.N), "view-ms/op")
					b.ReportMetric(float64(inGroup.Milliseconds())/float64(b.N), "group-ms/op")
				})
				b.Run("before", func(b *testing.B) {
					for b.Loop() {
						sums, err := s.Summaries(ctx, time.Time{})
						if err != nil {
							b.Fatal(err)
						}
						bucket.Group(sums, opts)
					}
				})
			})
		}
	}
}

// summaryTemplates are the summaries of real bundles: kcrash's writer over
// the corpus logs bench/gen-fleet rotates, read back by fleet/source.
func summaryTemplates(b *testing.B) []index.Summary {
	corpus := testcorpus.Dir(b)
	dir := b.TempDir()
	for i, log := range []string{
		"3-nvidia-xid/xid13-xid109-pt_main_thread-dmesg-ctime.txt",
		"3-nvidia-xid/xid119-gsp-rpc-timeout-h100-full-dump.txt",
		"3-nvidia-xid/xid48-dbe-syslog-gpu-operator-TRUNCATED.txt",
		"1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt",
		"2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt",
		"6-program-log/device-side-assert-kernel-assertion-lines-indexkernel.txt",
		"6-program-log/nccl-watchdog-collective-timeout-new-format.txt",
		"3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt",
	} {
		fleettest.Write(b, fleettest.Spec{Out: dir, Host: "node0001", Time: time.Now(), Job: "1", Log: fleettest.Corpus(b, corpus, log),
			BusID: "0000:18:00.0", Seed: uint64(i), Stack: map[string]string{"torch": "2.9.1", "sglang": "0.5.3", "nvidia-driver": "570.158.01"}})
	}
	var out []index.Summary
	if _, err := (source.Walk{Put: func(s []index.Summary) error { out = append(out, s...); return nil }}).Run(context.Background(), []string{dir}); err != nil {
		b.Fatal(err)
	}
	return out
}

// fill puts n summaries made from the templates: 2,048 hosts of 8 GPUs,
// 500 bundles a day before now, the sglang version varied.
func fill(b *testing.B, s index.Store, templates []index.Summary, n int, now time.Time) {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	buses := []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}
	span := time.Duration(n/500) * 24 * time.Hour
	var batch []index.Summary
	for i := range n {
		t := templates[r.IntN(len(templates))]
		host, slot := fmt.Sprintf("node%04d", 1+r.IntN(2048)), r.IntN(8)
		t.ID, t.Host, t.Job, t.Rank = fmt.Sprintf("kcrash-%07d", i), host, fmt.Sprint(r.IntN(500)), fmt.Sprint(slot)
		t.Path = "/shared/" + host + "/" + t.ID + ".tar.gz"
		t.Time = now.Add(-time.Duration(r.Int64N(int64(span))))
		t.Stack = map[string]string{"torch": "2.9.1", "sglang": []string{"0.5.2", "0.5.3"}[r.IntN(2)], "nvidia-driver": "570.158.01"}
		t.GPUs = nil
		for _, g := range templates[0].GPUs[:min(1, len(templates[0].GPUs))] {
			g.BusID = buses[slot]
			if g.UUID != "" || r.IntN(2) == 0 {
				g.ID = fmt.Sprintf("GPU-%04d-%d", 1+r.IntN(2048), slot)
			} else {
				g.ID = host + "/" + buses[slot]
			}
			t.GPUs = append(t.GPUs, g)
		}
		batch = append(batch, t)
		if len(batch) == 512 || i == n-1 {
			if err := s.Put(context.Background(), batch, nil); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// cpuTime is the user and system time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
