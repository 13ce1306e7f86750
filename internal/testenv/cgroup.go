package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MemoryCgroupRoot is where the cgroup-v1 memory controller is mounted.
const MemoryCgroupRoot = "/sys/fs/cgroup/memory"

// MemoryCgroup makes the cgroup-v1 memory cgroup rel (a path below
// MemoryCgroupRoot, its missing parents too) for the test and removes it,
// and the parents it made, when the test ends: a cleanup the test registers
// later (killing and reaping its children) runs first. It skips (fails under
// CI) unless the tests may change the host and the controller is mounted;
// what says what the test needs it for.
func MemoryCgroup(t testing.TB, what, rel string) string {
	t.Helper()
	MutateHost(t, what)
	if _, err := os.Stat(filepath.Join(MemoryCgroupRoot, "memory.limit_in_bytes")); err != nil {
		Skip(t, "cgroup v1 memory controller not mounted at %s: %v", MemoryCgroupRoot, err)
	}
	var made []string // outermost first
	for p := filepath.Clean(rel); p != "." && p != "/"; p = filepath.Dir(p) {
		dir := filepath.Join(MemoryCgroupRoot, p)
		if _, err := os.Stat(dir); err == nil {
			break
		}
		made = append([]string{dir}, made...)
	}
	dir := filepath.Join(MemoryCgroupRoot, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			if err := RemoveCgroup(made[i]); err != nil {
				t.Error(err)
			}
		}
	})
	return dir
}

// RemoveCgroup removes a cgroup directory once the kernel lets it go: a task
// that was killed and reaped leaves its cgroup a moment later (5 s at most).
func RemoveCgroup(dir string) error {
	if !strings.HasPrefix(dir, "/sys/fs/cgroup/") {
		return fmt.Errorf("not a cgroup: %s", dir)
	}
	var err error
	for i := 0; i < 50; i++ {
		if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("removing %s: %w", dir, err)
}
