package access

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/internal/procfs"
	"github.com/kcrash/kcrash/kernlog"
)

// ContinuationWindow is how soon after a record naming something a record
// naming nothing must arrive to be read as the next line of the same
// report (amdgpu's fault status lines, the OOM killer's dump): drivers
// print a report's lines back to back.
const ContinuationWindow = 50 * time.Millisecond

// holderCacheTTL is how long the holders of a GPU's device files are
// reused: a fault storm names one GPU hundreds of times a second, and a
// walk of every process's descriptors is the dearest thing the agent does.
const holderCacheTTL = time.Second

// Annotator resolves the subject of each record as it arrives, while the
// processes it names (usually) still live.
type Annotator struct {
	Tracker  *Tracker
	ProcRoot string // "" is /proc
	SysRoot  string // "" is /sys
	DevRoot  string // "" is /dev: the paths device files have in descriptor links

	mu    sync.Mutex
	cache map[string]holderEntry
}

type holderEntry struct {
	at      time.Time
	holders []journal.Holder
	nodes   []string
}

// Annotate fills e.Subject from e's text; prev is the record read just
// before e (nil for none), whose subject a record naming nothing continues.
func (a *Annotator) Annotate(prev, e *journal.Entry) {
	if e == nil || e.Gap != nil {
		return
	}
	s := kernlog.Subjects(e.Rec.Text)
	if s.Empty() {
		if continues(prev, e) {
			e.Subject = prev.Subject
			e.Subject.Inherited = true
		}
		return
	}
	var sub journal.Subject
	for _, pid := range s.Pids {
		p := journal.Proc{Pid: pid, UID: -1}
		if info, ok := a.lookup(pid); ok {
			p.UID, p.Cgroup = info.UID, info.Cgroup
		}
		// The kernel's own word on the victim of an OOM line outranks what
		// /proc says a moment later.
		if s.UID != nil && len(s.Pids) == 1 {
			p.UID = *s.UID
		}
		if s.Memcg != "" && len(s.Pids) == 1 {
			p.Cgroup = s.Memcg
		}
		sub.Procs = append(sub.Procs, p)
	}
	for _, bdf := range s.BDFs {
		holders, nodes := a.device(bdf)
		sub.Devices = append(sub.Devices, journal.Device{BDF: bdf, Holders: holders, Nodes: nodes})
	}
	// A device's line that names no process but follows, within the
	// window, a line of the same device that did (amdgpu's "in page
	// starting at address" and status lines after the faulting process's)
	// is that process's report too.
	if len(sub.Procs) == 0 && continues(prev, e) && len(prev.Subject.Procs) > 0 && sameDevice(prev.Subject.Devices, sub.Devices) {
		sub.Procs = prev.Subject.Procs
		sub.Inherited = true
	}
	e.Subject = sub
}

func sameDevice(a, b []journal.Device) bool {
	for _, x := range a {
		for _, y := range b {
			if x.BDF == y.BDF {
				return true
			}
		}
	}
	return false
}

func continues(prev, e *journal.Entry) bool {
	if prev == nil || prev.Gap != nil || prev.Boot != e.Boot {
		return false
	}
	if len(prev.Subject.Procs) == 0 && len(prev.Subject.Devices) == 0 {
		return false
	}
	d := e.Rec.Mono - prev.Rec.Mono
	return d >= 0 && d <= ContinuationWindow
}

func (a *Annotator) lookup(pid int) (ProcInfo, bool) {
	if a.Tracker != nil {
		return a.Tracker.Lookup(pid)
	}
	t := Tracker{ProcRoot: a.ProcRoot}
	return t.Lookup(pid)
}

func (a *Annotator) root(r, def string) string {
	if r == "" {
		return def
	}
	return r
}

// Holders returns the processes that hold bdf's device files open.
func (a *Annotator) Holders(bdf string) []journal.Holder {
	h, _ := a.device(bdf)
	return h
}

// device returns the processes that hold bdf's device files open and the
// device numbers of those files.
func (a *Annotator) device(bdf string) ([]journal.Holder, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if c, ok := a.cache[bdf]; ok && now.Sub(c.at) < holderCacheTTL {
		return c.holders, c.nodes
	}
	files := a.deviceFiles(bdf)
	var holders []journal.Holder
	var nodes []string
	if len(files) > 0 {
		holders = a.scanHolders(files)
		nodes = a.deviceNodes(bdf, files)
	}
	if a.cache == nil {
		a.cache = map[string]holderEntry{}
	}
	for k, c := range a.cache {
		if now.Sub(c.at) >= holderCacheTTL {
			delete(a.cache, k)
		}
	}
	a.cache[bdf] = holderEntry{at: now, holders: holders, nodes: nodes}
	return holders, nodes
}

// deviceFiles are the paths through which a process uses the GPU at bdf:
// NVIDIA's /dev/nvidiaN (N is the "Device Minor" of the driver's
// information file), the DRM nodes sysfs lists under the PCI device, and
// for an AMD GPU /dev/kfd, through which ROCm reaches every AMD GPU.
func (a *Annotator) deviceFiles(bdf string) map[string]bool {
	dev := a.root(a.DevRoot, "/dev")
	files := map[string]bool{}
	info, err := os.ReadFile(filepath.Join(a.root(a.ProcRoot, procfs.DefaultRoot), "driver", "nvidia", "gpus", bdf, "information"))
	if err == nil {
		for line := range strings.Lines(string(info)) {
			if v, ok := strings.CutPrefix(line, "Device Minor:"); ok {
				if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
					files[filepath.Join(dev, "nvidia"+strconv.Itoa(n))] = true
				}
			}
		}
	}
	pci := filepath.Join(a.root(a.SysRoot, "/sys"), "bus", "pci", "devices", bdf)
	if entries, err := os.ReadDir(filepath.Join(pci, "drm")); err == nil {
		for _, e := range entries {
			if n := e.Name(); strings.HasPrefix(n, "renderD") || strings.HasPrefix(n, "card") {
				files[filepath.Join(dev, "dri", n)] = true
			}
		}
	}
	if v, err := os.ReadFile(filepath.Join(pci, "vendor")); err == nil && strings.TrimSpace(string(v)) == "0x1002" {
		files[filepath.Join(dev, "kfd")] = true
	}
	return files
}

// maxHolders bounds one device's holder list.
const maxHolders = 256

func (a *Annotator) scanHolders(files map[string]bool) []journal.Holder {
	fs := procfs.FS{Root: a.ProcRoot}
	pids, err := fs.Pids()
	if err != nil {
		return nil
	}
	slices.Sort(pids)
	var out []journal.Holder
	for _, pid := range pids {
		if len(out) >= maxHolders {
			break
		}
		held := false
		fdTargets(a.ProcRoot, pid, func(target string) {
			if files[target] {
				held = true
			}
		})
		if !held {
			continue
		}
		h := journal.Holder{Pid: pid, UID: -1}
		if info, ok := a.lookup(pid); ok {
			h.UID, h.Cgroup = info.UID, info.Cgroup
		} else {
			var st syscall.Stat_t
			if syscall.Stat(fs.Path(strconv.Itoa(pid)), &st) == nil {
				h.UID = int(st.Uid)
			}
		}
		out = append(out, h)
	}
	return out
}
