// Package gpusampler runs the GPU collector's readers once per node for the
// node agent: one ticker, the smi tools under the collectors' deadlines, and
// a ring of samples bounded by age and by count. Each process row keeps the
// uid that owned the process when it was seen, so that a client is given
// only its own processes and the GPUs they used.
package gpusampler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/collectors"
)

// Defaults of Config.
const (
	DefaultInterval = 2 * time.Second
	DefaultKeep     = time.Hour
)

// Config sets a Sampler up. Zero fields take the defaults.
type Config struct {
	Interval time.Duration // between samples; DefaultInterval
	Keep     time.Duration // samples older than this are dropped; DefaultKeep
	// MaxSamples caps the ring whatever the age; default Keep/Interval+1,
	// so a shorter interval than planned cannot grow the agent's memory.
	MaxSamples int
	// Env gives the roots (/proc, /sys) and remembers tools that hung; nil:
	// collectors.NewEnv().
	Env *collectors.Env
}

// Sampler is the node's one GPU sampler. Run fills it; Window and Stats read
// it from any goroutine.
type Sampler struct {
	cfg Config
	env *collectors.Env
	gpu *collectors.GPUSampler

	mu      sync.Mutex
	ring    []tick // oldest first
	sources []string
	last    time.Time
	intern  map[string]string
}

// tick is one sample with the process rows it saw.
type tick struct {
	s     collectors.GPUSample
	procs []row
}

// row is a process on a GPU, with its owner when the sample was taken
// (-1: gone before it could be looked at).
type row struct {
	p   collectors.GPUProcess
	uid int
}

// New returns a Sampler; nothing runs until Run.
func New(cfg Config) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.MaxSamples <= 0 {
		cfg.MaxSamples = int(cfg.Keep/cfg.Interval) + 1
	}
	env := cfg.Env
	if env == nil {
		env = collectors.NewEnv()
	}
	return &Sampler{cfg: cfg, env: env, gpu: collectors.NewGPUSampler(), intern: map[string]string{}}
}

// Run samples at once and then every Interval until ctx is done. A sample
// that outlasts the interval (a slow tool) delays the next one rather than
// piling calls up.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.sampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) sampleOnce(ctx context.Context) {
	smp, procs := s.gpu.Sample(ctx, s.env)
	if ctx.Err() != nil {
		return // cut short: not a sample of the GPUs
	}
	rows := make([]row, 0, len(procs))
	for _, p := range procs {
		rows = append(rows, row{p: p, uid: s.owner(p.Pid)})
	}
	sources := s.gpu.Sources(s.env)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.compact(&smp, rows)
	s.sources = sources
	s.last = smp.Time
	s.ring = append(s.ring, tick{s: smp, procs: rows})
	drop := 0
	oldest := smp.Time.Add(-s.cfg.Keep)
	for drop < len(s.ring) && (len(s.ring)-drop > s.cfg.MaxSamples || s.ring[drop].s.Time.Before(oldest)) {
		drop++
	}
	if drop > 0 {
		n := copy(s.ring, s.ring[drop:])
		clear(s.ring[n:])
		s.ring = s.ring[:n]
	}
}

// owner is the uid owning /proc/<pid> now.
func (s *Sampler) owner(pid int) int {
	fi, err := os.Stat(filepath.Join(s.env.ProcRoot, strconv.Itoa(pid)))
	if err != nil {
		return -1
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1
	}
	return int(st.Uid)
}

// compact makes a sample's repeated strings (names, bus ids, sources) share
// one copy: parsed strings point into the tool's whole output, which an hour
// of samples would otherwise keep 1800 times.
func (s *Sampler) compact(smp *collectors.GPUSample, rows []row) {
	if len(s.intern) > 4096 {
		clear(s.intern)
	}
	in := func(v string) string {
		if v == "" {
			return ""
		}
		if w, ok := s.intern[v]; ok {
			return w
		}
		w := strings.Clone(v)
		s.intern[w] = w
		return w
	}
	for i := range smp.GPUs {
		g := &smp.GPUs[i]
		g.BusID, g.Name, g.Vendor, g.Card, g.MIG, g.Source = in(g.BusID), in(g.Name), in(g.Vendor), in(g.Card), in(g.MIG), in(g.Source)
	}
	for i := range rows {
		p := &rows[i].p
		p.Name, p.GPU, p.Source = in(p.Name), in(p.GPU), in(p.Source)
	}
}

