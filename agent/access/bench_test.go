package access

import (
	"testing"
	"time"
)

// BenchmarkTrackerScan is the tracker's periodic look at the real /proc
// (every 2 s in the agent): a readdir, reading only new processes and
// stat'ing only young ones. Its CPU per scan is part of the idle agent's cost.
func BenchmarkTrackerScan(b *testing.B) {
	tr := &Tracker{}
	tr.Scan()
	// The steady state: the processes were read a while ago.
	for _, p := range tr.procs {
		p.read = p.read.Add(-time.Minute)
	}
	b.ResetTimer()
	for b.Loop() {
		tr.scanLocked(time.Now())
	}
	b.ReportMetric(float64(tr.Len()), "processes")
}
