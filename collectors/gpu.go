package collectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/execx"
)

func init() {
	Register(Info{Name: "gpu", Description: "VRAM per GPU and per process sampled during the run (amdgpu sysfs, nvidia-smi), rocm-smi/amd-smi at collection, as gpu.json and raw/", Default: true},
		func() Collector { return newGPUCollector() })
}

// GPU tool names as env.MarkStuck knows them.
const (
	toolNvidiaSMI = "nvidia-smi"
	toolROCmSMI   = "rocm-smi"
	toolAMDSMI    = "amd-smi"
)

const (
	// gpuToolTimeout bounds one call of an smi tool. nvidia-smi answers in
	// well under a second on a healthy node; one stuck in the driver never
	// answers, and waiting longer only delays the bundle.
	gpuToolTimeout = 5 * time.Second
	// gpuMaxSamples keeps the timeline bounded on runs that last days: the
	// first sample (the baseline) plus the most recent ones, which are the
	// ones that explain a crash.
	gpuMaxSamples = 1800
	// gpuFailLimit is how many failures in a row stop a tool from being
	// sampled during the run (a node without a driver answers every call
	// with the same error, at the cost of a process start each time).
	gpuFailLimit = 3
	// gpuMaxToolErrors caps distinct tool errors kept.
	gpuMaxToolErrors = 64
)

// GPUMem is one GPU's memory as one source saw it. Unknown values are null,
// never 0: a unified-memory part (GB10) or a failing tool must not read as an
// empty GPU.
type GPUMem struct {
	Index       int      `json:"index"`
	BusID       string   `json:"bus_id,omitempty"`
	Name        string   `json:"name,omitempty"`
	Vendor      string   `json:"vendor"`
	UsedBytes   *uint64  `json:"vram_used_bytes"`
	TotalBytes  *uint64  `json:"vram_total_bytes"`
	UsedPercent *float64 `json:"vram_used_percent,omitempty"` // only where a tool gives nothing better
	Card        string   `json:"card,omitempty"`              // sysfs DRM card (card9): AMD numbering is sparse
	MIG         string   `json:"mig,omitempty"`               // NVIDIA MIG instance "GI 3 CI 0 dev 0"
	// Arch is what a build must hold code for: "sm_90" (nvidia-smi's
	// compute_cap, asked at collection), "gfx942" (KFD's topology).
	Arch   string `json:"arch,omitempty"`
	Source string `json:"source"`
}

// GPUSample is every GPU at one moment.
type GPUSample struct {
	Time time.Time `json:"time"`
	GPUs []GPUMem  `json:"gpus"`
}

// GPUProcess is one process's VRAM on one GPU, merged over the samples that
// saw it: the process has usually freed its VRAM (or died) by collection.
type GPUProcess struct {
	Pid          int       `json:"pid"`
	Name         string    `json:"name,omitempty"`
	GPU          string    `json:"gpu"` // bus id when known, else the tool's index
	UsedBytes    *uint64   `json:"used_bytes"`
	MaxUsedBytes *uint64   `json:"max_used_bytes,omitempty"`
	InTree       bool      `json:"in_tree"`
	Source       string    `json:"source"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
}

// GPUToolError is one failure of a GPU tool; repeats are counted, not listed.
type GPUToolError struct {
	Tool     string    `json:"tool"`
	Args     []string  `json:"args,omitempty"`
	Error    string    `json:"error"`
	TimedOut bool      `json:"timed_out,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Time     time.Time `json:"time"`
	LastTime time.Time `json:"last_time,omitzero"`
	Count    int       `json:"count"`
}

// gpuFile is gpu.json.
type gpuFile struct {
	IntervalMS     int64          `json:"interval_ms"`
	Samples        []GPUSample    `json:"samples"`
	SamplesDropped int            `json:"samples_dropped,omitempty"`
	Snapshot       *GPUSample     `json:"snapshot"`
	Processes      []GPUProcess   `json:"processes"`
	ToolErrors     []GPUToolError `json:"tool_errors"`
	Tools          []string       `json:"tools"`                 // tools found in PATH
	StuckTools     []string       `json:"stuck_tools,omitempty"` // hung and not asked again
	// Source is "agent" when the node agent sampled (the run spawned no smi
	// tool), empty when kcrash sampled itself.
	Source      string   `json:"source,omitempty"`
	Withheld    int      `json:"withheld,omitempty"`     // the agent's count of other users' GPUs and processes left out
	AgentErrors []string `json:"agent_errors,omitempty"` // the agent's own tool errors
	// AgentNote says why an agent that runs was not the source.
	AgentNote string `json:"agent_note,omitempty"`
}

