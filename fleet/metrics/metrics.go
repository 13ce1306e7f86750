// Package metrics writes a bucket report as node_exporter textfile series
// (kcrash-buckets.prom), so that a site's Prometheus can graph and alert on
// the fleet's buckets: how many bundles each class holds, how many buckets
// are new, which GPUs are hardware-suspect. Series per bucket and per GPU
// are capped, so a fleet with thousands of signatures or a flood of bad GPUs
// cannot blow up the series count: past the caps they are summed.
package metrics

import (
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

	top := append([]bucket.Bucket(nil), rep.Buckets...)
	sort.SliceStable(top, func(i, j int) bool {
		if top[i].Count != top[j].Count {
			return top[i].Count > top[j].Count
		}
		return top[i].Signature < top[j].Signature
	})
	other := 0
	for i, b := range top {
		if i >= o.MaxBuckets {
			other += b.Count
			continue
		}
		ss = append(ss, textfile.Sample{Name: nameBucket, Labels: textfile.Labels("signature", b.Signature, "class", b.Class, "title", b.Title), Value: float64(b.Count)})
	}
	if len(top) > o.MaxBuckets {
		ss = append(ss, textfile.Sample{Name: nameBucket, Labels: textfile.Labels("signature", Other, "class", Other, "title", Other), Value: float64(other)})
	}

	var hw []bucket.GPU
	for _, g := range rep.GPUs {
		if g.Class == bucket.Hardware {
			hw = append(hw, g)
		}
	}
	sort.SliceStable(hw, func(i, j int) bool {
		if hw[i].Faults != hw[j].Faults {
			return hw[i].Faults > hw[j].Faults
		}
		return hw[i].ID < hw[j].ID
	})
	otherFaults := 0
	for i, g := range hw {
		if i >= o.MaxGPUs {
			otherFaults += g.Faults
			continue
		}
		ss = append(ss, textfile.Sample{Name: nameSuspectGPU, Labels: textfile.Labels("host", g.Host, "gpu", g.ID, "serial", g.Serial), Value: float64(g.Faults)})
	}
	if len(hw) > o.MaxGPUs {
		ss = append(ss, textfile.Sample{Name: nameSuspectGPU, Labels: textfile.Labels("host", Other, "gpu", Other, "serial", ""), Value: float64(otherFaults)})
	}
	ss = append(ss, textfile.Sample{Name: nameWindowBundle, Value: float64(rep.Bundles)})
	if !rep.Now.IsZero() {
		ss = append(ss, textfile.Sample{Name: nameReportTime, Value: float64(rep.Now.UnixMilli()) / 1e3})
	}
	return textfile.Render(ss, families)
}

// WriteFile replaces dir/kcrash-buckets.prom with the report's series.
func WriteFile(dir string, rep *bucket.Report, o Options) error {
	return textfile.Write(dir, FileName, Render(rep, o))
}
