// Package metrics writes a bucket report as node_exporter textfile series
// (kcrash-buckets.prom), so that a site's Prometheus can graph and alert on
// the fleet's buckets: how many bundles each class holds, how many buckets
// are new, which GPUs are hardware-suspect. Series per bucket and per GPU
// are capped, so a fleet with thousands of signatures or a flood of bad GPUs
// cannot blow up the series count: past the caps they are summed.
package metrics

import (
	"slices"
	"sort"

	"github.com/kcrash/kcrash/fleet/bucket"
	"github.com/kcrash/kcrash/internal/textfile"
)

// FileName is the file written into the textfile directory; the node
// agent's is kcrash.prom, so both can share one directory.
const FileName = "kcrash-buckets.prom"

// Caps on series with a per-bucket or per-GPU label.
const (
	// DefaultMaxBuckets: the largest buckets get their own series; a
	// fleet's top few dozen signatures are what a dashboard shows.
	DefaultMaxBuckets = 50
	// DefaultMaxGPUs: hardware-suspect GPUs named one by one; more than
	// that at once is a fleet-wide event the class counts already show.
	DefaultMaxGPUs = 100
	// Other is the label value that sums what is past a cap.
	Other = "other"
)

const (
	nameBundles      = "kcrash_fleet_bundles"
	nameBuckets      = "kcrash_fleet_buckets"
	nameNewBuckets   = "kcrash_fleet_new_buckets"
	nameBucket       = "kcrash_fleet_bucket_bundles"
	nameGPUs         = "kcrash_fleet_gpus"
	nameSuspectGPU   = "kcrash_fleet_hardware_suspect_gpu_faults"
	nameReportTime   = "kcrash_fleet_report_timestamp_seconds"
	nameWindowBundle = "kcrash_fleet_report_bundles"
)

var families = map[string]textfile.Family{
	nameBundles:      {Help: "Bundles in the listed buckets (seen since --since), by the bucket's class.", Type: "gauge"},
	nameBuckets:      {Help: "Buckets seen since --since, by class.", Type: "gauge"},
	nameNewBuckets:   {Help: "Buckets first seen since --since, by class.", Type: "gauge"},
	nameBucket:       {Help: "Bundles since --since in each of the largest buckets, by fine signature, class and title; the rest are summed under signature=\"other\".", Type: "gauge"},
	nameGPUs:         {Help: "GPUs with a fault in the class window, by class.", Type: "gauge"},
	nameSuspectGPU:   {Help: "Faults in the class window of each hardware-suspect GPU, by host and GPU; past the cap they are summed under gpu=\"other\".", Type: "gauge"},
	nameReportTime:   {Help: "The time the report was made for (its now), in seconds since the epoch.", Type: "gauge"},
	nameWindowBundle: {Help: "Bundles read into the report, whatever their time.", Type: "gauge"},
}

var classes = []string{bucket.Hardware, bucket.Software, bucket.Undetermined}

// Options caps the per-bucket and per-GPU series; zero means the default.
type Options struct {
	MaxBuckets, MaxGPUs int
}

// Render returns the report's series in the text format.
func Render(rep *bucket.Report, o Options) []byte {
	if o.MaxBuckets <= 0 {
		o.MaxBuckets = DefaultMaxBuckets
	}
	if o.MaxGPUs <= 0 {
		o.MaxGPUs = DefaultMaxGPUs
	}
	bundles, buckets, fresh, gpus := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	for _, c := range classes {
		bundles[c], buckets[c], fresh[c], gpus[c] = 0, 0, 0, 0
	}
	for _, b := range rep.Buckets {
		bundles[b.Class] += b.Count
		buckets[b.Class]++
		if b.New {
			fresh[b.Class]++
		}
	}
	for _, g := range rep.GPUs {
		gpus[g.Class]++
	}
	var ss []textfile.Sample
	for c := range bundles {
		l := textfile.Labels("class", c)
		ss = append(ss, textfile.Sample{Name: nameBundles, Labels: l, Value: float64(bundles[c])},
			textfile.Sample{Name: nameBuckets, Labels: l, Value: float64(buckets[c])},
			textfile.Sample{Name: nameNewBuckets, Labels: l, Value: float64(fresh[c])})
	}
	for c, n := range gpus {
		ss = append(ss, textfile.Sample{Name: nameGPUs, Labels: textfile.Labels("class", c), Value: float64(n)})
	}

	ss = capped(ss, rep.Buckets, o.MaxBuckets, nameBucket,
		func(b bucket.Bucket) (int, string) { return b.Count, b.Signature },
		func(b bucket.Bucket) string {
			return textfile.Labels("signature", b.Signature, "class", b.Class, "title", b.Title)
		},
		textfile.Labels("signature", Other, "class", Other, "title", Other))
	var hw []bucket.GPU
	for _, g := range rep.GPUs {
		if g.Class == bucket.Hardware {
			hw = append(hw, g)
		}
	}
	ss = capped(ss, hw, o.MaxGPUs, nameSuspectGPU,
		func(g bucket.GPU) (int, string) { return g.Faults, g.ID },
		func(g bucket.GPU) string { return textfile.Labels("host", g.Host, "gpu", g.ID, "serial", g.Serial) },
		textfile.Labels("host", Other, "gpu", Other))
	ss = append(ss, textfile.Sample{Name: nameWindowBundle, Value: float64(rep.Bundles)})
	if !rep.Now.IsZero() {
		ss = append(ss, textfile.Sample{Name: nameReportTime, Value: float64(rep.Now.UnixMilli()) / 1e3})
	}
	return textfile.Render(ss, families)
}

// capped adds a series per item, largest first (ties by key), for at most
// max items; the rest are summed into one series labelled other.
func capped[T any](ss []textfile.Sample, items []T, max int, name string, size func(T) (int, string), labels func(T) string, other string) []textfile.Sample {
	items = slices.Clone(items)
	sort.SliceStable(items, func(i, j int) bool {
		ni, ki := size(items[i])
		nj, kj := size(items[j])
		if ni != nj {
			return ni > nj
		}
		return ki < kj
	})
	rest := 0
	for i, it := range items {
		n, _ := size(it)
		if i >= max {
			rest += n
			continue
		}
		ss = append(ss, textfile.Sample{Name: name, Labels: labels(it), Value: float64(n)})
	}
	if len(items) > max {
		ss = append(ss, textfile.Sample{Name: name, Labels: other, Value: float64(rest)})
	}
	return ss
}

// WriteFile replaces dir/kcrash-buckets.prom with the report's series.
func WriteFile(dir string, rep *bucket.Report, o Options) error {
	return textfile.Write(dir, FileName, Render(rep, o))
}
