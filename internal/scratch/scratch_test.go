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

// An Owner is gone when its process ended, its pid names a later process,
// or this host rebooted since; never when that cannot be told from here.
func TestOwnerGone(t *testing.T) {
	me := Self()
	if me.Gone() || me.StartTicks == 0 || me.BootID == "" {
		t.Fatalf("Self %+v: gone %v", me, me.Gone())
	}
	dead := me
	dead.Pid = deadPid(t)
	reused := me
	reused.Pid, reused.StartTicks = os.Getppid(), 1 // the parent started long after boot's first tick
	otherNS := dead
	otherNS.PidNS++
	rebooted := dead
	rebooted.BootID = "00000000-0000-0000-0000-000000000000"
	otherHost := rebooted
	otherHost.Host = me.Host + "-elsewhere"
	parent := me
	parent.Pid, parent.StartTicks = os.Getppid(), 0
	for _, c := range []struct {
		name string
		o    Owner
		gone bool
	}{{"dead", dead, true}, {"reused pid", reused, true}, {"rebooted", rebooted, true},
		{"other pid namespace", otherNS, false}, {"other host", otherHost, false}, {"live, start unknown", parent, false}} {
		if got := c.o.Gone(); got != c.gone {
			t.Errorf("%s: Gone() = %v, want %v", c.name, got, c.gone)
		}
	}
	back, ok := ParseTag(me.Tag())
	if !ok || back.Pid != me.Pid || back.PidNS != me.PidNS || back.StartTicks != me.StartTicks || back.Gone() {
		t.Errorf("ParseTag(%q) = %+v, %v", me.Tag(), back, ok)
	}
	if _, ok := ParseTag("1.x.3"); ok {
		t.Error("ParseTag took a bad tag")
	}
}
