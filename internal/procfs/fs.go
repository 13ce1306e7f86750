package procfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRoot is where the kernel mounts proc.
const DefaultRoot = "/proc"

// FS reads processes under a proc root: /proc, or a fixture tree in tests
// (prometheus/procfs's FS, cut to what kcrash reads). The zero FS reads /proc.
type FS struct {
	Root string
}

// Path joins elements under the root: Path("12", "stat").
func (fs FS) Path(elem ...string) string {
	root := fs.Root
	if root == "" {
		root = DefaultRoot
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

func (fs FS) pid(pid int, f ...string) string {
	return fs.Path(append([]string{strconv.Itoa(pid)}, f...)...)
}

// Stat is what kcrash uses of /proc/PID/stat.
type Stat struct {
	Pid        int
	Comm       string // the kernel's 15-byte name; may hold spaces and parentheses
	State      byte   // 'R', 'S', 'D', 'Z'...
	Flags      uint64 // the kernel's PF_* flags of the task
	PPid       int
	PGrp       int
	Session    int
	StartTicks uint64 // clock ticks after boot: with the pid, a process's identity
	VSize      uint64 // bytes
	RSSPages   uint64
}

// Stat reads /proc/PID/stat.
func (fs FS) Stat(pid int) (Stat, error) {
	b, err := os.ReadFile(fs.pid(pid, "stat"))
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %v", fs.pid(pid, "stat"), err)
	}
	return st, nil
}

// StatInto reads /proc/PID/stat into buf, with raw system calls and no
// allocation beyond the result: os.Open would also register each file with
// the netpoller, a third of the cost of walking a node's process table.
func (fs FS) StatInto(pid int, buf []byte) (Stat, error) {
	fd, err := unix.Open(fs.pid(pid, "stat"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stat{}, err
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(buf[:max(n, 0)])
}

// ParseStat parses a /proc/PID/stat line. The command name sits between
// the first '(' and the last ')': it may itself hold both, and spaces.
func ParseStat(b []byte) (Stat, error) {
	i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if i < 0 || j < i {
		return Stat{}, fmt.Errorf("unexpected format")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:i])))
	if err != nil {
		return Stat{}, fmt.Errorf("unexpected format")
	}
	// after comm: state ppid pgrp session tty_nr tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime vsize rss
	f := strings.Fields(string(b[j+1:]))
	if len(f) < 22 || f[0] == "" {
		return Stat{}, fmt.Errorf("too few fields")
	}
	num := func(k int) uint64 { v, _ := strconv.ParseUint(f[k], 10, 64); return v }
	inum := func(k int) int { v, _ := strconv.Atoi(f[k]); return v }
	return Stat{Pid: pid, Comm: string(b[i+1 : j]), State: f[0][0], Flags: num(6), PPid: inum(1), PGrp: inum(2), Session: inum(3),
		StartTicks: num(19), VSize: num(20), RSSPages: num(21)}, nil
}

// pfExiting is the kernel's PF_EXITING: the task has begun to exit.
const pfExiting = 0x4

// Exiting reports whether the process has exited or begun to (a zombie, or
// PF_EXITING set while it still shows as running). An exiting task has
// left its cgroups before it becomes a zombie: from then on its
// /proc/PID/cgroup reads as the root of every hierarchy.
func (s Stat) Exiting() bool {
	return s.State == 'Z' || s.State == 'X' || s.Flags&pfExiting != 0
}

// Status is what kcrash uses of /proc/PID/status.
type Status struct {
	Name string
	Tgid int
	// Uid and Gid are real, effective, saved and filesystem ids; nil when
	// the file did not say.
	Uid, Gid []int
	Groups   []int
	// HasGroups says the Groups line was there (it may be empty).
	HasGroups bool
}

// Status reads /proc/PID/status.
func (fs FS) Status(pid int) (Status, error) {
	b, err := os.ReadFile(fs.pid(pid, "status"))
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(b), nil
}

// StatusInto is Status read into buf as StatInto reads: a process tracker
// reads the status of each process it sees born.
func (fs FS) StatusInto(pid int, buf []byte) (Status, error) {
	b, err := readInto(fs.pid(pid, "status"), buf)
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(b), nil
}

// readInto reads a small file of /proc into buf with raw system calls and
// one read (procfs hands out a file of one page or less whole; os.ReadFile
// also stats it, tries the netpoller and reads again to see its end). A
// file that fills buf is read again by os.ReadFile.
func readInto(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if n >= len(buf) {
		return os.ReadFile(path)
	}
	return buf[:max(n, 0)], nil
}

// ParseStatus parses the lines of /proc/PID/status that kcrash uses.
func ParseStatus(b []byte) Status {
	var s Status
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch k {
		case "Name":
			s.Name = strings.TrimSpace(v)
		case "Tgid":
			s.Tgid, _ = strconv.Atoi(strings.TrimSpace(v))
		case "Uid":
			s.Uid, _ = ids(v)
		case "Gid":
			s.Gid, _ = ids(v)
		case "Groups":
			if g, ok := ids(v); ok {
				s.Groups, s.HasGroups = g, true
			}
		}
	}
	return s
}

