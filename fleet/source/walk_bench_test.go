package source

import (
	"context"
	"os"
	"testing"

	"github.com/kcrash/kcrash/fleet/index"
)

// BenchmarkWalk summarises every bundle under $KCRASH_BENCH_FLEET (made by
// bench/gen-fleet), with GOMAXPROCS readers.
func BenchmarkWalk(b *testing.B) {
	dir := os.Getenv("KCRASH_BENCH_FLEET")
	if dir == "" {
		b.Skip("KCRASH_BENCH_FLEET names a directory of bundles (bench/gen-fleet)")
	}
	n := 0
	for b.Loop() {
		n = 0
		if _, err := (Walk{Put: func(s []index.Summary) error { n += len(s); return nil }}).Run(context.Background(), []string{dir}); err != nil || n == 0 {
			b.Fatal(err, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n)/1e6, "ms/bundle")
}
