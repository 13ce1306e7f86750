package collectors

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/procfs"
)

// The rules that tie a kernel finding to the run, as Finding.Attribution
// spells them in the manifest. Triage keys on these strings.
const (
	AttrPidInTree      = "pid-in-tree"      // the finding's pid is a process of the child's tree
	AttrDeviceInWindow = "device-in-window" // a device-wide event, in the run window, on a GPU the run could use
	AttrMemcgOfTree    = "memcg-of-tree"    // an OOM kill in the memory cgroup the tree ran in, in the run window
	AttrUnrelated      = "unrelated"        // another process's event, or outside the window
)

// attributor decides which kernel findings belong to the run.
type attributor struct {
	procs    map[int]evidence.Process
	from, to time.Time
	procRoot string
	scope    *attrGPUScope
	// exitSlack is how long after the tracker last saw a process alive a
	// line with its pid is still its own: the kernel prints the segfault or
	// OOM kill when the process dies, up to a sampling period after the last
	// sample.
	exitSlack time.Duration
	// memcgs are the memory cgroups the tree was seen in (never "/"): a
	// worker started and OOM-killed between two samples is named by the
	// kernel with a pid nobody recorded, but in the run's own cgroup.
	memcgs map[string]bool
}

// attrClockSlack absorbs the difference between the kernel's printk clock and
// CLOCK_MONOTONIC, and the second precision of some fallback sources.
const attrClockSlack = time.Second

func newAttributor(env *Env, to time.Time, scope *attrGPUScope) *attributor {
	a := &attributor{procs: map[int]evidence.Process{}, from: env.Since, to: to, procRoot: env.ProcRoot, scope: scope}
	if a.from.IsZero() {
		a.from = env.Start
	}
	a.exitSlack = 10 * time.Second
	if s := 3 * env.SampleInterval; s > a.exitSlack {
		a.exitSlack = s
	}
	if env.Tree != nil {
		for _, p := range env.Tree.Processes() {
			a.procs[int(p.Pid)] = p
		}
	}
	if _, ok := a.procs[env.RootPid]; !ok && env.RootPid > 0 {
		a.procs[env.RootPid] = evidence.Process{Pid: int32(env.RootPid)}
	}
	return a
}

// attribute returns the rule that ties f to the run, or AttrUnrelated.
func (a *attributor) attribute(f evidence.Finding) string {
	if f.Pid > 0 && a.ownPid(f.Pid, f.Time) {
		return AttrPidInTree
	}
	if a.deviceWide(f) && a.inWindow(f.Time) && a.scope.usable(f.GPU) {
		return AttrDeviceInWindow
	}
	if f.Kind == evidence.HostOOM && a.inWindow(f.Time) {
		for _, k := range []detail.Text{detail.TaskMemcg, detail.Memcg} {
			if cg := f.Details.Text(k); cg != "" && a.memcgs[cg] {
				return AttrMemcgOfTree
			}
		}
	}
	return AttrUnrelated
}

// attrMemcgs reads the process's /proc/PID/cgroup: its memory cgroup on
// cgroup v1 and its unified cgroup on v2, the paths the OOM killer prints.
// The root cgroup is left out: it would tie every global OOM kill to the run.
func attrMemcgs(fs procfs.FS, pid int) []string {
	cgs, _ := fs.Cgroups(pid)
	var out []string
	for _, c := range cgs {
		if c.Path == "/" || c.Path == "" {
			continue
		}
		if c.Unified() || c.Has("memory") {
			out = append(out, c.Path)
		}
	}
	return out
}

// deviceWide reports whether f is about a GPU as a whole rather than one
// process's use of it: anything GPU-related without a pid (a reset, an Xid
// printed with pid '<unknown>'), and hardware errors even when the driver
// names a process (an ECC error or a GSP timeout hits every user of the GPU,
// whoever's call happened to trip it).
func (a *attributor) deviceWide(f evidence.Finding) bool {
	if f.Kind == evidence.GPUHardwareError {
		return true
	}
	if f.Pid > 0 {
		return false
	}
	if f.GPU != "" || f.Xid != 0 {
		return true
	}
	switch f.Kind {
	case evidence.GPUPageFault, evidence.GPUIllegalMemoryAccess, evidence.GPUHang, evidence.GPUOOM, evidence.GPUDeviceAssert:
		return true
	}
	return false
}

// inWindow treats a finding without a time as inside: it was read from the
// window's records.
func (a *attributor) inWindow(t *time.Time) bool {
	if t == nil {
		return true
	}
	if !a.from.IsZero() && t.Before(a.from.Add(-attrClockSlack)) {
		return false
	}
	return a.to.IsZero() || !t.After(a.to.Add(attrClockSlack))
}

