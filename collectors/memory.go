package collectors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/procfs"
)

func init() {
	Register(Info{Name: "memory", Description: "host memory (/proc/meminfo), the tree's RSS and the child's memory cgroup sampled during the run, with the cgroup's OOM kills, as memory.json", Default: true},
		func() Collector { return &memoryCollector{} })
}

const (
	// memMaxSamples bounds the timeline: the first sample plus the most
	// recent ones (an hour at the default 1 s period).
	memMaxSamples = 3600
	// memUnlimited: cgroup v1 prints PAGE_COUNTER_MAX rounded to pages
	// (9223372036854771712) for "no limit"; anything this big is no limit.
	memUnlimited = uint64(1) << 62
)

// memKeys are the /proc/meminfo fields kept: enough to tell a host OOM
// (MemAvailable near 0, SwapFree 0) from overcommit (Committed_AS over
// CommitLimit) and from page cache pressure.
var memKeys = []string{"MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "Shmem", "AnonPages",
	"SwapTotal", "SwapFree", "CommitLimit", "Committed_AS"}

// MemSample is one moment of the host and the run.
type MemSample struct {
	Time             time.Time         `json:"time"`
	Meminfo          map[string]uint64 `json:"meminfo"` // bytes
	TreeRSSBytes     uint64            `json:"tree_rss_bytes"`
	TreeProcs        int               `json:"tree_procs"`
	CgroupUsageBytes *uint64           `json:"cgroup_usage_bytes,omitempty"`
}

// CgroupMem is the child's memory cgroup at one moment. Pointers are null
// where the file is absent in this cgroup version or unreadable.
type CgroupMem struct {
	Time          time.Time         `json:"time"`
	UsageBytes    *uint64           `json:"usage_bytes"`               // v1 memory.usage_in_bytes, v2 memory.current
	LimitBytes    *uint64           `json:"limit_bytes"`               // null: no limit
	MaxUsageBytes *uint64           `json:"max_usage_bytes,omitempty"` // v1 memory.max_usage_in_bytes, v2 memory.peak
	Failcnt       *uint64           `json:"failcnt,omitempty"`         // v1 only
	OOMKill       *uint64           `json:"oom_kill"`                  // v1 oom_control, v2 memory.events
	OOM           *uint64           `json:"oom,omitempty"`             // v2 memory.events
	UnderOOM      *bool             `json:"under_oom,omitempty"`       // v1 oom_control
	Events        map[string]uint64 `json:"events,omitempty"`          // v2 memory.events as read
	Errors        []string          `json:"errors,omitempty"`
}

// CgroupInfo is the child's memory cgroup over the run.
type CgroupInfo struct {
	Version int    `json:"version"`
	Path    string `json:"path"` // as /proc/<pid>/cgroup names it
	Dir     string `json:"dir"`  // where it was read
	// EffectiveLimitBytes is the smallest limit on the way to the root: a
	// pod or Slurm job limit usually sits above the child's own cgroup.
	EffectiveLimitBytes *uint64    `json:"effective_limit_bytes,omitempty"`
	EffectiveLimitPath  string     `json:"effective_limit_path,omitempty"`
	Start               *CgroupMem `json:"start"`
	End                 *CgroupMem `json:"end"`
	OOMKillDelta        *uint64    `json:"oom_kill_delta"`
	OOMDelta            *uint64    `json:"oom_delta,omitempty"`
	FailcntDelta        *uint64    `json:"failcnt_delta,omitempty"`
	Moves               []string   `json:"moves,omitempty"` // the child changed cgroup during the run
}

// memoryFile is memory.json.
type memoryFile struct {
	IntervalMS     int64       `json:"interval_ms"`
	Samples        []MemSample `json:"samples"`
	SamplesDropped int         `json:"samples_dropped,omitempty"`
	Snapshot       *MemSample  `json:"snapshot"`
	Cgroup         *CgroupInfo `json:"cgroup"`
	Errors         []string    `json:"errors,omitempty"`
}

