package software

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
)

// numpyTree starts n real Python processes that imported numpy.
func numpyTree(b *testing.B, n int) []int {
	b.Helper()
	if _, err := os.Stat("/usr/lib/python3/dist-packages/numpy"); err != nil {
		testenv.Skip(b, "python3-numpy is not installed")
	}
	var pids []int
	for i := 0; i < n; i++ {
		p := startPythonB(b, "/usr/bin/python3", "import numpy")
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// BenchmarkCollect50 is the collector's work at collection on a tree of 50
// Python processes importing numpy: every maps file read, each library
// stat'ed and its build id read once, the packages and versions read,
// software.json marshalled (its size is reported as bytes/report).
func BenchmarkCollect50(b *testing.B) {
	pids := numpyTree(b, 50)
	var size int
	b.ResetTimer()
	for b.Loop() {
		s := NewSampler(DefaultRoots())
		s.Observe(context.Background(), pids, true)
		rep := Build(context.Background(), DefaultRoots(), s, DefaultLimits)
		out, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "bytes/report")
}

// BenchmarkWatchTick50 is one tick of the watcher once the 50 processes are
// known and settled: each due process costs a stat read, and its maps only
// when its virtual size moved.
func BenchmarkWatchTick50(b *testing.B) {
	pids := numpyTree(b, 50)
	s := NewSampler(DefaultRoots())
	s.Observe(context.Background(), pids, true)
	clock := time.Now()
	s.now = func() time.Time { return clock }
	b.ResetTimer()
	for b.Loop() {
		clock = clock.Add(maxBackoff) // every process due
		s.Observe(context.Background(), pids, false)
	}
}