func (a *attributor) ownPid(pid int, t *time.Time) bool {
	p, ok := a.procs[pid]
	if !ok {
		// The kernel names threads by their tid (a segfault in a worker
		// thread prints the thread's id); the tracker records processes.
		// A live thread can be mapped to its process; a dead one cannot.
		tgid := a.tgid(pid)
		if p, ok = a.procs[tgid]; !ok || tgid == pid {
			return false
		}
	}
	if t == nil {
		return true
	}
	// A pid seen outside the process's lifetime belonged to another process
	// (pid reuse on a busy host with a small pid_max).
	if !p.StartTime.IsZero() && t.Before(p.StartTime.Add(-attrClockSlack)) {
		return false
	}
	if p.Exited && !p.LastSeen.IsZero() && t.After(p.LastSeen.Add(a.exitSlack)) {
		return false
	}
	return true
}

func (a *attributor) tgid(pid int) int {
	if a.procRoot == "" {
		return 0
	}
	st, err := procfs.FS{Root: a.procRoot}.Status(pid)
	if err != nil {
		return 0
	}
	return st.Tgid
}

// attrGPUScope is the set of GPUs the child could use, when its environment
// proves it. A nil scope means every GPU of the host.
//
// It is mapped only where the mapping is certain. NVIDIA: CUDA_VISIBLE_DEVICES
// as GPU UUIDs (the driver lists each GPU's UUID under
// /proc/driver/nvidia/gpus/<pci>/information), or as indices with
// CUDA_DEVICE_ORDER=PCI_BUS_ID; CUDA's default order (fastest first) and MIG
// instances cannot be mapped from outside the process. AMD:
// ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES index the KFD topology's GPU
// nodes in node order, as the ROCm runtime does, each node naming its PCI
// address (location_id); partitions of one MI300-class GPU share its bus and
// device, so a visible partition makes the whole GPU's events count. Where
// nothing can be mapped, a device-wide event in the window is attributed to
// the run: a wrong "device-in-window" costs a reader one look, a wrong
// "unrelated" hides the cause of a crash.
type attrGPUScope struct {
	known   map[string]bool // the mapped GPUs of the host, by normalised PCI address
	visible map[string]bool
}

func (s *attrGPUScope) usable(gpu string) bool {
	if s == nil || gpu == "" {
		return true
	}
	k := attrPCI(gpu)
	if !s.known[k] {
		return true // another vendor's GPU, or an address the driver did not list
	}
	return s.visible[k]
}

// attrScopes merges the scopes of every process of the tree whose
// environment was read: a descendant may widen what its parent was given
// (a wrapper script exporting its own CUDA_VISIBLE_DEVICES), and a GPU any
// of them could use is the run's.
type attrScopes struct {
	seen   map[int]bool
	merged *attrGPUScope
	any    bool
}

func (s *attrScopes) add(pid int, sc *attrGPUScope) {
	if s.seen == nil {
		s.seen = map[int]bool{}
	}
	s.seen[pid] = true
	if !s.any {
		s.merged, s.any = sc, true
		return
	}
	if s.merged == nil || sc == nil {
		s.merged = nil // one unrestricted process: every GPU
		return
	}
	for k := range sc.known {
		s.merged.known[k] = true
	}
	for k := range sc.visible {
		s.merged.visible[k] = true
	}
}

// scope is nil (every GPU) until some environment was read.
func (s *attrScopes) scope() *attrGPUScope { return s.merged }

// attrScope is the GPUs a process with this environment could use, NVIDIA's
// and AMD's together; nil when nothing restricts them.
func attrScope(env *Env, childEnv []string) *attrGPUScope {
	nv := attrNvidiaScope(env.ProcRoot, childEnv)
	amd := attrAMDScope(env.SysRoot, childEnv)
	switch {
	case nv == nil:
		return amd
	case amd == nil:
		return nv
	}
	for k := range amd.known {
		nv.known[k] = true
	}
	for k := range amd.visible {
		nv.visible[k] = true
	}
	return nv
}