// gpuProcEntry is one row of a tool's per-process table.
type gpuProcEntry struct {
	Pid   int
	Name  string
	GPU   string
	Used  *uint64
	Where string // source
}

type gpuCollector struct {
	timeout  time.Duration
	lookPath func(string) (string, error)
	// agentOf finds the node agent's client; nil: env.Agent.
	agentOf func(*Env) agentGPU

	mu      sync.Mutex
	paths   map[string]string // tool -> path; nil until looked up
	amd     amdSysfs
	first   *GPUSample
	ring    []GPUSample // the most recent samples, in order
	dropped int
	procs   map[string]*GPUProcess
	errs    []GPUToolError
	fails   map[string]int // consecutive failures per tool
	raw     map[string]*strings.Builder
	rawKeys []string

	// calls and timeouts of the tools at collection: when every call timed
	// out and nothing else gave data, the collector's status is timeout.
	finalCalls, finalTimeouts int

	watched   bool   // Watch ran
	viaAgent  bool   // Watch left the sampling to the agent
	agentNote string // why the agent was not the source
}

func newGPUCollector() *gpuCollector {
	return &gpuCollector{timeout: gpuToolTimeout, lookPath: exec.LookPath}
}

// interval is the GPU sampling period: twice the base period, because
// nvidia-smi costs a process start per call.
func gpuInterval(env *Env) time.Duration {
	if env.SampleInterval <= 0 {
		return 2 * time.Second
	}
	return 2 * env.SampleInterval
}

func (c *gpuCollector) tools() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paths == nil {
		c.paths = map[string]string{}
		for _, t := range []string{toolNvidiaSMI, toolROCmSMI, toolAMDSMI} {
			if p, err := c.lookPath(t); err == nil {
				c.paths[t] = p
			}
		}
	}
	return c.paths
}

