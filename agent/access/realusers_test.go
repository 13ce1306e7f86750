package access

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/internal/procfs"
	"github.com/kcrash/kcrash/internal/testenv"
)

const (
	userA = "kcrash-agent-a"
	userB = "kcrash-agent-b"
)

// startAs starts a sleeping process as uid:gid and returns it; it is killed
// when the test ends.
func startAs(t *testing.T, uid, gid int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// waitUID waits until /proc shows pid running as uid: after fork, the
// child is the parent's until it has changed credentials and exec'd.
func waitUID(t *testing.T, pid, uid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := procfs.FS{}.Status(pid)
		if err == nil && len(st.Uid) > 0 && st.Uid[0] == uid && st.Name == "sleep" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never ran as uid %d: %+v %v", pid, uid, st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func faultLine(pid int) string {
	// The amdgpu fault's process line, as gmc9 kernels print it.
	return fmt.Sprintf("amdgpu 0000:c6:00.0: amdgpu:  for process sleep pid %d thread sleep pid %d)", pid, pid)
}

// TestRealUsers: processes of two real unprivileged users, one of them gone
// before its record is read; each user sees its own, not the other's.
func TestRealUsers(t *testing.T) {
	uidA, gidA := testenv.User(t, userA)
	uidB, gidB := testenv.User(t, userB)
	a1, b1, a2 := startAs(t, uidA, gidA), startAs(t, uidB, gidB), startAs(t, uidA, gidA)
	for _, c := range []struct {
		cmd *exec.Cmd
		uid int
	}{{a1, uidA}, {b1, uidB}, {a2, uidA}} {
		waitUID(t, c.cmd.Process.Pid, c.uid)
	}
	tr := &Tracker{}
	tr.Scan()
	for _, c := range []struct{ pid, uid int }{{a1.Process.Pid, uidA}, {b1.Process.Pid, uidB}} {
		if info, ok := tr.Lookup(c.pid); !ok || info.UID != c.uid || info.Comm != "sleep" || info.PPid != os.Getpid() {
			t.Errorf("Lookup(%d) = %+v %v, want uid %d", c.pid, info, ok, c.uid)
		}
	}
	// a2 exits before its record is read: the tracker recorded it alive.
	a2pid := a2.Process.Pid
	a2.Process.Kill()
	a2.Wait()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", a2pid)); err == nil {
		t.Fatalf("pid %d still in /proc after wait", a2pid)
	}
	an := &Annotator{Tracker: tr, SysRoot: t.TempDir()}
	entry := func(pid int) *journal.Entry {
		e := &journal.Entry{Boot: "b", Rec: api.Record{Text: faultLine(pid)}}
		an.Annotate(nil, e)
		return e
	}
	eA1, eB1, eA2 := entry(a1.Process.Pid), entry(b1.Process.Pid), entry(a2pid)
	if p := eA2.Subject.Procs; len(p) != 1 || p[0].UID != uidA {
		t.Fatalf("the exited pid's subject: %+v", eA2.Subject)
	}
	peerA := Peer{UID: uidA, GID: gidA}
	peerB := Peer{UID: uidB, GID: gidB}
	st, err := procfs.FS{}.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A peer whose own process started b1 (this test): b1 descends from it.
	parentOfB := Peer{UID: uidA, GID: gidA, PID: os.Getpid(), StartTime: st.StartTicks}
	for _, c := range []struct {
		name string
		peer Peer
		e    *journal.Entry
		want bool
	}{
		{"A's live process, to A", peerA, eA1, true},
		{"A's exited process, to A", peerA, eA2, true},
		{"B's process, to A", peerA, eB1, false},
		{"A's live process, to B", peerB, eA1, false},
		{"A's exited process, to B", peerB, eA2, false},
		{"B's process, to B", peerB, eB1, true},
		{"B's process, to the peer that started it", parentOfB, eB1, true},
	} {
		if got, why := Visible(c.peer, c.e, "", tr); got != c.want {
			t.Errorf("%s: %v (%s), want %v", c.name, got, why, c.want)
		}
	}
}

// TestFromConnSelf: a real socket pair's peer is this process, with its
// start time and cgroup from /proc; Recheck keeps it while it lives.
func TestFromConnSelf(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	p, err := FromConn(sc, "", "")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := procfs.FS{}.Stat(os.Getpid())
	cgs, _ := procfs.FS{}.Cgroups(os.Getpid())
	want := Peer{UID: os.Getuid(), GID: os.Getgid(), PID: os.Getpid(), StartTime: st.StartTicks, Cgroup: CgroupPath(cgs)}
	want.Job = JobFromCgroup(want.Cgroup)
	want.Devices, _ = ReadDeviceRules("", "", os.Getpid())
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("FromConn = %+v, want %+v", p, want)
	}
	if r := p.Recheck(""); !reflect.DeepEqual(r, p) {
		t.Errorf("Recheck of a living peer: %+v", r)
	}
	reused := p
	reused.StartTime++
	if r := reused.Recheck(""); !reflect.DeepEqual(r, Peer{UID: p.UID, GID: p.GID}) {
		t.Errorf("Recheck of a reused pid: %+v", r)
	}
}
