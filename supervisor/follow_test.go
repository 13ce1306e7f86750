package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/supervisor/ringbuf"
)

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// eventually waits for the ring to hold want.
func eventually(t *testing.T, r *ringbuf.Ring, want string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(string(r.Bytes()), want) {
			return
		}
	}
	t.Fatalf("ring never held %q; it has %q", want, r.Bytes())
}

var fastFollow = FollowOptions{Interval: 10 * time.Millisecond, Backlog: -1}

func TestFollowBacklogAndAppend(t *testing.T) {
	p := filepath.Join(t.TempDir(), "server.log")
	appendFile(t, p, "old line 1\nold line 2\n")
	r := ringbuf.New(1 << 10)
	f := Follow(p, r, FollowOptions{Interval: 10 * time.Millisecond, Backlog: 11})
	eventually(t, r, "old line 2\n")
	if got := string(r.Bytes()); got != "old line 2\n" {
		t.Fatalf("backlog = %q, want the last 11 bytes", got)
	}
	appendFile(t, p, "new line\n")
	eventually(t, r, "old line 2\nnew line\n")
	f.Stop()
}

func TestFollowRotation(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "server.log")
	appendFile(t, p, "before\n")
	r := ringbuf.New(1 << 10)
	f := Follow(p, r, FollowOptions{Interval: 10 * time.Millisecond, Backlog: -1})
	eventually(t, r, "before\n")
	// logrotate's default: move the file away, the writer keeps its old
	// descriptor a moment, then a new file takes the name.
	old, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	old.WriteString("late write to the moved file\n")
	old.Close()
	eventually(t, r, "late write to the moved file\n")
	appendFile(t, p, "after rotation\n")
	eventually(t, r, "after rotation\n")
	f.Stop()
	want := "before\nlate write to the moved file\nafter rotation\n"
	if got := string(r.Bytes()); got != want {
		t.Fatalf("ring = %q, want %q", got, want)
	}
	if s := f.Stats(); s.Rotations != 1 || s.Missing {
		t.Fatalf("stats %+v, want one rotation", s)
	}
}

func TestFollowTruncation(t *testing.T) {
	p := filepath.Join(t.TempDir(), "server.log")
	appendFile(t, p, "a long first line before copytruncate\n")
	r := ringbuf.New(1 << 10)
	f := Follow(p, r, fastFollow)
	eventually(t, r, "copytruncate\n")
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.Stats().Truncations == 1 }, "the truncation to be seen")
	appendFile(t, p, "after\n")
	eventually(t, r, "copytruncate\nafter\n")
	f.Stop()
	if s := f.Stats(); s.Truncations != 1 {
		t.Fatalf("stats %+v, want one truncation", s)
	}
}

func TestFollowFileAppearsLater(t *testing.T) {
	p := filepath.Join(t.TempDir(), "later.log")
	r := ringbuf.New(1 << 10)
	f := Follow(p, r, FollowOptions{Interval: 10 * time.Millisecond, Backlog: 3})
	waitFor(t, func() bool { return f.Stats().Missing }, "the missing file to be reported missing")
	// Created after the follow began: all of it is new output, the backlog
	// limit does not apply.
	appendFile(t, p, "first words\n")
	eventually(t, r, "first words\n")
	f.Stop()
}

// Stop reads what was written just before: the crash's last lines.
func TestFollowStopDrains(t *testing.T) {
	p := filepath.Join(t.TempDir(), "server.log")
	appendFile(t, p, "")
	r := ringbuf.New(1 << 10)
	f := Follow(p, r, FollowOptions{Interval: time.Hour, Backlog: -1})
	time.Sleep(20 * time.Millisecond)
	appendFile(t, p, "Segmentation fault\n")
	f.Stop()
	if got := string(r.Bytes()); got != "Segmentation fault\n" {
		t.Fatalf("ring = %q", got)
	}
}
