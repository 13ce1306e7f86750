package software

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kcrash/kcrash/internal/procfs"
	"github.com/kcrash/kcrash/internal/readas"
)

// Sampler follows the processes of a tree while they live: each new process's
// executable, variables and mappings are read once, its mappings again on a
// backing-off schedule (a server imports torch and its extensions minutes
// after it started) and at once after an exec. Libraries are de-duplicated
// across processes by device and inode, and each file is stat'ed and its
// build id read once.
type Sampler struct {
	roots Roots
	// Budget bounds the work of one Observe; the processes left are read next time.
	Budget time.Duration
	// MaxLibraries bounds the distinct files kept.
	MaxLibraries int
	// ReadAs is whose rights read the files of a process whose own user
	// /proc does not say (nil: when kcrash is root, nobody's). A process's
	// files (the libraries it maps, its Python path) are read with its
	// user's rights (readas.Do): root never reads for a job what the job's
	// user could not.
	ReadAs *readas.Identity

	mu      sync.Mutex
	procs   map[procKey]*procState
	retired []*procState // records of programs a process exec'd away from
	libs    map[libKey]*Library
	libCut  bool
	btime   int64
	clkTck  int64
	now     func() time.Time
	statBuf []byte
	// userNames caches uid to name for identityOf.
	userNames map[int]string
}

type procKey struct {
	pid   int
	start uint64 // clock ticks after boot: a reused pid is another process
}

type libKey struct {
	dev   string
	inode uint64
	path  string
}

type procState struct {
	pid        int
	start      time.Time
	name, exe  string
	argv0, cwd string
	environ    map[string]string
	python     bool
	pyVersion  string
	libs       map[libKey]bool
	reads      int
	lastRead   time.Time
	next       time.Time
	backoff    time.Duration
	vsize      uint64 // at the last read of the maps
	gone       bool
	as         *readas.Identity // whose rights read its files
}

const (
	// A new process is read at once, then after 100 ms, 200 ms... (a
	// program that dies within a second of importing its extensions is
	// still seen); after new libraries appear, again within 250 ms;
	// at most every 30 s when nothing changes.
	firstBackoff = 100 * time.Millisecond
	afterNew     = 250 * time.Millisecond
	maxBackoff   = 30 * time.Second
	// A process whose size moved since its last read (a library mapped,
	// or only memory allocated) is read again within changeGap, however
	// long its quiet backoff has grown: a late dlopen is seen while the
	// process lives, and a busy allocator costs one read a second.
	changeGap = time.Second
)

// NewSampler returns a Sampler reading under roots.
func NewSampler(roots Roots) *Sampler {
	s := &Sampler{roots: roots, Budget: 250 * time.Millisecond, MaxLibraries: 8000,
		procs: map[procKey]*procState{}, libs: map[libKey]*Library{}, clkTck: 100, now: time.Now,
		statBuf: make([]byte, 2048), userNames: map[int]string{}}
	if bt, err := s.fs().BootTime(); err == nil {
		s.btime = bt.Unix()
	}
	return s
}

// Observe reads the processes of pids that are due. force re-reads every
// live one now (collection time).
func (s *Sampler) Observe(ctx context.Context, pids []int, force bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	begin := s.now()
	live := map[procKey]bool{}
	for _, pid := range pids {
		if ctx.Err() != nil || (!force && s.now().Sub(begin) > s.Budget) {
			return
		}
		start, comm, vsize, ok := s.readStat(pid)
		if !ok {
			continue
		}
		k := procKey{pid, start}
		live[k] = true
		p := s.procs[k]
		if p != nil && (comm != p.name || vsize != p.vsize) {
			// A new name or new mappings: an exec (a new program, new
			// mappings: the old record is kept as it was; a launcher may
			// have the name of what it execs) or only a new title
			// (setproctitle), a dlopen or an allocation.
			exe, err := os.Readlink(s.proc(pid, "exe"))
			if err == nil && strings.TrimSuffix(exe, " (deleted)") != p.exe {
				p.gone = true
				s.retired = append(s.retired, p)
				p = nil
			} else {
				p.name = comm
			}
		}
		if p == nil {
			p = s.newProc(pid, start, comm)
			s.procs[k] = p
		}
		now := s.now()
		read := false
		switch {
		case force, p.reads == 0:
			read = true
		case vsize != p.vsize:
			read = now.Sub(p.lastRead) >= min(p.backoff, changeGap)
		case now.Before(p.next):
		default:
			// nothing mapped or unmapped since the last read: skip it
			p.backoff = min(2*p.backoff, maxBackoff)
			p.next = now.Add(p.backoff)
		}
		if read {
			s.readMaps(p)
			p.vsize = vsize
		}
	}
	if force {
		for k, p := range s.procs {
			if !live[k] {
				p.gone = true
			}
		}
		s.recheck()
	}
}