// Watch samples until ctx is done, unless the node agent samples.
func (c *gpuCollector) Watch(ctx context.Context, env *Env) {
	c.mu.Lock()
	c.watched = true
	c.mu.Unlock()
	if c.useAgent(ctx, env) {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(gpuInterval(env))
	defer tick.Stop()
	for {
		s := c.sample(ctx, env, false)
		if ctx.Err() != nil {
			return
		}
		c.addSample(s)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (c *gpuCollector) addSample(s GPUSample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first == nil {
		c.first = &s
		return
	}
	c.ring = append(c.ring, s)
	if len(c.ring) > gpuMaxSamples-1 {
		n := len(c.ring) - (gpuMaxSamples - 1)
		c.ring = append(c.ring[:0], c.ring[n:]...)
		c.dropped += n
	}
}

// sample reads every cheap source once. final also asks the slow tools
// (rocm-smi, amd-smi, nvidia-smi -q) that are only worth their cost once.
func (c *gpuCollector) sample(ctx context.Context, env *Env, final bool) GPUSample {
	now := time.Now()
	s := GPUSample{Time: now.UTC(), GPUs: []GPUMem{}}
	inTree := gpuTreePids(env)

	s.GPUs = append(s.GPUs, c.amd.read(env.SysRoot)...)
	c.mergeProcs(c.amd.kfdProcesses(env.SysRoot), inTree, now)

	paths := c.tools()
	if paths[toolNvidiaSMI] != "" && c.shouldRun(env, toolNvidiaSMI, final) {
		args := []string{"--query-gpu=" + strings.Join(nvidiaGPUFields, ","), "--format=csv,noheader,nounits"}
		if res, ok := c.run(ctx, env, final, toolNvidiaSMI, args...); ok {
			gpus, problems := parseNvidiaSMI(res.Stdout, nvidiaGPUFields)
			c.noteProblems(toolNvidiaSMI, args, problems, res)
			c.countFail(toolNvidiaSMI, res.ExitCode != 0 || len(gpus) == 0)
			s.GPUs = append(s.GPUs, gpus...)
		}
		args = []string{"--query-compute-apps=" + strings.Join(nvidiaAppFields, ","), "--format=csv,noheader,nounits"}
		if !env.Stuck(toolNvidiaSMI) {
			if res, ok := c.run(ctx, env, final, toolNvidiaSMI, args...); ok {
				procs, problems := parseNvidiaComputeApps(res.Stdout, nvidiaAppFields)
				c.noteProblems(toolNvidiaSMI, args, problems, res)
				c.mergeProcs(procs, inTree, now)
			}
		}
		if final && !env.Stuck(toolNvidiaSMI) {
			// ECC, retired/remapped rows and clocks: raw evidence for the
			// hardware verdicts, not parsed here.
			c.run(ctx, env, final, toolNvidiaSMI, "-q")
		}
		if final && !env.Stuck(toolNvidiaSMI) {
			// The arch, for an arch mismatch's next steps. Its own call:
			// drivers before compute_cap (510) refuse the whole query.
			args := []string{"--query-gpu=compute_cap,compute_mode,driver_version,name,index", "--format=csv"}
			if res, ok := c.run(ctx, env, final, toolNvidiaSMI, args...); ok && res.ExitCode == 0 {
				setNvidiaArch(s.GPUs, res.Stdout)
			}
		}
	}
	if final && paths[toolROCmSMI] != "" && c.shouldRun(env, toolROCmSMI, true) {
		args := []string{"--showmeminfo", "vram", "--json"}
		if res, ok := c.run(ctx, env, final, toolROCmSMI, args...); ok {
			gpus, problems := parseROCmSMI(res.Stdout)
			c.noteProblems(toolROCmSMI, args, problems, res)
			s.GPUs = append(s.GPUs, gpus...)
		}
	}
	if final && paths[toolAMDSMI] != "" && c.shouldRun(env, toolAMDSMI, true) {
		args := []string{"metric", "--mem-usage"}
		if res, ok := c.run(ctx, env, final, toolAMDSMI, args...); ok {
			gpus, procs, problems := parseAMDSMI(res.Stdout)
			c.noteProblems(toolAMDSMI, args, problems, res)
			s.GPUs = append(s.GPUs, gpus...)
			c.mergeProcs(procs, inTree, now)
		}
		args = []string{"process"}
		if !env.Stuck(toolAMDSMI) {
			if res, ok := c.run(ctx, env, final, toolAMDSMI, args...); ok {
				_, procs, problems := parseAMDSMI(res.Stdout)
				c.noteProblems(toolAMDSMI, args, problems, res)
				c.mergeProcs(procs, inTree, now)
			}
		}
	}
	return s
}

// shouldRun: a hung tool is never asked again; one that keeps failing is
// left alone while sampling but asked once more at collection.
func (c *gpuCollector) shouldRun(env *Env, tool string, final bool) bool {
	if env.Stuck(tool) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return final || c.fails[tool] < gpuFailLimit
}

// run calls one tool under the per-call deadline. ok is false when there is
// no output to parse: the tool hung, could not start, or ctx ended.
func (c *gpuCollector) run(ctx context.Context, env *Env, final bool, tool string, args ...string) (execx.Result, bool) {
	path := c.tools()[tool]
	if path == "" {
		return execx.Result{}, false
	}
	if env.Stuck(tool) {
		c.countFinal(final, true) // it hung earlier: no answer now either
		return execx.Result{}, false
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	begin := time.Now()
	res, err := execx.Run(cctx, nil, path, args...)
	c.keepRaw(tool, args, res, err)
	switch {
	case err != nil && errors.Is(err, execx.ErrTimeout) && ctx.Err() == nil:
		// Our own deadline fired while the run was still on: the tool is
		// stuck, most likely in the driver. Asking again would pile up
		// processes in D state.
		env.MarkStuck(tool)
		text := fmt.Sprintf("%s did not answer within %s (killed): the driver may be wedged", tool, c.timeout)
		t := begin.UTC()
		env.AddFinding(evidence.Finding{Kind: evidence.GPUHang, Source: evidence.SourceSMI, Text: text, Time: &t,
			Attribution: "device-in-window",
			Details:     map[string]any{"tool": tool, "args": args, "timeout_ms": c.timeout.Milliseconds()}})
		c.addToolError(GPUToolError{Tool: tool, Args: args, Error: text, TimedOut: true, Time: t})
		c.countFinal(final, true)
		return res, false
	case err != nil && ctx.Err() != nil:
		// The run or the collection ended while the tool was working: not
		// a hang of the tool's own. At the end of a run that is normal; at
		// collection it means the snapshot lacks this tool.
		if final {
			c.addToolError(GPUToolError{Tool: tool, Args: args, Error: "stopped at the collection deadline: " + err.Error(), Time: begin.UTC()})
		}
		c.countFinal(final, true)
		return res, false
	case err != nil:
		c.addToolError(GPUToolError{Tool: tool, Args: args, Error: err.Error(), Time: begin.UTC()})
		c.countFail(tool, true)
		c.countFinal(final, false)
		return res, false
	}
	c.countFinal(final, false)
	return res, true
}

func (c *gpuCollector) countFinal(final, timedOut bool) {
	if !final {
		return
	}
	c.mu.Lock()
	c.finalCalls++
	if timedOut {
		c.finalTimeouts++
	}
	c.mu.Unlock()
}

// noteProblems records what a tool said besides data.
func (c *gpuCollector) noteProblems(tool string, args []string, problems []string, res execx.Result) {
	if res.ExitCode != 0 {
		msg := gpuFirstLine(res.Stderr)
		if msg == "" {
			msg = gpuFirstLine(res.Stdout)
		}
		code := res.ExitCode
		c.addToolError(GPUToolError{Tool: tool, Args: args, Error: fmt.Sprintf("exit status %d: %s", code, msg), ExitCode: &code, Time: time.Now().UTC()})
	}
	for _, p := range problems {
		c.addToolError(GPUToolError{Tool: tool, Args: args, Error: p, Time: time.Now().UTC()})
	}
}

// countFail tracks failures in a row of a tool's main call (the one that
// lists GPUs); only those decide whether sampling keeps asking.
func (c *gpuCollector) countFail(tool string, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fails == nil {
		c.fails = map[string]int{}
	}
	if failed {
		c.fails[tool]++
	} else {
		c.fails[tool] = 0
	}
}

func (c *gpuCollector) addToolError(e GPUToolError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.errs {
		p := &c.errs[i]
		if p.Tool == e.Tool && p.Error == e.Error && strings.Join(p.Args, " ") == strings.Join(e.Args, " ") {
			p.Count++
			p.LastTime = e.Time
			return
		}
	}
	if len(c.errs) >= gpuMaxToolErrors {
		return
	}
	e.Count = 1
	c.errs = append(c.errs, e)
}

// keepRaw keeps the latest output of each command for raw/<tool>.txt.
func (c *gpuCollector) keepRaw(tool string, args []string, res execx.Result, err error) {
	var b strings.Builder
	fmt.Fprintf(&b, "$ %s %s\n", tool, strings.Join(args, " "))
	fmt.Fprintf(&b, "# %s, %s, exit %d\n", time.Now().UTC().Format(time.RFC3339Nano), res.Duration.Round(time.Millisecond), res.ExitCode)
	if err != nil {
		fmt.Fprintf(&b, "# error: %v\n", err)
	}
	b.Write(res.Stdout)
	if len(res.Stdout) > 0 && res.Stdout[len(res.Stdout)-1] != '\n' {
		b.WriteByte('\n')
	}
	if len(res.Stderr) > 0 {
		b.WriteString("# stderr:\n")
		b.Write(res.Stderr)
		if res.Stderr[len(res.Stderr)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	key := tool + "\x00" + strings.Join(args, " ")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.raw == nil {
		c.raw = map[string]*strings.Builder{}
	}
	if _, ok := c.raw[key]; !ok {
		c.rawKeys = append(c.rawKeys, key)
	}
	c.raw[key] = &b
}

func (c *gpuCollector) mergeProcs(ps []gpuProcEntry, inTree map[int]bool, now time.Time) {
	if len(ps) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.procs == nil {
		c.procs = map[string]*GPUProcess{}
	}
	for _, p := range ps {
		key := fmt.Sprintf("%d/%s/%s", p.Pid, p.GPU, p.Where)
		e := c.procs[key]
		if e == nil {
			e = &GPUProcess{Pid: p.Pid, GPU: p.GPU, Source: p.Where, FirstSeen: now.UTC()}
			c.procs[key] = e
		}
		if p.Name != "" {
			e.Name = p.Name
		}
		e.LastSeen = now.UTC()
		e.UsedBytes = p.Used
		if p.Used != nil && (e.MaxUsedBytes == nil || *p.Used > *e.MaxUsedBytes) {
			v := *p.Used
			e.MaxUsedBytes = &v
		}
		e.InTree = e.InTree || inTree[p.Pid]
	}
}

// gpuTreePids is the set of the run's pids, exited descendants included.
func gpuTreePids(env *Env) map[int]bool {
	m := map[int]bool{}
	if env.RootPid > 0 {
		m[env.RootPid] = true
	}
	if env.Tree != nil {
		for _, p := range env.Tree.Processes() {
			m[int(p.Pid)] = true
		}
	}
	return m
}

// Collect takes the last sample, asks the slow tools once and writes gpu.json.
func (c *gpuCollector) Collect(ctx context.Context, env *Env, out *Output) error {
	// The agent's samples, when it sampled for the run, or when nothing
	// watched (kcrash collect) and one runs.
	c.mu.Lock()
	askAgent := c.viaAgent || !c.watched
	c.mu.Unlock()
	if a := c.agent(env); a != nil && askAgent {
		if ok, err := c.collectFromAgent(ctx, env, a, out); ok {
			return err
		}
	}
	paths := c.tools()
	if len(paths) == 0 && c.amd.cardCount(env.SysRoot) == 0 {
		c.mu.Lock()
		note := c.agentNote
		c.mu.Unlock()
		if note != "" {
			note = "; " + note
		}
		return Skip("no GPU found: no nvidia-smi/rocm-smi/amd-smi in PATH and no amdgpu card in %s%s", env.Sys("class", "drm"), note)
	}
	// The slow tools must not eat the time needed to write what the run
	// sampled: keep a slice of the collector's deadline for that.
	sctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		reserve := min(time.Until(dl)/5, 2*time.Second)
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
		defer cancel()
	}
	snap := c.sample(sctx, env, true)

	inTree := gpuTreePids(env)
	c.mu.Lock()
	f := gpuFile{IntervalMS: gpuInterval(env).Milliseconds(), Snapshot: &snap, Samples: []GPUSample{},
		Processes: []GPUProcess{}, ToolErrors: append([]GPUToolError{}, c.errs...), Tools: []string{}, SamplesDropped: c.dropped,
		AgentNote: c.agentNote}
	if c.first != nil {
		f.Samples = append(f.Samples, *c.first)
	}
	f.Samples = append(f.Samples, c.ring...)
	for _, p := range c.procs {
		q := *p
		q.InTree = q.InTree || inTree[q.Pid]
		f.Processes = append(f.Processes, q)
	}
	raw := map[string]*strings.Builder{}
	var order []string
	for _, k := range c.rawKeys {
		tool, _, _ := strings.Cut(k, "\x00")
		name := gpuRawName(tool, k)
		if raw[name] == nil {
			raw[name] = &strings.Builder{}
			order = append(order, name)
		} else {
			raw[name].WriteString("\n")
		}
		raw[name].WriteString(c.raw[k].String())
	}
	c.mu.Unlock()
	for t := range paths {
		f.Tools = append(f.Tools, t)
		if env.Stuck(t) {
			f.StuckTools = append(f.StuckTools, t)
		}
	}
	sort.Strings(f.Tools)
	sort.Strings(f.StuckTools)
	sortGPUProcesses(f.Processes)
	for _, name := range order {
		if err := out.WriteFile(name, []byte(raw[name].String())); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := out.WriteFile("gpu.json", append(b, '\n')); err != nil {
		return err
	}
	c.mu.Lock()
	calls, timeouts := c.finalCalls, c.finalTimeouts
	c.mu.Unlock()
	if calls > 0 && timeouts == calls && len(snap.GPUs) == 0 {
		return TimedOut("every call of %s timed out (%d of %d); gpu.json holds what was sampled before", strings.Join(f.Tools, ", "), timeouts, calls)
	}
	return nil
}

// gpuRawName maps a command to its raw/ file: nvidia-smi -q is big and read
// on its own, so it gets its own file.
func gpuRawName(tool, key string) string {
	if strings.HasSuffix(key, "\x00-q") {
		return "raw/" + tool + "-q.txt"
	}
	return "raw/" + tool + ".txt"
}

func gpuFirstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 300 {
				l = l[:300]
			}
			return l
		}
	}
	return ""
}

// gpuNA reports whether a tool printed "no value" instead of a number.
func gpuNA(s string) bool {
	s = strings.Trim(strings.TrimSpace(s), "[]")
	switch strings.ToLower(s) {
	case "", "n/a", "na", "not supported", "not available", "unknown", "unknown error", "insufficient permissions", "gpu is lost", "requested functionality has been deprecated":
		return true
	}
	return false
}

// gpuParseSize parses "283 MB", "1.1 GB", "22284MiB", "0.0 B" into bytes.
// Tools write MB for MiB (amd-smi: 196592 MB on an MI300X is exactly its
// 206141652992-byte total / 2^20), so MB and MiB both mean 2^20.
func gpuParseSize(s string, defUnit uint64) *uint64 {
	s = strings.TrimSpace(s)
	if gpuNA(s) {
		return nil
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return nil
	}
	num, unit := s[:i], strings.TrimSpace(s[i:])
	mult := defUnit
	switch strings.ToUpper(unit) {
	case "":
	case "B":
		mult = 1
	case "KB", "KIB", "K":
		mult = 1 << 10
	case "MB", "MIB", "M":
		mult = 1 << 20
	case "GB", "GIB", "G":
		mult = 1 << 30
	case "TB", "TIB":
		mult = 1 << 40
	default:
		return nil
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return nil
		}
		v := n * mult
		return &v
	}
	fl, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return nil
	}
	v := uint64(fl * float64(mult))
	return &v
}

// setNvidiaArch reads `nvidia-smi --query-gpu=compute_cap,...,index
// --format=csv` (a header naming the columns, then "8.9, ..., 1") into the
// NVIDIA GPUs of those indexes, as "sm_89".
func setNvidiaArch(gpus []GPUMem, out []byte) {
	capCol, idxCol := -1, -1
	for _, l := range strings.Split(string(out), "\n") {
		cells := strings.Split(l, ",")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if capCol < 0 {
			capCol, idxCol = slices.Index(cells, "compute_cap"), slices.Index(cells, "index")
			if capCol < 0 || idxCol < 0 {
				capCol = -1
			}
			continue
		}
		if len(cells) <= max(capCol, idxCol) {
			continue
		}
		major, minor, ok := strings.Cut(cells[capCol], ".")
		idx, err := strconv.Atoi(cells[idxCol])
		if !ok || err != nil || !allDigits(major) || !allDigits(minor) {
			continue
		}
		for i := range gpus {
			if gpus[i].Vendor == "nvidia" && gpus[i].Index == idx && gpus[i].MIG == "" {
				gpus[i].Arch = "sm_" + major + minor
			}
		}
	}
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// gpuNormBusID writes PCI addresses one way so nvidia-smi's
// "00000000:05:00.0" and sysfs's "0000:05:00.0" join.
func gpuNormBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if dom, rest, ok := strings.Cut(s, ":"); ok && len(dom) > 4 && strings.Trim(dom[:len(dom)-4], "0") == "" {
		s = dom[len(dom)-4:] + ":" + rest
	}
	return s
}

func gpuU64(v uint64) *uint64 { return &v }

// gpuReadSmall reads a small sysfs/procfs file into buf without the stat
// that os.ReadFile does: this runs every sample for every card.
func gpuReadSmall(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf = buf[:cap(buf)]
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return nil, err
	}
	return buf[:n], nil
}

// Available: an SMI tool in PATH or an amdgpu card in sysfs.
func (c *gpuCollector) Available(env *Env) (Availability, string) {
	var tools []string
	for _, tool := range []string{"nvidia-smi", "rocm-smi", "amd-smi"} {
		if p, err := c.lookPath(tool); err == nil {
			tools = append(tools, p)
		}
	}
	cards, _ := filepath.Glob(env.Sys("class", "drm", "card*", "device", "mem_info_vram_total"))
	if len(tools) == 0 && len(cards) == 0 {
		return Unavailable, "no GPU: no nvidia-smi, rocm-smi or amd-smi in PATH and no amdgpu card with mem_info_vram_total in " + env.SysRoot + "/class/drm"
	}
	list := "none"
	if len(tools) > 0 {
		list = strings.Join(tools, ", ")
	}
	return Works, fmt.Sprintf("%d amdgpu card(s) in sysfs; tools: %s", len(cards), list)
}