// attrAMDScope maps ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES (or
// CUDA_VISIBLE_DEVICES, which HIP also reads) onto PCI addresses, the way the
// ROCm runtime enumerates: the GPU nodes of the KFD topology (simd_count > 0)
// in node order; ROCR's list first, HIP's indices into what ROCR left. nil
// when nothing restricts the GPUs or a form cannot be mapped.
func attrAMDScope(sysRoot string, childEnv []string) *attrGPUScope {
	vars := map[string]string{}
	for _, kv := range childEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	rocr, hasRocr := vars["ROCR_VISIBLE_DEVICES"]
	hip, hasHip := vars["HIP_VISIBLE_DEVICES"]
	if !hasHip {
		hip, hasHip = vars["CUDA_VISIBLE_DEVICES"]
	}
	if !hasRocr && !hasHip {
		return nil
	}
	type agent struct{ pci, uuid string }
	var agents []agent
	nodes, _ := filepath.Glob(filepath.Join(sysRoot, "class", "kfd", "kfd", "topology", "nodes", "*"))
	sort.Slice(nodes, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(nodes[i]))
		b, _ := strconv.Atoi(filepath.Base(nodes[j]))
		return a < b
	})
	for _, n := range nodes {
		props := attrKFDProps(filepath.Join(n, "properties"))
		if props["simd_count"] == 0 {
			continue // a CPU node
		}
		loc := props["location_id"]
		a := agent{pci: attrPCI(fmt.Sprintf("%04x:%02x:%02x.%x", props["domain"], loc>>8, (loc>>3)&0x1f, loc&0x7))}
		if u, ok := props["unique_id"]; ok && u != 0 {
			a.uuid = fmt.Sprintf("gpu-%016x", u)
		}
		agents = append(agents, a)
	}
	if len(agents) == 0 {
		return nil
	}
	pick := func(list []agent, spec string) ([]agent, bool) {
		var out []agent
		for _, e := range strings.Split(spec, ",") {
			e = strings.ToLower(strings.TrimSpace(e))
			if e == "" {
				continue
			}
			if n, err := strconv.Atoi(e); err == nil {
				if n < 0 || n >= len(list) {
					break // the runtime stops at the first entry it cannot use
				}
				out = append(out, list[n])
				continue
			}
			found := false
			for _, a := range list {
				if a.uuid != "" && a.uuid == e {
					out, found = append(out, a), true
				}
			}
			if !found {
				return nil, false
			}
		}
		return out, true
	}
	vis := agents
	ok := true
	if hasRocr {
		if vis, ok = pick(vis, rocr); !ok {
			return nil
		}
	}
	if hasHip {
		if vis, ok = pick(vis, hip); !ok {
			return nil
		}
	}
	s := &attrGPUScope{known: map[string]bool{}, visible: map[string]bool{}}
	for _, a := range agents {
		s.known[a.pci] = true
	}
	for _, a := range vis {
		s.visible[a.pci] = true
	}
	return s
}

// attrKFDProps reads a KFD topology node's "name value" properties.
func attrKFDProps(path string) map[string]uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	props := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
				props[k] = n
			}
		}
	}
	return props
}

// attrNvidiaScope derives the scope from the child's environment; nil when it
// does not restrict the GPUs or the restriction cannot be mapped.
func attrNvidiaScope(procRoot string, childEnv []string) *attrGPUScope {
	vars := map[string]string{}
	for _, kv := range childEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	spec, ok := vars["CUDA_VISIBLE_DEVICES"]
	if !ok {
		return nil
	}
	dirs, _ := filepath.Glob(filepath.Join(procRoot, "driver", "nvidia", "gpus", "*"))
	if len(dirs) == 0 {
		return nil
	}
	var pcis []string
	uuids := map[string]string{} // lower-case UUID -> PCI
	for _, d := range dirs {
		pci := attrPCI(filepath.Base(d))
		pcis = append(pcis, pci)
		if u := attrNvidiaUUID(filepath.Join(d, "information")); u != "" {
			uuids[strings.ToLower(u)] = pci
		}
	}
	sort.Strings(pcis)
	s := &attrGPUScope{known: map[string]bool{}, visible: map[string]bool{}}
	for _, p := range pcis {
		s.known[p] = true
	}
	for _, e := range strings.Split(spec, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		// CUDA stops at the first entry it cannot use; so do we.
		if n, err := strconv.Atoi(e); err == nil {
			if n < 0 || n >= len(pcis) {
				break
			}
			if vars["CUDA_DEVICE_ORDER"] != "PCI_BUS_ID" {
				return nil
			}
			s.visible[pcis[n]] = true
			continue
		}
		if !strings.HasPrefix(strings.ToLower(e), "gpu-") {
			return nil // MIG-..., or a form this mapping does not know
		}
		// CUDA accepts any unique prefix of a UUID.
		match := ""
		for u, pci := range uuids {
			if strings.HasPrefix(u, strings.ToLower(e)) {
				if match != "" {
					return nil
				}
				match = pci
			}
		}
		if match == "" {
			break
		}
		s.visible[match] = true
	}
	return s
}

func attrNvidiaUUID(info string) string {
	f, err := os.Open(info)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "GPU UUID:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// attrPCI reduces the spellings of a GPU's PCI address in kernel lines and
// sysfs ("PCI:0000:3b:00", "0000:3b:00.0", "3b:00.0", "0000:01:00 GPU-I:05")
// to domain:bus:device in lower case.
func attrPCI(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "pci:")
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		s = s[:i]
	}
	if strings.Count(s, ":") == 1 {
		s = "0000:" + s
	}
	return s
}
