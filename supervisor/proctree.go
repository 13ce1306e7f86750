package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/procfs"
)

// Tracker follows every descendant of a root process and remembers the ones
// that exited: the kernel names them later (an OOM-killed worker, a faulting
// scheduler process) and the bundle must be able to say they were ours.
type Tracker struct {
	root  int32
	fs    procfs.FS
	boot  time.Time // when the machine booted (btime), read once
	mu    sync.Mutex
	procs map[int32]*evidence.Process
	// keyed by pid+start so a reused pid is a new process
	starts map[int32]uint64
}

// NewTracker tracks root's tree.
func NewTracker(root int) *Tracker { return NewTrackerFS(root, procfs.FS{}) }

// NewTrackerFS tracks root's tree as the proc tree under fs shows it.
func NewTrackerFS(root int, fs procfs.FS) *Tracker {
	t := &Tracker{root: int32(root), fs: fs, procs: map[int32]*evidence.Process{}, starts: map[int32]uint64{}}
	t.boot, _ = fs.BootTime()
	return t
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
// process decides membership and gives a member's RSS; names and command
// lines are read only for a new member, or one whose comm changed (it
// exec'd), which keeps sampling cheap on a node with thousands of processes.
func (t *Tracker) Sample(ctx context.Context) {
	now := time.Now()
	stats, err := scanProc(t.fs)
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
		if !known {
			rec = &evidence.Process{Pid: pid, FirstSeen: now, StartTime: now}
			if !t.boot.IsZero() {
				rec.StartTime = t.boot.Add(procfs.Since(st.start)).Truncate(time.Millisecond)
			}
			rec.Name, rec.Cmdline = t.nameOf(pid)
			t.procs[pid] = rec
			t.starts[pid] = st.start
		}
		if known && st.comm != "" && st.comm != truncComm(rec.Name) {
			// the process exec'd (a forked shell became `sleep`): name it anew
			rec.Name, rec.Cmdline = t.nameOf(pid)
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

// nameOf is a process's comm and argv ("" and nil for what cannot be read).
func (t *Tracker) nameOf(pid int32) (string, []string) {
	name, _ := t.fs.Comm(int(pid))
	args, _ := t.fs.Args(int(pid))
	return name, args
}

// truncComm is a name as the kernel's 15-byte comm field holds it.
func truncComm(name string) string {
	if len(name) > 15 {
		return name[:15]
	}
	return name
}

// treeStat is what membership needs from /proc/PID/stat.
type treeStat struct {
	ppid, pgid, sid int32
	comm            string // changes on exec: the record's name and command line are then re-read
	start           uint64 // clock ticks after boot: with the pid, a process's identity
	rssPages        uint64
}

func scanProc(fs procfs.FS) (map[int32]treeStat, error) {
	pids, err := fs.Pids()
	if err != nil {
		return nil, err
	}
	out := make(map[int32]treeStat, len(pids))
	buf := make([]byte, 1024)
	for _, pid := range pids {
		st, err := fs.StatInto(pid, buf)
		if err != nil || st.State == 'Z' {
			continue // a zombie has exited; the exit event or the next sample says so
		}
		out[int32(pid)] = treeStat{comm: st.Comm, ppid: int32(st.PPid), pgid: int32(st.PGrp), sid: int32(st.Session),
			start: st.StartTicks, rssPages: st.RSSPages}
	}
	return out, nil
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