type memoryCollector struct {
	mu      sync.Mutex
	first   *MemSample
	ring    []MemSample
	dropped int
	cg      *memCgroup
	start   *CgroupMem
	// rootStarted identifies the child behind RootPid; rootGone stops
	// following it once it has exited.
	rootStarted string
	rootGone    bool
	moves       []string
	errs        []string
	buf         []byte
}

// memCgroup is where the child's memory cgroup lives.
type memCgroup struct {
	version int
	path    string
	dir     string
}

// Watch samples every SampleInterval until ctx is done. The cgroup is
// resolved while the child lives: once it has exited, /proc/<pid>/cgroup
// is gone and only the path remembered here leads to its counters.
func (c *memoryCollector) Watch(ctx context.Context, env *Env) {
	iv := env.SampleInterval
	if iv <= 0 {
		iv = time.Second
	}
	tick := time.NewTicker(iv)
	defer tick.Stop()
	for {
		c.watchOnce(env)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// watchOnce takes one sample. Files are read without the lock (only the
// watching goroutine writes cg, start and buf), so a read that blocks
// cannot stall Collect.
func (c *memoryCollector) watchOnce(env *Env) {
	if env.RootPid > 0 && !c.rootGone {
		c.followRoot(env)
	}
	if c.buf == nil {
		c.buf = make([]byte, 8192)
	}
	s, err := memSample(env, c.cg, &c.buf)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.addErr(err.Error())
	}
	if c.first == nil {
		c.first = &s
		return
	}
	c.ring = append(c.ring, s)
	if len(c.ring) > memMaxSamples-1 {
		n := len(c.ring) - (memMaxSamples - 1)
		c.ring = append(c.ring[:0], c.ring[n:]...)
		c.dropped += n
	}
}

// followRoot resolves the child's memory cgroup, again at every sample
// while it lives, in case it is moved. Once the child is gone its pid may
// be reused by an unrelated process, so it is not looked at again.
func (c *memoryCollector) followRoot(env *Env) {
	pid := strconv.Itoa(env.RootPid)
	cg, err := memFindCgroup(env, pid)
	if err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.cg == nil {
			c.addErr(err.Error())
		} else {
			c.rootGone = true
		}
		return
	}
	if c.cg != nil && c.cg.dir == cg.dir {
		return
	}
	started, dead := memStartTime(env, pid)
	st := memReadCgroup(cg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cg != nil {
		if started != c.rootStarted {
			c.rootGone = true // a new process with the child's pid
			return
		}
		// An exited child not yet reaped (an OOM kill's victim, say) reads
		// as the root cgroup; that is not a move. The state is read after
		// the cgroup, so a living child was living when its cgroup was read.
		if dead {
			c.rootGone = true
			return
		}
		c.moves = append(c.moves, fmt.Sprintf("%s: %s -> %s", time.Now().UTC().Format(time.RFC3339), c.cg.path, cg.path))
	}
	c.cg, c.rootStarted, c.start = cg, started, &st
}

// memStartTime is a process's start time in clock ticks since boot (field
// 22 of /proc/<pid>/stat): with the pid, it names one process. dead is
// whether it has exited or is exiting (a zombie, gone, or PF_EXITING).
func memStartTime(env *Env, pid string) (started string, dead bool) {
	n, err := strconv.Atoi(pid)
	if err != nil {
		return "", true
	}
	st, err := env.ProcFS().Stat(n)
	if err != nil {
		return "", true
	}
	return strconv.FormatUint(st.StartTicks, 10), st.Exiting()
}

func (c *memoryCollector) addErr(e string) {
	for _, x := range c.errs {
		if x == e {
			return
		}
	}
	if len(c.errs) < 32 {
		c.errs = append(c.errs, e)
	}
}

// memSample reads meminfo, the tree's RSS and the cgroup's usage.
func memSample(env *Env, cg *memCgroup, buf *[]byte) (MemSample, error) {
	s := MemSample{Time: time.Now().UTC()}
	mi, err := memReadMeminfo(env.Proc("meminfo"), buf)
	s.Meminfo = mi
	s.TreeRSSBytes, s.TreeProcs = memTreeRSS(env, *buf)
	if cg != nil {
		s.CgroupUsageBytes = memReadU64(filepath.Join(cg.dir, memUsageFile(cg.version)), *buf)
	}
	return s, err
}

func memUsageFile(version int) string {
	if version == 1 {
		return "memory.usage_in_bytes"
	}
	return "memory.current"
}

// memReadMeminfo reads the kept fields of /proc/meminfo, in bytes.
func memReadMeminfo(path string, buf *[]byte) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return map[string]uint64{}, err
	}
	defer f.Close()
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil || n == 0 {
			break
		}
	}
	*buf = b[:cap(b)]
	return memParseMeminfo(b), nil
}