// recheck looks again at the files of every library seen: one replaced by
// a rename (its mapping not yet re-read) or written in place since. Each is
// looked at with the rights of the process that first mapped it.
func (s *Sampler) recheck() {
	byUser := map[string][]*Library{}
	as := map[string]*readas.Identity{}
	for _, l := range s.libs {
		if !l.Deleted {
			k := identityKey(l.as)
			byUser[k] = append(byUser[k], l)
			as[k] = l.as
		}
	}
	for k, libs := range byUser {
		readas.Do(as[k], func() error {
			for _, l := range libs {
				if s.nameHoldsOther(l) {
					l.Replaced = true
					continue
				}
				st, err := os.Stat(s.roots.Path(l.Path))
				if err == nil && !l.MTime.IsZero() && st.ModTime().After(l.MTime) {
					l.MTime = st.ModTime().UTC()
					l.ModifiedAfterStart = true
				}
			}
			return nil
		})
	}
}

func identityKey(id *readas.Identity) string {
	if id == nil {
		return ""
	}
	return fmt.Sprint(id.UID, id.GID, id.Groups)
}

// identityOf is whose rights read a process's files: its filesystem uid,
// gid and groups (/proc/PID/status), else ReadAs, else (root) nobody's.
func (s *Sampler) identityOf(pid int) *readas.Identity {
	st, err := s.fs().Status(pid)
	if err == nil && len(st.Uid) == 4 && len(st.Gid) == 4 && st.HasGroups {
		id := &readas.Identity{UID: st.Uid[3], GID: st.Gid[3], Groups: append([]int{st.Gid[3]}, st.Groups...)}
		name, ok := s.userNames[id.UID]
		if !ok {
			if u, err := user.LookupId(strconv.Itoa(id.UID)); err == nil {
				name = u.Username
			}
			s.userNames[id.UID] = name
		}
		id.Name = name
		return id
	}
	if s.ReadAs != nil {
		return s.ReadAs
	}
	return readas.Nobody()
}

// nameHoldsOther says whether a library's path now names another file.
func (s *Sampler) nameHoldsOther(l *Library) bool {
	st, err := os.Stat(s.roots.Path(l.Path))
	return err == nil && inodeOf(st) != l.inode
}

func (s *Sampler) proc(pid int, f ...string) string {
	return filepath.Join(append([]string{s.roots.Proc, strconv.Itoa(pid)}, f...)...)
}

// readStat returns a process's start (clock ticks), comm and virtual size
// (which moves when a library is mapped).
func (s *Sampler) readStat(pid int) (uint64, string, uint64, bool) {
	st, err := s.fs().StatInto(pid, s.statBuf)
	if err != nil || st.State == 'Z' {
		return 0, "", 0, false
	}
	return st.StartTicks, st.Comm, st.VSize, true
}

func (s *Sampler) fs() procfs.FS { return procfs.FS{Root: s.roots.Proc} }

func (s *Sampler) newProc(pid int, start uint64, comm string) *procState {
	p := &procState{pid: pid, name: comm, libs: map[libKey]bool{}, backoff: firstBackoff, as: s.identityOf(pid)}
	if s.btime > 0 {
		p.start = time.Unix(s.btime, 0).Add(time.Duration(start) * time.Second / time.Duration(s.clkTck))
	}
	p.exe, _ = os.Readlink(s.proc(pid, "exe"))
	p.exe = strings.TrimSuffix(p.exe, " (deleted)")
	p.cwd, _ = os.Readlink(s.proc(pid, "cwd"))
	if b, err := readas.ReadHead(s.proc(pid, "cmdline"), maxHead, readas.Opts{}); err == nil {
		a0, _, _ := bytes.Cut(b, []byte{0})
		p.argv0 = string(a0)
	}
	p.environ = map[string]string{}
	if b, err := readas.ReadFile(s.proc(pid, "environ"), maxEnviron, readas.Opts{}); err == nil {
		for _, kv := range bytes.Split(b, []byte{0}) {
			k, v, ok := strings.Cut(string(kv), "=")
			switch k {
			case "HOME", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "PATH", "PYTHONHOME", "ROCM_PATH", "CUDA_HOME", "LD_LIBRARY_PATH", "LD_PRELOAD":
				if ok {
					p.environ[k] = v
				}
			}
		}
	}
	return p
}

