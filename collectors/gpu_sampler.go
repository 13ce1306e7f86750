package collectors

import (
	"context"
	"sort"
	"time"
)

// GPUSampler is the GPU collector's per-tick reading for a sampler that
// outlives runs (the node agent's, one per node): the same cheap sources
// (amdgpu sysfs, KFD, nvidia-smi's two queries) under the same per-call
// deadlines and hang handling as Watch, with nothing accumulated between
// calls, so that the caller bounds its own history.
type GPUSampler struct {
	c         *gpuCollector
	lastRetry time.Time
}

// gpuSamplerRetry is how often a long-lived sampler asks again a tool that
// kept failing. A run stops asking for the rest of the run (and asks once
// more at collection); a node's sampler would otherwise never recover
// from a driver reload.
const gpuSamplerRetry = time.Minute

// NewGPUSampler returns a sampler using the tools in PATH.
func NewGPUSampler() *GPUSampler { return &GPUSampler{c: newGPUCollector()} }

// Sample reads every cheap source once: every GPU at this moment, and the
// process rows this tick saw (FirstSeen and LastSeen are the tick's time,
// MaxUsedBytes is unset). A tool that hangs is marked stuck in env and not
// asked again, as during a run.
func (s *GPUSampler) Sample(ctx context.Context, env *Env) (GPUSample, []GPUProcess) {
	if now := time.Now(); now.Sub(s.lastRetry) >= gpuSamplerRetry {
		s.lastRetry = now
		s.c.mu.Lock()
		s.c.fails = nil
		s.c.mu.Unlock()
	}
	smp := s.c.sample(ctx, env, false)
	s.c.mu.Lock()
	procs := make([]GPUProcess, 0, len(s.c.procs))
	for _, p := range s.c.procs {
		q := *p
		q.MaxUsedBytes = nil
		procs = append(procs, q)
	}
	s.c.procs = nil
	s.c.mu.Unlock()
	sort.Slice(procs, func(i, j int) bool {
		a, b := procs[i], procs[j]
		if a.Pid != b.Pid {
			return a.Pid < b.Pid
		}
		return a.GPU+a.Source < b.GPU+b.Source
	})
	return smp, procs
}

// GPUSourceSysfs names amdgpu's sysfs counters among the sources.
const GPUSourceSysfs = "amdgpu-sysfs"

// Sources lists what Sample reads on this host: the smi tools found in
// PATH, and GPUSourceSysfs when an amdgpu card is there. Empty: no GPU.
func (s *GPUSampler) Sources(env *Env) []string {
	var out []string
	for t := range s.c.tools() {
		out = append(out, t)
	}
	if s.c.amd.cardCount(env.SysRoot) > 0 {
		out = append(out, GPUSourceSysfs)
	}
	sort.Strings(out)
	return out
}

// Errors returns the tools' failures so far, repeats counted (bounded as
// in gpu.json).
func (s *GPUSampler) Errors() []GPUToolError {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return append([]GPUToolError(nil), s.c.errs...)
}
