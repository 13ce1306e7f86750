package access

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/internal/kmsg"
	"github.com/kcrash/kcrash/internal/procfs"
)

// ProcInfo is what the tracker knows of a process.
type ProcInfo struct {
	Pid, UID, GID, PPid int
	Start               uint64 // clock ticks after boot: with Pid, the process's identity
	Cgroup, Comm        string
	// Exited is when a scan first missed the process; zero while it lives.
	Exited time.Time
}

// Tracker remembers the processes of the node, so that a record naming a
// pid that exited before the record was read, or before a client asked,
// still has an owner. It scans procRoot at most every Interval: a readdir
// and a stat of each /proc/PID (owner, and the inode that changes when a
// pid is reused), reading stat, status and cgroup only for pids it has not
// seen. Exited processes are kept for Keep, at most Max entries in all,
// the longest-exited dropped first.
type Tracker struct {
	ProcRoot string        // "" is /proc
	Interval time.Duration // 0: 2 s
	Keep     time.Duration // 0: 1 h
	Max      int           // 0: 200,000

	mu       sync.Mutex
	procs    map[int]*tracked
	lastScan time.Time
	buf      []byte
	dirBuf   []byte
}

type tracked struct {
	ProcInfo
	id   dirID
	dino uint64    // the inode number readdir gave for its directory
	read time.Time // when ProcInfo was read from /proc
}

// dirID tells one /proc/PID directory from the next one of a reused pid
// without reading its files: procfs makes a new inode, with its own number
// and change time, for each process.
type dirID struct {
	ino   uint64
	ctime syscall.Timespec
}

func idOf(st *syscall.Stat_t) dirID { return dirID{ino: st.Ino, ctime: st.Ctim} }

const (
	// lookupFresh is how long a Lookup trusts what it read of a live
	// process: a process that moves itself into its job's cgroup is seen
	// there this soon after.
	lookupFresh     = time.Second
	defaultInterval = 2 * time.Second
	defaultKeep     = time.Hour
	defaultMax      = 200_000
)

func (t *Tracker) fs() procfs.FS { return procfs.FS{Root: t.ProcRoot} }

func (t *Tracker) interval() time.Duration {
	if t.Interval > 0 {
		return t.Interval
	}
	return defaultInterval
}