// Stats describes the sampler for the agent's Info and metrics.
func (s *Sampler) Stats() api.GPUStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return api.GPUStats{Tools: append([]string{}, s.sources...), Interval: api.Duration(s.cfg.Interval), LastSample: s.last, Samples: len(s.ring)}
}

// Window answers a client's GPU query: the samples taken in [since, until]
// (zero until: up to now), reduced to the GPUs on which a process allowed by
// allow was seen in the window, and to the allowed processes, merged over
// the window. Withheld counts the distinct GPUs and process rows left out.
// allow is given a row's pid and the uid that owned it when sampled (-1
// unknown); a nil allow leaves nothing out (root).
func (s *Sampler) Window(since, until time.Time, allow func(pid, uid int) bool) api.GPUResponse {
	if until.IsZero() {
		until = time.Now()
	}
	s.mu.Lock()
	var ticks []tick
	for _, t := range s.ring {
		if !t.s.Time.Before(since) && !t.s.Time.After(until) {
			ticks = append(ticks, t) // ticks are never changed once in the ring
		}
	}
	resp := api.GPUResponse{IntervalMS: s.cfg.Interval.Milliseconds(), Tools: append([]string{}, s.sources...),
		Samples: make([]api.GPUSample, 0, len(ticks)), Processes: []api.GPUProcess{}}
	s.mu.Unlock()
	for _, e := range s.gpu.Errors() {
		resp.Errors = append(resp.Errors, toolError(e))
	}

	used := map[string]bool{} // GPUs an allowed process was seen on
	merged := map[string]int{}
	withheldProcs := map[string]bool{}
	for _, t := range ticks {
		for _, r := range t.procs {
			key := fmt.Sprintf("%d/%s/%s", r.p.Pid, r.p.GPU, r.p.Source)
			if allow != nil && !allow(r.p.Pid, r.uid) {
				withheldProcs[key] = true
				continue
			}
			used[r.p.GPU] = true
			i, ok := merged[key]
			if !ok {
				merged[key] = len(resp.Processes)
				resp.Processes = append(resp.Processes, api.GPUProcess{Pid: r.p.Pid, GPU: r.p.GPU, Source: r.p.Source, FirstSeen: r.p.FirstSeen})
				i = len(resp.Processes) - 1
			}
			p := &resp.Processes[i]
			if r.p.Name != "" {
				p.Name = r.p.Name
			}
			p.LastSeen = r.p.LastSeen
			p.UsedBytes = r.p.UsedBytes
			if u := r.p.UsedBytes; u != nil && (p.MaxUsedBytes == nil || *u > *p.MaxUsedBytes) {
				v := *u
				p.MaxUsedBytes = &v
			}
		}
	}
	sort.Slice(resp.Processes, func(i, j int) bool {
		a, b := resp.Processes[i], resp.Processes[j]
		if a.Pid != b.Pid {
			return a.Pid < b.Pid
		}
		return a.GPU+a.Source < b.GPU+b.Source
	})
	withheldGPUs := map[string]bool{}
	for _, t := range ticks {
		out := api.GPUSample{Time: t.s.Time, GPUs: []api.GPUMem{}}
		for _, g := range t.s.GPUs {
			key := g.BusID
			if key == "" {
				key = strconv.Itoa(g.Index) // how a tool without bus ids names the GPU of a process
			}
			if allow != nil && !used[key] {
				withheldGPUs[g.Source+"/"+key] = true
				continue
			}
			out.GPUs = append(out.GPUs, api.GPUMem{Index: g.Index, BusID: g.BusID, Name: g.Name, Vendor: g.Vendor,
				UsedBytes: g.UsedBytes, TotalBytes: g.TotalBytes, UsedPercent: g.UsedPercent, Card: g.Card, MIG: g.MIG, Source: g.Source})
		}
		resp.Samples = append(resp.Samples, out)
	}
	resp.Withheld = len(withheldProcs) + len(withheldGPUs)
	return resp
}

func toolError(e collectors.GPUToolError) string {
	s := e.Tool
	if len(e.Args) > 0 {
		s += " " + strings.Join(e.Args, " ")
	}
	s += ": " + e.Error
	if e.Count > 1 {
		s += fmt.Sprintf(" (%d times, last %s)", e.Count, e.LastTime.Format(time.RFC3339))
	}
	return s
}
