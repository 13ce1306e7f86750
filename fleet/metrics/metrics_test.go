package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/bucket"
	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/fleet/source"
	"github.com/kcrash/kcrash/internal/textfile/textfiletest"
)

func report(t *testing.T) *bucket.Report {
	t.Helper()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var sums []index.Summary
	if _, err := (source.Walk{Put: func(s []index.Summary) error { sums = append(sums, s...); return nil }}).Run(context.Background(), []string{fleettest.Mixed(t, now)}); err != nil {
		t.Fatal(err)
	}
	rep := bucket.Group(sums, bucket.Options{Now: now})
	return &rep
}

// Debian's real node_exporter serves every series of kcrash-buckets.prom
// with its value, with no scrape error: the counts per class, each
// bucket's bundles, the hardware-suspect GPUs.
func TestNodeExporterScrapesBuckets(t *testing.T) {
	rep := report(t)
	dir := t.TempDir()
	if err := WriteFile(dir, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	url := textfiletest.StartNodeExporter(t, dir)
	want, _ := textfiletest.Exposition(t, string(Render(rep, Options{})))
	got, _ := textfiletest.Exposition(t, textfiletest.Scrape(t, url))
	for s, v := range want {
		if g, ok := got[s]; !ok || g != v {
			t.Errorf("%s: scraped %v (present %v), want %v", s, g, ok, v)
		}
	}
	if got["node_textfile_scrape_error"] != 0 {
		t.Errorf("node_textfile_scrape_error %v", got["node_textfile_scrape_error"])
	}
	for s, v := range map[string]float64{
		`kcrash_fleet_bundles{class="software-suspect"}`:                                                     4,
		`kcrash_fleet_buckets{class="hardware-suspect"}`:                                                     3,
		`kcrash_fleet_gpus{class="hardware-suspect"}`:                                                        2,
		`kcrash_fleet_report_bundles`:                                                                        8,
		`kcrash_fleet_new_buckets{class="undetermined"}`:                                                     0,
		`kcrash_fleet_bundles{class="undetermined"}`:                                                         0,
		`kcrash_fleet_report_timestamp_seconds`:                                                              float64(rep.Now.Unix()),
		`kcrash_fleet_hardware_suspect_gpu_faults{gpu="GPU-badbadba-0000-0000-0000-000000000001",host="h1"}`: 3,
	} {
		if got[s] != v {
			t.Errorf("%s = %v, want %v", s, got[s], v)
		}
	}
}

// Past the caps, buckets and GPUs are summed under "other": the series count
// stays bounded whatever the fleet.
func TestCaps(t *testing.T) {
	rep := report(t)
	text := string(Render(rep, Options{MaxBuckets: 1, MaxGPUs: 1}))
	vals, _ := textfiletest.Exposition(t, text)
	var perBucket, perGPU int
	var total float64
	for s, v := range vals {
		if strings.HasPrefix(s, "kcrash_fleet_bucket_bundles{") {
			perBucket++
			total += v
		}
		if strings.HasPrefix(s, "kcrash_fleet_hardware_suspect_gpu_faults{") {
			perGPU++
		}
	}
	if perBucket != 2 || perGPU != 2 || total != 8 {
		t.Errorf("%d bucket series (sum %v), %d GPU series:\n%s", perBucket, total, perGPU, text)
	}
	if vals[`kcrash_fleet_bucket_bundles{class="other",signature="other",title="other"}`] == 0 {
		t.Errorf("no other bucket:\n%s", text)
	}
}