// Run scans every Interval until ctx ends, so that processes are recorded
// while they live.
// The scans fall on the grid of kmsg.UntilTick, as the ring reader's
// pauses in a flood do, so that both run in one wakeup of the process.
func (t *Tracker) Run(ctx context.Context) {
	tick := time.NewTimer(time.Hour)
	defer tick.Stop()
	for {
		// The last scan began a little after the last tick: a scan
		// within most of an interval (a query's Refresh) makes this one
		// needless, the last tick's does not.
		t.refresh(t.interval() * 3 / 4)
		tick.Reset(kmsg.UntilTick(time.Now(), t.interval()))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Refresh scans unless a scan ran within Interval.
func (t *Tracker) Refresh() { t.refresh(t.interval()) }

// refresh scans unless a scan ran within d.
func (t *Tracker) refresh(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.lastScan.IsZero() && time.Since(t.lastScan) < d {
		return
	}
	t.scanLocked(time.Now())
}

// Scan scans now.
func (t *Tracker) Scan() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scanLocked(time.Now())
}

func (t *Tracker) scanLocked(now time.Time) {
	t.lastScan = now
	if t.procs == nil {
		t.procs = map[int]*tracked{}
	}
	dirs, err := t.pidDirs()
	if err != nil {
		return
	}
	seen := make(map[int]struct{}, len(dirs))
	for _, d := range dirs {
		pid := d.pid
		old := t.procs[pid]
		// The directory's inode number, which readdir hands out with its
		// name, tells a known process from a new one of a reused pid: a
		// stat of every /proc/PID each scan was most of what the agent
		// cost while idle. Only processes read lately are looked at again,
		// for the uid a young process takes (setuid after fork).
		if old != nil && old.dino == d.ino && old.Exited.IsZero() && now.Sub(old.read) >= youngProcess {
			seen[pid] = struct{}{}
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(t.fs().Path(strconv.Itoa(pid)), &st) != nil {
			continue // exited between readdir and stat
		}
		seen[pid] = struct{}{}
		if old != nil && old.id == idOf(&st) && old.Exited.IsZero() {
			old.UID, old.GID = ownerUID(old.UID, int(st.Uid)), int(st.Gid)
			old.dino = d.ino
			continue
		}
		info, ok := t.readLocked(pid)
		if !ok {
			continue
		}
		t.procs[pid] = &tracked{ProcInfo: info, id: idOf(&st), dino: d.ino, read: now}
	}
	for pid, p := range t.procs {
		if _, ok := seen[pid]; !ok && p.Exited.IsZero() {
			p.Exited = now
		}
	}
	t.pruneLocked(now)
}

// youngProcess: a process read less than this long ago is stat'ed again
// at each scan, for the owner it may still change to.
const youngProcess = 10 * time.Second

type pidDir struct {
	pid int
	ino uint64
}

// pidDirs lists the process directories of procRoot with their inode
// numbers, from getdents64 itself: os.ReadDir would stat each one.
func (t *Tracker) pidDirs() ([]pidDir, error) {
	fd, err := unix.Open(t.fs().Path(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if t.dirBuf == nil {
		t.dirBuf = make([]byte, 32<<10)
	}
	var out []pidDir
	for {
		n, err := unix.Getdents(fd, t.dirBuf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for b := t.dirBuf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if pid, err := strconv.Atoi(string(name)); err == nil && pid > 0 {
				out = append(out, pidDir{pid: pid, ino: binary.NativeEndian.Uint64(b[:8])})
			}
			b = b[reclen:]
		}
	}
}

// ownerUID keeps a process's uid from its directory's owner, except that a
// process that made itself non-dumpable shows a root-owned directory: the
// uid read from its status when it was first seen stays.
func ownerUID(known, dirOwner int) int {
	if dirOwner == 0 && known != 0 {
		return known
	}
	return dirOwner
}

// readLocked reads a process's identity from /proc. The real uid from
// status is the owner: a setuid program run by a user stays that user's.
func (t *Tracker) readLocked(pid int) (ProcInfo, bool) {
	fs := t.fs()
	if t.buf == nil {
		t.buf = make([]byte, 4096)
	}
	st, err := fs.StatInto(pid, t.buf)
	if err != nil {
		return ProcInfo{}, false
	}
	status, err := fs.StatusInto(pid, t.buf)
	if err != nil || len(status.Uid) == 0 {
		return ProcInfo{}, false
	}
	info := ProcInfo{Pid: pid, UID: status.Uid[0], PPid: st.PPid, Start: st.StartTicks, Comm: st.Comm}
	if len(status.Gid) > 0 {
		info.GID = status.Gid[0]
	}
	switch {
	case st.Exiting():
		// An exiting process (PF_EXITING, then a zombie until reaped) has
		// left its cgroup: its /proc/PID/cgroup reads as the root of every
		// hierarchy. A crashed job's process is often read again in just
		// that state (the record of its fault arrives before its parent
		// reaps it), so what was read while it lived stays; first seen
		// dead, its cgroup is unknown.
		if old := t.procs[pid]; old != nil && old.Start == info.Start {
			info.Cgroup = old.Cgroup
		}
	default:
		if cgs, err := fs.CgroupsInto(pid, t.buf); err == nil {
			info.Cgroup = CgroupPath(cgs)
		}
	}
	return info, true
}

func (t *Tracker) pruneLocked(now time.Time) {
	keep := t.Keep
	if keep <= 0 {
		keep = defaultKeep
	}
	limit := t.Max
	if limit <= 0 {
		limit = defaultMax
	}
	var exited []*tracked
	for pid, p := range t.procs {
		if p.Exited.IsZero() {
			continue
		}
		if now.Sub(p.Exited) > keep {
			delete(t.procs, pid)
			continue
		}
		exited = append(exited, p)
	}
	if over := len(t.procs) - limit; over > 0 {
		slices.SortFunc(exited, func(a, b *tracked) int { return a.Exited.Compare(b.Exited) })
		for _, p := range exited[:min(over, len(exited))] {
			delete(t.procs, p.Pid)
		}
	}
}

// Lookup returns what is known of pid: read from /proc while it lives
// (and remembered), else from memory of when it lived.
func (t *Tracker) Lookup(pid int) (ProcInfo, bool) {
	if pid <= 0 {
		return ProcInfo{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.procs == nil {
		t.procs = map[int]*tracked{}
	}
	// A live read, unless the same process (its directory's inode and
	// change time) was read within lookupFresh: a flood of one process's
	// faults names its pid hundreds of times a second, and reading three
	// files of /proc for each was the agent's dearest per-record work.
	var st syscall.Stat_t
	if syscall.Stat(t.fs().Path(strconv.Itoa(pid)), &st) == nil {
		now := time.Now()
		if old := t.procs[pid]; old != nil && old.id == idOf(&st) && old.Exited.IsZero() && now.Sub(old.read) < lookupFresh {
			return old.ProcInfo, true
		}
		if info, ok := t.readLocked(pid); ok {
			t.procs[pid] = &tracked{ProcInfo: info, id: idOf(&st), dino: st.Ino, read: now}
			return info, true
		}
	}
	if old := t.procs[pid]; old != nil {
		if old.Exited.IsZero() {
			old.Exited = time.Now() // gone since the last scan
		}
		return old.ProcInfo, true
	}
	return ProcInfo{}, false
}

// remembered is Lookup from memory first: a query judges thousands of
// records, and the walk's start-time check catches a reused pid that
// memory has not caught up with. Only a pid memory lacks is read live.
func (t *Tracker) remembered(pid int) (ProcInfo, bool) {
	t.mu.Lock()
	p := t.procs[pid]
	t.mu.Unlock()
	if p != nil {
		return p.ProcInfo, true
	}
	return t.Lookup(pid)
}

// Started reports whether the process the tracker knows as pid started at
// start (clock ticks after boot): whether pid is still that process.
func (t *Tracker) Started(pid int, start uint64) bool {
	if info, ok := t.remembered(pid); ok && info.Start == start {
		return true
	}
	info, ok := t.Lookup(pid)
	return ok && info.Start == start
}

// maxDepth bounds a walk up the process tree; real trees are shallow.
const maxDepth = 256

// IsDescendant reports whether pid is ancestor itself or one of its
// descendants, by the parents the tracker recorded; pid itself must be
// one the tracker knows. A parent record that
// started after its child is a reused pid, not the parent: the walk stops.
func (t *Tracker) IsDescendant(pid, ancestor int) bool {
	if pid <= 0 || ancestor <= 0 {
		return false
	}
	// The pid a record names is taken from memory alone: Annotate looked
	// it up when the record arrived, so a pid memory lacks was gone by
	// then, and whatever holds that pid now is another process. (Reading
	// /proc for each such pid was most of what another user's hour of
	// records cost a query.) Its parents may be read live: an ancestor
	// still running may be younger than the tracker's last scan.
	t.mu.Lock()
	p := t.procs[pid]
	t.mu.Unlock()
	if p == nil {
		return false
	}
	cur, ok := p.ProcInfo, true
	for depth := 0; ok && depth < maxDepth; depth++ {
		if cur.Pid == ancestor {
			return true
		}
		if cur.PPid <= 0 {
			return false
		}
		parent, found := t.remembered(cur.PPid)
		if !found || parent.Start > cur.Start {
			return false
		}
		cur = parent
	}
	return false
}

// Len is how many processes the tracker holds, living and exited.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.procs)
}

// fdTargets returns where each open descriptor of pid points.
func fdTargets(procRoot string, pid int, fn func(target string)) {
	dir := procfs.FS{Root: procRoot}.Path(strconv.Itoa(pid), "fd")
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if target, err := os.Readlink(filepath.Join(dir, n)); err == nil {
			fn(target)
		}
	}
}
