package collectors

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/software"
)

func init() {
	Register(Info{Name: "software", Description: "what was running: mapped native libraries (build ids), Python packages, driver and runtime versions; stale or mismatched builds (software.json)", Default: true},
		func() Collector { return &softwareCollector{} })
}

// softwareCollector samples the tree's mappings while it lives (the tree is
// gone at the end), and at collection reads the Python metadata and the
// driver and runtime versions, and flags build problems for triage.
type softwareCollector struct {
	once    sync.Once
	sampler *software.Sampler
	mu      sync.Mutex
	found   map[string]bool // findings already given to triage (a snapshot, then the final bundle)
}

func softwareRoots(env *Env) software.Roots {
	r := software.Roots{Proc: env.ProcRoot, Sys: env.SysRoot, FS: env.FSRoot}
	if r.FS == "" {
		r.FS = "/"
	}
	return r
}

func (c *softwareCollector) get(env *Env) *software.Sampler {
	c.once.Do(func() {
		c.sampler = software.NewSampler(softwareRoots(env))
		// A process's own user (its /proc status) reads its files; where
		// /proc does not say, the identity the run reads the job's files as.
		c.sampler.ReadAs = env.ReadAs
	})
	return c.sampler
}

// treePids are the live processes of the run, the root first.
func treePids(env *Env) []int {
	var procs []evidence.Process
	if env.Tree != nil {
		procs = env.Tree.Processes()
	}
	var pids []int
	rootGone := false
	for _, p := range procs {
		if p.Exited {
			// its pid may belong to another process by now
			rootGone = rootGone || int(p.Pid) == env.RootPid
			continue
		}
		if int(p.Pid) != env.RootPid {
			pids = append(pids, int(p.Pid))
		}
	}
	if env.RootPid > 0 && !rootGone {
		pids = append([]int{env.RootPid}, pids...)
	}
	return pids
}

// Watch reads the mappings of the tree's processes as they appear, and again
// on a backing-off schedule per process, until the run ends.
func (c *softwareCollector) Watch(ctx context.Context, env *Env) {
	s := c.get(env)
	// The tick is finer than the sample interval: each process is read on
	// its own schedule (the sampler's), young ones within 100 ms.
	period := min(env.SampleInterval, 100*time.Millisecond)
	if period <= 0 {
		period = 100 * time.Millisecond
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		s.Observe(ctx, treePids(env), false)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *softwareCollector) Collect(ctx context.Context, env *Env, out *Output) error {
	s := c.get(env)
	// Whatever still lives (a snapshot, a hang, orphans) is read once more;
	// the rest is marked gone.
	s.Observe(ctx, treePids(env), true)
	rep := software.Build(ctx, softwareRoots(env), s, software.DefaultLimits)
	if env.Tree == nil && env.RootPid == 0 {
		rep.Notes = append(rep.Notes, "no process tree (kcrash collect): the host's driver and runtime versions only")
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := out.WriteFile("software.json", append(b, '\n')); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.found == nil {
		c.found = map[string]bool{}
	}
	for _, f := range software.Findings(rep) {
		if !c.found[f.Text] {
			c.found[f.Text] = true
			env.AddFinding(f)
		}
	}
	return nil
}

// Available: the maps of the tree need nothing but /proc; the versions come
// from the driver's and the installs' files.
func (c *softwareCollector) Available(env *Env) (Availability, string) {
	r := softwareRoots(env)
	if _, err := os.ReadDir(env.ProcRoot); err != nil {
		return Unavailable, "cannot list " + env.ProcRoot + ": no mapped libraries or Python packages of the tree"
	}
	rt := software.ReadRuntime(r)
	var have []string
	if rt.NVIDIADriver != "" {
		have = append(have, "NVIDIA driver "+rt.NVIDIADriver)
	}
	if rt.ROCm != "" {
		have = append(have, "ROCm "+rt.ROCm)
	}
	if rt.AMDGPU != "" {
		have = append(have, "amdgpu "+rt.AMDGPU)
	}
	if len(have) == 0 {
		return Works, "mapped libraries and Python packages; no GPU driver or runtime version files found"
	}
	return Works, "mapped libraries and Python packages; " + strings.Join(have, ", ")
}
