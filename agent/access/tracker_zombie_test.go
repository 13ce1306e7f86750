package access

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/procfs"
	"github.com/kcrash/kcrash/internal/testenv"
)

// A process that crashed is often read again as a zombie (its fault's
// record arrives before its parent reaps it), and a zombie's
// /proc/PID/cgroup reads as the root cgroup. The tracker must keep the
// cgroup it read while the process lived, or a job's faults lose their job.
// Needs root and the v1 memory controller (a real cgroup, a real zombie).
func TestTrackerKeepsZombieCgroup(t *testing.T) {
	name := fmt.Sprintf("kcrash-test-%d/job_4242", os.Getpid())
	pid, exit := testenv.ChildInMemoryCgroup(t, "creates a cgroup-v1 memory cgroup", name)
	tr := &Tracker{}
	tr.Scan()
	if info, ok := tr.Lookup(pid); !ok || info.Cgroup != "/"+name {
		t.Fatalf("live child: %+v %v, want cgroup /%s", info, ok, name)
	}
	exit() // the child exits; nobody reaps it yet
	buf := make([]byte, 4096)
	until(t, "the child a zombie", func() bool {
		st, err := procfs.FS{}.StatInto(pid, buf)
		return err == nil && st.State == 'Z'
	})
	// Past lookupFresh, as a record arriving a while later finds it.
	tr.mu.Lock()
	tr.procs[pid].read = time.Now().Add(-2 * lookupFresh)
	tr.mu.Unlock()
	info, ok := tr.Lookup(pid)
	if !ok || info.Cgroup != "/"+name || JobFromCgroup(info.Cgroup) != "4242" {
		t.Errorf("zombie child: %+v %v, want cgroup /%s (job 4242)", info, ok, name)
	}
	// First seen dead, its cgroup is unknown, not the root's.
	fresh := &Tracker{}
	if info, ok := fresh.Lookup(pid); !ok || info.Cgroup != "" {
		t.Errorf("zombie first seen: %+v %v, want an empty cgroup", info, ok)
	}
}

// until polls cond (every 10 ms, for at most 10 s) for an event the test
// caused.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
