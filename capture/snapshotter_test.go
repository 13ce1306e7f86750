package capture

import (
	"sync/atomic"
	"testing"
)

// A snapshot asked for before the session exists (the signal came as soon
// as the child ran) is served once the session is ready, not dropped; one
// asked for while another runs is not run twice.
func TestSnapshotterKeepsEarlyRequest(t *testing.T) {
	var s snapshotter
	var runs atomic.Int32
	release := make(chan struct{})
	s.trigger() // before ready
	s.ready(func() { runs.Add(1); <-release })
	s.trigger() // while the first runs: dropped, one is running
	close(release)
	s.wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d snapshots, want 1", n)
	}
	s.trigger() // after: runs again
	s.wait()
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d snapshots, want 2", n)
	}
	var idle snapshotter
	idle.ready(func() { t.Error("a snapshot nobody asked for") })
	idle.wait()
}
