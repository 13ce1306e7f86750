package procfs

import (
	"errors"
	"os"
	"reflect"
	"testing"
)

var fixture = FS{Root: "testdata/proc"}

// TestStatCommWithParentheses: the command name is what lies between the
// first '(' and the last ')', spaces and parentheses included.
func TestStatCommWithParentheses(t *testing.T) {
	st, err := fixture.Stat(13820)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{Pid: 13820, Comm: "py (w) 1) x", State: 'S', Flags: 4194304, PPid: 13819, PGrp: 13810, Session: 8211,
		StartTicks: 388927, VSize: 15949824, RSSPages: 2638}
	if st != want {
		t.Fatalf("got %+v\nwant %+v", st, want)
	}
	buf := make([]byte, 1024)
	if st2, err := fixture.StatInto(13820, buf); err != nil || st2 != want {
		t.Fatalf("StatInto: %+v %v", st2, err)
	}
}

// An exiting task has left its cgroups while /proc still shows it running:
// PF_EXITING (0x4) among its flags says so before it is a zombie.
func TestStatExiting(t *testing.T) {
	for _, c := range []struct {
		st   Stat
		want bool
	}{
		{Stat{State: 'S', Flags: 4194304}, false}, // the fixture's flags: PF_RANDOMIZE
		{Stat{State: 'R', Flags: 4194304 | 0x4}, true},
		{Stat{State: 'D', Flags: 0x4}, true},
		{Stat{State: 'Z'}, true},
		{Stat{State: 'X'}, true},
	} {
		if got := c.st.Exiting(); got != c.want {
			t.Errorf("%c flags %#x: Exiting %v, want %v", c.st.State, c.st.Flags, got, c.want)
		}
	}
}

func TestStatMalformed(t *testing.T) {
	for _, in := range []string{"", "12 (x", "12 (x) S 1", "x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21"} {
		if _, err := ParseStat([]byte(in)); err == nil {
			t.Errorf("ParseStat(%q): no error", in)
		}
	}
	if _, err := fixture.Stat(1); !os.IsNotExist(err) {
		t.Errorf("a missing process: %v", err)
	}
}

func TestStatusCmdlineEnvironChildren(t *testing.T) {
	s, err := fixture.Status(13820)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "py (w) 1) x" || s.Tgid != 13820 || len(s.Uid) != 4 || len(s.Gid) != 4 || !s.HasGroups {
		t.Errorf("status: %+v", s)
	}
	if c, _ := fixture.Comm(13820); c != "py (w) 1) x" {
		t.Errorf("comm %q", c)
	}
	args, err := fixture.Cmdline(13820)
	if err != nil || len(args) != 3 || args[0] != "python3" || args[1] != "-c" {
		t.Errorf("cmdline %q %v", args, err)
	}
	env, err := fixture.Environ(13820)
	if want := []string{"HOME=/nonexistent", "SGLANG_KERNEL_API_LOGDEST=logs/kapi_%i.log", "PATH=/usr/bin:/bin"}; err != nil || !reflect.DeepEqual(env, want) {
		t.Errorf("environ %q %v", env, err)
	}
	kids, err := fixture.Children(13820)
	if want := []int{13822, 13823}; err != nil || !reflect.DeepEqual(kids, want) {
		t.Errorf("children %v %v, want %v", kids, err, want)
	}
	if pids, err := fixture.Pids(); err != nil || !reflect.DeepEqual(pids, []int{13820}) {
		t.Errorf("pids %v %v", pids, err)
	}
}

// TestSelf reads the test's own process from the real /proc.
func TestSelf(t *testing.T) {
	var fs FS
	st, err := fs.Stat(os.Getpid())
	if err != nil || st.Pid != os.Getpid() || st.PPid != os.Getppid() || st.StartTicks == 0 {
		t.Fatalf("%+v %v", st, err)
	}
	wd, _ := os.Getwd()
	if cwd, err := fs.Cwd(os.Getpid()); err != nil || cwd != wd {
		t.Errorf("cwd %q %v", cwd, err)
	}
}

// TestCgroups parses a hybrid host's lines (v1 memory beside a v2 tree) and
// reads the test's own file from the real /proc.
func TestCgroups(t *testing.T) {
	got := ParseCgroups([]byte("12:pids:/x\n9:cpu,memory:/slurm/uid_0/job_12/step_0\n1:name=systemd:/x\n0::/y\nbroken\n"))
	if len(got) != 4 || !got[1].Has("memory") || got[1].Path != "/slurm/uid_0/job_12/step_0" || got[0].Has("memory") || got[0].Unified() || !got[3].Unified() || got[3].Path != "/y" {
		t.Errorf("%+v", got)
	}
	var fs FS
	self, err := fs.Cgroups(os.Getpid())
	if err != nil || len(self) == 0 {
		t.Fatalf("%+v %v", self, err)
	}
	if _, err := (FS{Root: t.TempDir()}).Cgroups(1); err == nil {
		t.Error("a process that is not there: no error")
	}
}

// StatusInto and CgroupsInto read what Status and Cgroups read, in one
// buffer or, where the file does not fit it, whole.
func TestIntoReadsWhatReadFileReads(t *testing.T) {
	var fs FS
	pid := os.Getpid()
	want, err := fs.Status(pid)
	if err != nil {
		t.Fatal(err)
	}
	wantCg, err := fs.Cgroups(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{4096, 16} {
		got, err := fs.StatusInto(pid, make([]byte, n))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("StatusInto with %d bytes: %+v %v, want %+v", n, got, err, want)
		}
		cg, err := fs.CgroupsInto(pid, make([]byte, n))
		if err != nil || !reflect.DeepEqual(cg, wantCg) {
			t.Errorf("CgroupsInto with %d bytes: %+v %v, want %+v", n, cg, err, wantCg)
		}
	}
	if _, err := fs.StatusInto(1<<30, make([]byte, 64)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("StatusInto of no process: %v, want not-exist", err)
	}
}
