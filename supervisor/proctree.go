package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/shirou/gopsutil/v4/process"
)

// Tracker follows every descendant of a root process and remembers the ones
// that exited: the kernel names them later (an OOM-killed worker, a faulting
// scheduler process) and the bundle must be able to say they were ours.
type Tracker struct {
	root  int32
	mu    sync.Mutex
	procs map[int32]*evidence.Process
	// keyed by pid+start so a reused pid is a new process
	starts map[int32]int64
}

// NewTracker tracks root's tree.
func NewTracker(root int) *Tracker {
	return &Tracker{root: int32(root), procs: map[int32]*evidence.Process{}, starts: map[int32]int64{}}
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
// (orphans reparented to init keep those).
func (t *Tracker) Sample(ctx context.Context) {
	now := time.Now()
	all, err := process.ProcessesWithContext(ctx)
	if err != nil {
		return
	}
	type info struct {
		p         *process.Process
		ppid, sid int32
		pgid      int32
	}
	infos := make(map[int32]info, len(all))
	for _, p := range all {
		ppid, err := p.PpidWithContext(ctx)
		if err != nil {
			continue
		}
		i := info{p: p, ppid: ppid}
		if t.root != 0 {
			if sid, err := getsid(p.Pid); err == nil {
				i.sid = sid
			}
			if pg, err := getpgid(p.Pid); err == nil {
				i.pgid = pg
			}
		}
		infos[p.Pid] = i
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	member := map[int32]bool{}
	if _, ok := infos[t.root]; ok {
		member[t.root] = true
	}
	for pid, i := range infos {
		if i.sid == t.root || i.pgid == t.root {
			member[pid] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for pid, i := range infos {
			if !member[pid] && member[i.ppid] {
				member[pid], changed = true, true
			}
		}
	}
	for pid := range member {
		i := infos[pid]
		ct, _ := i.p.CreateTimeWithContext(ctx)
		rec, known := t.procs[pid]
		if known && t.starts[pid] == -1 {
			t.starts[pid] = ct // seeded: this is the same process
		}
		if known && t.starts[pid] != ct {
			known = false // pid reused
		}
		if !known {
			rec = &evidence.Process{Pid: pid, FirstSeen: now, StartTime: time.UnixMilli(ct)}
			rec.Name, _ = i.p.NameWithContext(ctx)
			rec.Cmdline, _ = i.p.CmdlineSliceWithContext(ctx)
			t.procs[pid] = rec
			t.starts[pid] = ct
		}
		rec.PPid = i.ppid
		rec.LastSeen = now
		rec.Exited = false
		if mi, err := i.p.MemoryInfoWithContext(ctx); err == nil {
			rec.RSSBytes = mi.RSS
		}
	}
	for pid, rec := range t.procs {
		if !member[pid] {
			rec.Exited = true
		}
	}
}

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
	t.starts[t.root] = -1
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