// ids reads a status line of numbers ("\t1000\t1000\t1000\t1000").
func ids(v string) ([]int, bool) {
	var out []int
	for _, f := range strings.Fields(v) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// Comm is /proc/PID/comm without its newline.
func (fs FS) Comm(pid int) (string, error) {
	b, err := os.ReadFile(fs.pid(pid, "comm"))
	return strings.TrimSuffix(string(b), "\n"), err
}

// Args is /proc/PID/cmdline as the process's argv: empty arguments kept,
// the trailing NUL dropped; nil when it is empty (a kernel thread, a
// zombie). Cmdline instead drops every empty entry.
func (fs FS) Args(pid int) ([]string, error) {
	b, err := os.ReadFile(fs.pid(pid, "cmdline"))
	if err != nil || len(b) == 0 {
		return nil, err
	}
	return strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00"), nil
}

// BootTime is /proc/stat's btime: when the machine booted, to the second.
func (fs FS) BootTime() (time.Time, error) {
	b, err := os.ReadFile(fs.Path("stat"))
	if err != nil {
		return time.Time{}, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("%s: btime: %v", fs.Path("stat"), err)
			}
			return time.Unix(n, 0), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: no btime", fs.Path("stat"))
}

// UserHZ is the unit of /proc/PID/stat's times: USER_HZ is 100 on every
// Linux ABI Go supports.
const UserHZ = 100

// Since is how long after boot a process of StartTicks started.
func Since(startTicks uint64) time.Duration {
	return time.Duration(startTicks) * time.Second / UserHZ
}

// Cmdline is /proc/PID/cmdline's arguments (none for a kernel thread or a zombie).
func (fs FS) Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fs.pid(pid, "cmdline"))
	return SplitNUL(b), err
}

// Environ is /proc/PID/environ's K=V entries; reading it needs
// ptrace-read access to the process.
func (fs FS) Environ(pid int) ([]string, error) {
	b, err := os.ReadFile(fs.pid(pid, "environ"))
	return SplitNUL(b), err
}

// Cwd is where /proc/PID/cwd points.
func (fs FS) Cwd(pid int) (string, error) { return os.Readlink(fs.pid(pid, "cwd")) }

// FD is the path of the process's descriptor fd: a link to what it has
// open, which stays that file even when its name was reused.
func (fs FS) FD(pid, fd int) string { return fs.pid(pid, "fd", strconv.Itoa(fd)) }

// Children are the pids /proc/PID/task/*/children lists (kernels with
// CONFIG_PROC_CHILDREN); an error when none of the files could be read.
func (fs FS) Children(pid int) ([]int, error) {
	tasks, err := filepath.Glob(fs.pid(pid, "task", "*", "children"))
	if err != nil || len(tasks) == 0 {
		return nil, fmt.Errorf("%s: no children files", fs.pid(pid, "task"))
	}
	var out []int
	read := false
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		read = true
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	if !read {
		return nil, fmt.Errorf("%s: children not readable", fs.pid(pid, "task"))
	}
	return out, nil
}

// Pids are the processes under the root.
func (fs FS) Pids() ([]int, error) {
	d, err := os.Open(fs.Path())
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Cgroup is one line of /proc/PID/cgroup: a hierarchy, its controllers, and
// the process's cgroup in it.
type Cgroup struct {
	ID          string   // the hierarchy's number; "0" for the unified (v2) one
	Controllers []string // none for the unified hierarchy
	Path        string
}

// Unified says whether c is the cgroup-v2 hierarchy's line ("0::/path").
func (c Cgroup) Unified() bool { return c.ID == "0" && len(c.Controllers) == 0 }

// Has says whether the hierarchy holds the controller ctrl (v1).
func (c Cgroup) Has(ctrl string) bool { return slices.Contains(c.Controllers, ctrl) }

// Cgroups reads /proc/PID/cgroup.
func (fs FS) Cgroups(pid int) ([]Cgroup, error) {
	b, err := os.ReadFile(fs.pid(pid, "cgroup"))
	if err != nil {
		return nil, err
	}
	return ParseCgroups(b), nil
}

// CgroupsInto is Cgroups read into buf as StatusInto reads.
func (fs FS) CgroupsInto(pid int, buf []byte) ([]Cgroup, error) {
	b, err := readInto(fs.pid(pid, "cgroup"), buf)
	if err != nil {
		return nil, err
	}
	return ParseCgroups(b), nil
}

// ParseCgroups parses /proc/PID/cgroup's "ID:CONTROLLERS:PATH" lines;
// malformed lines are skipped.
func ParseCgroups(b []byte) []Cgroup {
	var out []Cgroup
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSuffix(line, "\n"), ":", 3)
		if len(parts) != 3 {
			continue
		}
		c := Cgroup{ID: parts[0], Path: parts[2]}
		if parts[1] != "" {
			c.Controllers = strings.Split(parts[1], ",")
		}
		out = append(out, c)
	}
	return out
}

// Limits is /proc/PID/limits as the kernel prints it.
func (fs FS) Limits(pid int) (string, error) {
	b, err := os.ReadFile(fs.pid(pid, "limits"))
	return string(b), err
}
