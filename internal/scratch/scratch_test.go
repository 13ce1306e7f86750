package scratch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// deadPid is the pid of a process that has just ended.
func deadPid(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestSweepRemovesOnlyDeadOwners(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mine, err := Mkdir("kcrash-py-")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("kcrash-py-%d.%d-", pidNamespace(), os.Getpid()); !strings.HasPrefix(filepath.Base(mine), want) {
		t.Fatalf("Mkdir made %s, want a name starting %s", mine, want)
	}
	ns, dead := pidNamespace(), deadPid(t)
	mk := func(name string, withFile bool) string {
		p := filepath.Join(tmp, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if withFile {
			os.WriteFile(filepath.Join(p, "sglang_kernel_api_1.log"), []byte("evidence"), 0o600)
		}
		return p
	}
	gone := mk(fmt.Sprintf("kcrash-py-%d.%d-123", ns, dead), true)
	otherNS := mk(fmt.Sprintf("kcrash-py-%d.%d-123", ns+1, dead), false)
	live := mk(fmt.Sprintf("kcrash-py-%d.%d-123", ns, os.Getppid()), false)
	old := mk("kcrash-py-4242", false) // a name of an older kcrash: no owner in it
	emptyRun := mk(fmt.Sprintf("kcrash-run-%d.%d-1", ns, dead), false)
	fullRun := mk(fmt.Sprintf("kcrash-run-%d.%d-2", ns, dead), true)
	link := filepath.Join(tmp, fmt.Sprintf("kcrash-py-%d.%d-link", ns, dead))
	os.Symlink(otherNS, link)

	Sweep("kcrash-py-", false)
	Sweep("kcrash-run-", true)
	for _, p := range []string{gone, emptyRun} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s of a dead kcrash still there", filepath.Base(p))
		}
	}
	for _, p := range []string{mine, otherNS, live, old, fullRun, link} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(p), err)
		}
	}
}