// memParseMeminfo parses "MemTotal:       24680000 kB" lines.
func memParseMeminfo(b []byte) map[string]uint64 {
	m := make(map[string]uint64, len(memKeys))
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue
		}
		key := line[:colon]
		want := ""
		for _, k := range memKeys {
			if string(key) == k {
				want = k
				break
			}
		}
		if want == "" {
			continue
		}
		f := bytes.Fields(line[colon+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && string(f[1]) == "kB" {
			v *= 1024
		}
		m[want] = v
	}
	return m
}

// memTreeRSS sums the resident memory of the tree's live processes, read
// now from /proc/<pid>/statm (the tracker's RSS is as old as its last
// walk). Shared pages count once per process: the sum overstates, but it
// moves with what the OOM killer looks at.
func memTreeRSS(env *Env, buf []byte) (uint64, int) {
	var pids []int
	if env.Tree != nil {
		for _, p := range env.Tree.Processes() {
			if !p.Exited {
				pids = append(pids, int(p.Pid))
			}
		}
	}
	if len(pids) == 0 && env.RootPid > 0 {
		pids = []int{env.RootPid}
	}
	page := uint64(os.Getpagesize())
	var sum uint64
	n := 0
	for _, pid := range pids {
		b, err := gpuReadSmall(env.Proc(strconv.Itoa(pid), "statm"), buf)
		if err != nil {
			continue
		}
		f := bytes.Fields(b)
		if len(f) < 2 {
			continue
		}
		pages, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		sum += pages * page
		n++
	}
	return sum, n
}

// memFindCgroup reads /proc/<pid>/cgroup and finds the memory cgroup's
// directory: the v1 memory controller's hierarchy when there is one (hybrid
// hosts also list "0::/" for a v2 tree without the memory controller),
// else the v2 path under /sys/fs/cgroup or /sys/fs/cgroup/unified.
func memFindCgroup(env *Env, pid string) (*memCgroup, error) {
	b, err := os.ReadFile(env.Proc(pid, "cgroup"))
	if err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	v1, v2 := "", ""
	hasV2 := false
	for _, c := range procfs.ParseCgroups(b) {
		switch {
		case c.Unified():
			v2, hasV2 = c.Path, true
		case c.Has("memory"):
			v1 = c.Path
		}
	}
	if v1 != "" {
		for _, mount := range []string{"memory", "memory,cpuset", "cpu,memory"} {
			dir := env.Sys("fs", "cgroup", mount, v1)
			if memIsDir(dir) {
				return &memCgroup{version: 1, path: v1, dir: dir}, nil
			}
		}
		return nil, fmt.Errorf("memory cgroup %s (v1): not found under %s", v1, env.Sys("fs", "cgroup", "memory"))
	}
	if hasV2 {
		for _, base := range []string{env.Sys("fs", "cgroup"), env.Sys("fs", "cgroup", "unified")} {
			dir := filepath.Join(base, v2)
			if _, err := os.Stat(filepath.Join(dir, "memory.current")); err == nil {
				return &memCgroup{version: 2, path: v2, dir: dir}, nil
			}
		}
		return nil, fmt.Errorf("memory cgroup %s (v2): no memory.current under %s (memory controller not enabled)", v2, env.Sys("fs", "cgroup"))
	}
	return nil, fmt.Errorf("memory cgroup: no memory controller in %s", env.Proc(pid, "cgroup"))
}

func memIsDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func memReadU64(path string, buf []byte) *uint64 {
	b, err := gpuReadSmall(path, buf)
	if err != nil {
		return nil
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil
	}
	return &v
}

// memReadKV reads "key value" lines (v1 oom_control, v2 memory.events).
func memReadKV(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return memParseKV(b), nil
}