func (s *Sampler) readMaps(p *procState) {
	f, err := readas.Open(s.proc(p.pid, "maps"), readas.Opts{})
	if err != nil {
		return
	}
	maps := ParseMaps(io.LimitReader(f, maxMaps))
	f.Close()
	now := s.now()
	p.reads++
	p.lastRead = now
	added := false
	var mapped []*Library // described through map_files: kcrash's own (root's) read of the kernel's handle
	// The files the maps name are the process's user's to read: stat and
	// build id with that user's rights (a switch of rights only when there
	// is a file to look at).
	look := false
	for _, m := range maps {
		if l := s.libs[libKey{m.Dev, m.Inode, m.Path}]; m.Exec() && (l == nil || m.Deleted && !l.Deleted) {
			look = true
			break
		}
	}
	record := func() error {
		for _, m := range maps {
			if !m.Exec() {
				continue
			}
			k := libKey{m.Dev, m.Inode, m.Path}
			l := s.libs[k]
			if l != nil && m.Deleted && !l.Deleted {
				l.Deleted = true // unlinked since it was first seen
				l.Replaced = l.Replaced || s.nameHoldsOther(l)
			}
			if p.libs[k] {
				continue
			}
			if l == nil {
				if len(s.libs) >= s.MaxLibraries {
					s.libCut = true
					continue
				}
				l = s.describe(p, m)
				if l.start != 0 || l.end != 0 {
					mapped = append(mapped, l)
				}
				s.libs[k] = l
			}
			p.libs[k] = true
			l.pids = append(l.pids, p.pid)
			added = true
		}
		return nil
	}
	if look {
		readas.Do(p.as, record)
	} else {
		record()
	}
	for _, l := range mapped {
		s.describeMapped(p, l)
	}
	if !p.python {
		p.python, p.pyVersion = PythonOf(p.exe, maps)
	} else if p.pyVersion == "" {
		_, p.pyVersion = PythonOf(p.exe, maps)
	}
	switch {
	case p.reads == 1:
		p.backoff = firstBackoff // it has just started: its imports are coming
	case added:
		p.backoff = afterNew
	default:
		p.backoff = min(2*p.backoff, maxBackoff)
	}
	p.next = now.Add(p.backoff)
}

// describe stats a newly seen mapped file and reads its build id, with the
// process's user's rights (readMaps runs it under readas.Do). A file
// deleted or replaced since it was mapped is left to describeMapped (its
// start and end set).
func (s *Sampler) describe(p *procState, m Mapping) *Library {
	l := &Library{Path: m.Path, Deleted: m.Deleted, dev: m.Dev, inode: m.Inode, as: p.as}
	host := s.roots.Path(m.Path)
	st, err := os.Stat(host)
	if err == nil && inodeOf(st) == m.Inode {
		l.Size, l.MTime = st.Size(), st.ModTime().UTC()
		// A file newer than the process is no sign by itself: JIT
		// builds (aiter, Triton) write and load modules during the run.
		// A change after it was first seen mapped is (recheck).
		l.BuildID = BuildID(host)
		return l
	}
	if err == nil {
		// the name now holds another file: replaced by a rebuild or
		// reinstall (the old one deleted) or in place
		l.Replaced = true
	}
	l.start, l.end = m.Start, m.End
	return l
}

// describeMapped reads a library whose path no longer holds the mapped file
// through /proc/PID/map_files, the kernel's handle on the very file mapped
// (root only: kcrash's own rights, not a path the process chose).
func (s *Sampler) describeMapped(p *procState, l *Library) {
	mf := s.proc(p.pid, "map_files", fmt.Sprintf("%x-%x", l.start, l.end))
	l.start, l.end = 0, 0
	if st, err := os.Stat(mf); err == nil {
		l.Size, l.MTime = st.Size(), st.ModTime().UTC()
		l.BuildID = buildID(mf, readas.Opts{Follow: true, MagicLinks: true})
	}
}

// Snapshot returns what was seen: processes, de-duplicated libraries, and
// per process the libraries it mapped.
func (s *Sampler) Snapshot() ([]Process, []Library, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var procs []Process
	index := map[libKey]int{}
	var libs []Library
	keys := make([]libKey, 0, len(s.libs))
	for k := range s.libs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].path != keys[j].path {
			return keys[i].path < keys[j].path
		}
		return keys[i].inode < keys[j].inode
	})
	for _, k := range keys {
		l := *s.libs[k]
		l.Pids = uniqInts(l.pids)
		if len(l.Pids) > maxPidsPerLib {
			l.PidCount, l.Pids = len(l.Pids), l.Pids[:maxPidsPerLib]
		}
		index[k] = len(libs)
		libs = append(libs, l)
	}
	all := append([]*procState(nil), s.retired...)
	for _, p := range s.procs {
		all = append(all, p)
	}
	for _, p := range all {
		pr := Process{Pid: p.pid, Name: p.name, Exe: p.exe, Python: p.python, PythonVersion: p.pyVersion,
			Reads: p.reads, Exited: p.gone, argv0: p.argv0, cwd: p.cwd, environ: p.environ, as: p.as}
		if !p.start.IsZero() {
			t := p.start.UTC()
			pr.Start = &t
		}
		if !p.lastRead.IsZero() {
			t := p.lastRead.UTC()
			pr.LastRead = &t
		}
		for k := range p.libs {
			if i, ok := index[k]; ok {
				pr.libIdx = append(pr.libIdx, i)
			}
		}
		sort.Ints(pr.libIdx)
		pr.Libraries = len(pr.libIdx)
		procs = append(procs, pr)
	}
	sort.Slice(procs, func(i, j int) bool {
		if procs[i].Pid != procs[j].Pid {
			return procs[i].Pid < procs[j].Pid
		}
		return procs[i].Exited && !procs[j].Exited
	})
	return procs, libs, s.libCut
}

const maxPidsPerLib = 64

func uniqInts(in []int) []int {
	out := append([]int(nil), in...)
	sort.Ints(out)
	j := 0
	for i, v := range out {
		if i == 0 || v != out[j-1] {
			out[j] = v
			j++
		}
	}
	return out[:j]
}
