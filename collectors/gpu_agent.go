package collectors

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/kcrash/kcrash/agent/api"
)

// agentGPU is the part of the agent's client the GPU collector uses. It is
// found on env.Agent by assertion so that this package depends on the
// method, not on which file of agent/api defines it.
type agentGPU interface {
	GPU(ctx context.Context, q api.GPUQuery) (api.GPUResponse, error)
}

// envAgentGPU is env.Agent when it can answer GPU queries, else nil.
func envAgentGPU(env *Env) agentGPU {
	if env.Agent == nil {
		return nil
	}
	a, _ := any(env.Agent).(agentGPU)
	return a
}

// gpuAgentProbe bounds the question asked at the start of a run: an agent
// that does not answer within it is not waited for, the run samples itself.
const gpuAgentProbe = 2 * time.Second

// SourceAgent is gpu.json's "source" when the node agent sampled.
const SourceAgent = "agent"

func (c *gpuCollector) agent(env *Env) agentGPU {
	if c.agentOf != nil {
		return c.agentOf(env)
	}
	return envAgentGPU(env)
}

// useAgent asks the agent once whether it samples GPUs. Yes: the run spawns
// no smi tool of its own and takes the agent's samples at collection. An
// agent with no GPU source (no tool, no amdgpu card where it runs) is no
// reason to go without: the run samples itself then.
func (c *gpuCollector) useAgent(ctx context.Context, env *Env) bool {
	a := c.agent(env)
	if a == nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, gpuAgentProbe)
	defer cancel()
	now := time.Now()
	resp, err := a.GPU(pctx, api.GPUQuery{Since: now, Until: now})
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		c.agentNote = fmt.Sprintf("the node agent did not answer at the start of the run (%v): the run sampled with its own tools", err)
		return false
	case len(resp.Tools) == 0:
		c.agentNote = "the node agent has no GPU source: the run sampled with its own tools"
		return false
	}
	c.viaAgent = true
	return true
}

// collectFromAgent writes gpu.json from the agent's samples of the run's
// window. ok is false when the agent failed: the caller then takes a final
// sample of its own, with c.agentNote saying why.
func (c *gpuCollector) collectFromAgent(ctx context.Context, env *Env, a agentGPU, out *Output) (ok bool, err error) {
	since := env.Start
	resp, err := a.GPU(ctx, api.GPUQuery{Since: since, Until: time.Now()})
	if err != nil {
		c.mu.Lock()
		c.agentNote = fmt.Sprintf("the node agent did not answer at collection (%v): gpu.json holds kcrash's own final sample", err)
		c.mu.Unlock()
		return false, nil
	}
	if len(resp.Tools) == 0 {
		c.mu.Lock()
		c.agentNote = "the node agent has no GPU source: gpu.json holds kcrash's own final sample"
		c.mu.Unlock()
		return false, nil
	}
	inTree := gpuTreePids(env)
	f := gpuFile{Source: SourceAgent, IntervalMS: resp.IntervalMS, Samples: make([]GPUSample, 0, len(resp.Samples)),
		Processes: make([]GPUProcess, 0, len(resp.Processes)), ToolErrors: []GPUToolError{}, Tools: append([]string{}, resp.Tools...),
		Withheld: resp.Withheld, AgentErrors: resp.Errors}
	for _, s := range resp.Samples {
		f.Samples = append(f.Samples, gpuSampleFromAPI(s))
	}
	if n := len(f.Samples); n > 0 {
		last := f.Samples[n-1]
		f.Snapshot = &last
	}
	for _, p := range resp.Processes {
		f.Processes = append(f.Processes, GPUProcess{Pid: p.Pid, Name: p.Name, GPU: p.GPU, UsedBytes: p.UsedBytes,
			MaxUsedBytes: p.MaxUsedBytes, InTree: inTree[p.Pid], Source: p.Source, FirstSeen: p.FirstSeen, LastSeen: p.LastSeen})
	}
	sortGPUProcesses(f.Processes)
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return true, err
	}
	return true, out.WriteFile("gpu.json", append(b, '\n'))
}

func gpuSampleFromAPI(s api.GPUSample) GPUSample {
	out := GPUSample{Time: s.Time, GPUs: make([]GPUMem, 0, len(s.GPUs))}
	for _, g := range s.GPUs {
		out.GPUs = append(out.GPUs, GPUMem{Index: g.Index, BusID: g.BusID, Name: g.Name, Vendor: g.Vendor, UsedBytes: g.UsedBytes,
			TotalBytes: g.TotalBytes, UsedPercent: g.UsedPercent, Card: g.Card, MIG: g.MIG, Source: g.Source})
	}
	return out
}

// sortGPUProcesses puts the run's processes first, then by pid.
func sortGPUProcesses(ps []GPUProcess) {
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.InTree != b.InTree {
			return a.InTree
		}
		if a.Pid != b.Pid {
			return a.Pid < b.Pid
		}
		return a.GPU+a.Source < b.GPU+b.Source
	})
}