// memParseKV parses "key value" lines, passing over anything else (the
// corpus' copies carry a shell prompt and the author's own notes).
func memParseKV(b []byte) map[string]uint64 {
	m := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			m[f[0]] = v
		}
	}
	return m
}

// memReadCgroup reads the cgroup's counters now.
func memReadCgroup(cg *memCgroup) CgroupMem {
	s := CgroupMem{Time: time.Now().UTC()}
	buf := make([]byte, 256)
	limit := func(p string) *uint64 {
		v := memReadU64(p, buf)
		if v != nil && *v >= memUnlimited {
			return nil
		}
		return v
	}
	get := func(name string) *uint64 {
		v := memReadU64(filepath.Join(cg.dir, name), buf)
		if v == nil {
			if _, err := os.Stat(filepath.Join(cg.dir, name)); err != nil {
				s.Errors = append(s.Errors, err.Error())
			}
		}
		return v
	}
	if cg.version == 1 {
		s.UsageBytes = get("memory.usage_in_bytes")
		s.LimitBytes = limit(filepath.Join(cg.dir, "memory.limit_in_bytes"))
		s.MaxUsageBytes = get("memory.max_usage_in_bytes")
		s.Failcnt = get("memory.failcnt")
		kv, err := memReadKV(filepath.Join(cg.dir, "memory.oom_control"))
		if err != nil {
			s.Errors = append(s.Errors, err.Error())
		}
		if v, ok := kv["oom_kill"]; ok {
			s.OOMKill = gpuU64(v)
		}
		if v, ok := kv["under_oom"]; ok {
			b := v != 0
			s.UnderOOM = &b
		}
		return s
	}
	s.UsageBytes = get("memory.current")
	s.LimitBytes = limit(filepath.Join(cg.dir, "memory.max"))
	s.MaxUsageBytes = memReadU64(filepath.Join(cg.dir, "memory.peak"), buf) // since 5.19
	kv, err := memReadKV(filepath.Join(cg.dir, "memory.events"))
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
	} else {
		s.Events = kv
		if v, ok := kv["oom_kill"]; ok {
			s.OOMKill = gpuU64(v)
		}
		if v, ok := kv["oom"]; ok {
			s.OOM = gpuU64(v)
		}
	}
	return s
}

// memEffectiveLimit walks from the cgroup up to the hierarchy's root and
// returns the smallest limit and where it is set.
func memEffectiveLimit(cg *memCgroup) (*uint64, string) {
	file := "memory.max"
	if cg.version == 1 {
		file = "memory.limit_in_bytes"
	}
	var best *uint64
	where := ""
	buf := make([]byte, 64)
	dir, path := cg.dir, cg.path
	for i := 0; i < 64; i++ {
		if v := memReadU64(filepath.Join(dir, file), buf); v != nil && *v < memUnlimited && (best == nil || *v < *best) {
			best, where = v, path
		}
		if path == "/" || path == "" || path == "." {
			break
		}
		dir, path = filepath.Dir(dir), filepath.Dir(path)
	}
	return best, where
}

func memDelta(a, b *uint64) *uint64 {
	if a == nil || b == nil || *b < *a {
		return nil
	}
	return gpuU64(*b - *a)
}

