package supervisor

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/procfs"
)

// TestTrackerFixtureRoot samples a proc tree under a fixture root (a real
// process's files, internal/procfs/testdata): the name with parentheses and
// spaces, the argv, the parent, the RSS and the start are read from it.
func TestTrackerFixtureRoot(t *testing.T) {
	fs := procfs.FS{Root: "../internal/procfs/testdata/proc"}
	tr := NewTrackerFS(13820, fs)
	tr.Sample(context.Background())
	ps := tr.Processes()
	if len(ps) != 1 {
		t.Fatalf("%d processes: %+v", len(ps), ps)
	}
	p := ps[0]
	boot, err := fs.BootTime()
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid != 13820 || p.PPid != 13819 || p.Name != "py (w) 1) x" || len(p.Cmdline) != 3 || p.Cmdline[0] != "python3" || p.Exited {
		t.Errorf("%+v", p)
	}
	if want := uint64(2638 * os.Getpagesize()); p.RSSBytes != want {
		t.Errorf("RSS %d, want %d", p.RSSBytes, want)
	}
	if want := boot.Add(388927 * 10 * time.Millisecond); !p.StartTime.Equal(want) {
		t.Errorf("start %v, want %v", p.StartTime, want)
	}
}

// BenchmarkTrackerSample is one sample of a tree (the test process and its
// children) on the real /proc: every process's stat is read once; names and
// argv only for new members.
func BenchmarkTrackerSample(b *testing.B) {
	tr := NewTracker(os.Getpid())
	ctx := context.Background()
	tr.Sample(ctx)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.Sample(ctx)
	}
}
