package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/shirou/gopsutil/v4/process"
	"golang.org/x/sys/unix"
)

// Tracker follows every descendant of a root process and remembers the ones
// that exited: the kernel names them later (an OOM-killed worker, a faulting
// scheduler process) and the bundle must be able to say they were ours.
type Tracker struct {
	root  int32
	mu    sync.Mutex
	procs map[int32]*evidence.Process
	// keyed by pid+start so a reused pid is a new process
	starts map[int32]uint64
}

// NewTracker tracks root's tree.
func NewTracker(root int) *Tracker {
	return &Tracker{root: int32(root), procs: map[int32]*evidence.Process{}, starts: map[int32]uint64{}}
}

// Run samples the tree every interval until ctx is done, then once more.
func (t *Tracker) Run(ctx context.Context, interval time.Duration) {
	t.Sample(ctx)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			t.Sample(context.Background())
			return
		case <-tick.C:
			t.Sample(ctx)
		}
	}
}

// Sample walks the process table once. Membership: the root, anything whose
// parent is a member, and anything in the root's session or process group
// (orphans reparented to init keep those). One read of /proc/PID/stat per
// process decides membership; gopsutil reads names and command lines only
// for new members and RSS for members, which keeps sampling cheap on a node
// with thousands of processes.
func (t *Tracker) Sample(ctx context.Context) {
	now := time.Now()
	stats, err := scanProc(t.procRoot())
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	member := map[int32]bool{}
	if _, ok := stats[t.root]; ok {
		member[t.root] = true
	}
	for pid, st := range stats {
		if st.sid == t.root || st.pgid == t.root {
			member[pid] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for pid, st := range stats {
			if !member[pid] && member[st.ppid] {
				member[pid], changed = true, true
			}
		}
	}
	for pid := range member {
		st := stats[pid]
		rec, known := t.procs[pid]
		if known && t.starts[pid] == seeded {
			t.starts[pid] = st.start // seeded: this is the same process
		}
		if known && t.starts[pid] != st.start {
			known = false // pid reused
		}
		p, _ := process.NewProcessWithContext(ctx, pid)
		if !known {
			rec = &evidence.Process{Pid: pid, FirstSeen: now, StartTime: now}
			if p != nil {
				if ct, err := p.CreateTimeWithContext(ctx); err == nil {
					rec.StartTime = time.UnixMilli(ct)
				}
				rec.Name, _ = p.NameWithContext(ctx)
				rec.Cmdline, _ = p.CmdlineSliceWithContext(ctx)
			}
			t.procs[pid] = rec
			t.starts[pid] = st.start
		}
		if known && p != nil && st.comm != "" && st.comm != truncComm(rec.Name) {
			// the process exec'd (a forked shell became `sleep`): name it anew
			rec.Name, _ = p.NameWithContext(ctx)
			rec.Cmdline, _ = p.CmdlineSliceWithContext(ctx)
		}
		rec.PPid = st.ppid
		rec.LastSeen = now
		rec.Exited = false
		rec.RSSBytes = st.rssPages * uint64(os.Getpagesize())
	}
	for pid, rec := range t.procs {
		if !member[pid] {
			rec.Exited = true
		}
	}
}

// truncComm is a name as the kernel's 15-byte comm field holds it.
func truncComm(name string) string {
	if len(name) > 15 {
		return name[:15]
	}
	return name
}

func (t *Tracker) procRoot() string { return "/proc" }

// treeStat is what membership needs from /proc/PID/stat.
type treeStat struct {
	ppid, pgid, sid int32
	comm            string // changes on exec: the record's name and command line are then re-read
	start           uint64 // clock ticks after boot: with the pid, a process's identity
	rssPages        uint64
}

func scanProc(root string) (map[int32]treeStat, error) {
	d, err := os.Open(root)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	out := make(map[int32]treeStat, len(names))
	buf := make([]byte, 1024)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		st, ok := readStat(filepath.Join(root, n, "stat"), buf)
		if ok {
			out[int32(pid)] = st
		}
	}
	return out, nil
}

func readStat(path string, buf []byte) (treeStat, bool) {
	// Raw syscalls: os.Open would also try to register each /proc file with
	// the netpoller, a third of the cost of a sample.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return treeStat{}, false
	}
	n, _ := unix.Read(fd, buf)
	unix.Close(fd)
	if n <= 0 {
		return treeStat{}, false
	}
	s := string(buf[:n])
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return treeStat{}, false
	}
	// fields after comm: state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime vsize rss
	f2 := strings.Fields(s[i+1:])
	if len(f2) < 22 {
		return treeStat{}, false
	}
	if f2[0] == "Z" {
		return treeStat{}, false // a zombie has exited; the exit event or the next sample says so
	}
	num := func(k int) uint64 { v, _ := strconv.ParseUint(f2[k], 10, 64); return v }
	comm := ""
	if j := strings.IndexByte(s, '('); j >= 0 && j < i {
		comm = s[j+1 : i]
	}
	return treeStat{comm: comm, ppid: int32(num(1)), pgid: int32(num(2)), sid: int32(num(3)), start: num(19), rssPages: num(21)}, true
}

// seeded marks a process recorded before its first sample.
const seeded = ^uint64(0)

// Seed records the root as started, before the first sample: a command that
// crashes within milliseconds is still in the tree.
func (t *Tracker) Seed(args []string, start time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.procs[t.root]; ok {
		return
	}
	name := ""
	if len(args) > 0 {
		name = filepath.Base(args[0])
	}
	t.procs[t.root] = &evidence.Process{Pid: t.root, PPid: int32(os.Getpid()), Name: name, Cmdline: args,
		StartTime: start, FirstSeen: start, LastSeen: start}
	t.starts[t.root] = seeded
}

// MarkExited records that the root has been reaped.
func (t *Tracker) MarkExited(pid int) {
	t.mu.Lock()
	if p, ok := t.procs[int32(pid)]; ok {
		p.Exited = true
	}
	t.mu.Unlock()
}

// Processes returns every process seen, alive or gone, by pid.
func (t *Tracker) Processes() []evidence.Process {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]evidence.Process, 0, len(t.procs))
	for _, p := range t.procs {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out
}