// Collect reads everything once more, compares the cgroup with its state at
// the first sample and writes memory.json.
func (c *memoryCollector) Collect(ctx context.Context, env *Env, out *Output) error {
	c.mu.Lock()
	cg, start := c.cg, c.start
	moves := append([]string(nil), c.moves...)
	c.mu.Unlock()
	var notes []string
	buf := make([]byte, 8192)
	snap, err := memSample(env, cg, &buf)
	if err != nil {
		notes = append(notes, err.Error())
	}
	if cg == nil {
		// No sample saw the child (kcrash collect, or it died before the
		// first one). Its cgroup is usually kcrash's own, still worth
		// reporting, without a delta.
		pid := "self"
		if env.RootPid > 0 {
			pid = strconv.Itoa(env.RootPid)
		}
		if found, err := memFindCgroup(env, pid); err == nil {
			cg = found
		} else if pid != "self" {
			if found, err2 := memFindCgroup(env, "self"); err2 == nil {
				cg = found
				notes = append(notes, err.Error()+"; reporting kcrash's own cgroup instead")
			}
		}
	}
	var info *CgroupInfo
	if cg != nil {
		end := memReadCgroup(cg)
		info = &CgroupInfo{Version: cg.version, Path: cg.path, Dir: cg.dir, Start: start, End: &end, Moves: moves}
		info.EffectiveLimitBytes, info.EffectiveLimitPath = memEffectiveLimit(cg)
		if start != nil {
			info.OOMKillDelta = memDelta(start.OOMKill, end.OOMKill)
			info.OOMDelta = memDelta(start.OOM, end.OOM)
			info.FailcntDelta = memDelta(start.Failcnt, end.Failcnt)
			if info.OOMKillDelta != nil && *info.OOMKillDelta > 0 {
				env.AddFinding(memOOMFinding(info))
			}
		}
	}

	iv := env.SampleInterval
	if iv <= 0 {
		iv = time.Second
	}
	f := memoryFile{IntervalMS: iv.Milliseconds(), Snapshot: &snap, Samples: []MemSample{}, Cgroup: info}
	c.mu.Lock()
	for _, n := range notes {
		c.addErr(n)
	}
	if c.first != nil {
		f.Samples = append(f.Samples, *c.first)
	}
	f.Samples = append(f.Samples, c.ring...)
	f.SamplesDropped = c.dropped
	f.Errors = append([]string(nil), c.errs...)
	c.mu.Unlock()
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return out.WriteFile("memory.json", append(b, '\n'))
}

func memOOMFinding(info *CgroupInfo) evidence.Finding {
	text := fmt.Sprintf("cgroup %s: oom_kill %d → %d during the run", info.Path, *info.Start.OOMKill, *info.End.OOMKill)
	d := map[string]any{"cgroup": info.Path, "cgroup_version": info.Version, "dir": info.Dir,
		"oom_kill_start": *info.Start.OOMKill, "oom_kill_end": *info.End.OOMKill}
	if info.End.LimitBytes != nil {
		d["limit_bytes"] = *info.End.LimitBytes
		text += fmt.Sprintf(" (limit %d MiB)", *info.End.LimitBytes>>20)
	} else if info.EffectiveLimitBytes != nil {
		d["limit_bytes"] = *info.EffectiveLimitBytes
		d["limit_cgroup"] = info.EffectiveLimitPath
		text += fmt.Sprintf(" (limit %d MiB at %s)", *info.EffectiveLimitBytes>>20, info.EffectiveLimitPath)
	}
	if info.End.MaxUsageBytes != nil {
		d["max_usage_bytes"] = *info.End.MaxUsageBytes
	}
	if info.FailcntDelta != nil {
		d["failcnt_delta"] = *info.FailcntDelta
	}
	t := info.End.Time
	return evidence.Finding{Kind: evidence.HostOOM, Source: evidence.SourceCgroup, Text: text, Time: &t,
		Attribution: "cgroup-of-child", Details: d}
}

// Available: /proc/meminfo, and which cgroup hierarchy the child's memory
// cgroup will be read from.
func (c *memoryCollector) Available(env *Env) (Availability, string) {
	cg := "unknown"
	var st unix.Statfs_t
	if err := unix.Statfs(env.Sys("fs", "cgroup"), &st); err == nil {
		switch st.Type {
		case unix.CGROUP2_SUPER_MAGIC:
			cg = "v2 (unified)"
		case unix.TMPFS_MAGIC:
			cg = "v1"
			if _, err := os.Stat(env.Sys("fs", "cgroup", "memory", "memory.usage_in_bytes")); err != nil {
				cg = "v1 without the memory controller"
			}
			if _, err := os.Stat(env.Sys("fs", "cgroup", "unified")); err == nil {
				cg += " (hybrid: v2 also at /sys/fs/cgroup/unified)"
			}
		}
	}
	if _, err := os.Stat(env.Proc("meminfo")); err != nil {
		return Unavailable, "no " + env.ProcRoot + "/meminfo"
	}
	return Works, "/proc/meminfo readable; cgroup " + cg
}
