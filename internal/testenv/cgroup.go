package testenv

import (
	"fmt"
	"os"
	"os/exec"
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

// ChildInMemoryCgroup starts a shell that moves itself into the cgroup-v1
// memory cgroup rel (made as MemoryCgroup makes it) and waits there; it
// returns once /proc shows the child in that cgroup. exit ends the child
// without reaping it, so that it stays a zombie for the test to look at;
// the test's end kills and reaps it before the cgroup is removed.
func ChildInMemoryCgroup(t testing.TB, what, rel string) (pid int, exit func()) {
	t.Helper()
	dir := MemoryCgroup(t, what, rel)
	sh, err := exec.LookPath("sh")
	if err != nil {
		Skip(t, "sh not installed: %v", err)
	}
	cmd := exec.Command(sh, "-c", fmt.Sprintf(`echo $$ > %s/cgroup.procs && read go`, dir))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	pid = cmd.Process.Pid
	in := ":" + filepath.Join("/", rel) + "\n"
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if strings.Contains(string(b), in) {
			return pid, func() { stdin.Close() }
		}
		if time.Now().After(end) {
			t.Fatalf("child %d never showed in cgroup %s", pid, rel)
		}
	}
}
