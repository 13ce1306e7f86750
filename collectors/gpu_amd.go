package collectors

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// AMD GPUs are read from amdgpu's sysfs files, without starting a process:
// rocm-smi and amd-smi read the same files and cost a Python start each.

// amdCard is one DRM card whose driver exposes VRAM counters (amdgpu).
type amdCard struct {
	name      string // "card9"
	num       int
	usedPath  string
	totalPath string
	busID     string
	product   string
}

// amdSysfs caches the card list between samples; it is rescanned when a
// read fails (a card that went away, a hot reset). Its lock covers only the
// list: the file reads happen outside it, so one slow read cannot hold up
// the collection.
type amdSysfs struct {
	mu      sync.Mutex
	root    string
	scanned bool
	cards   []amdCard
	kfdBus  map[string]string // KFD gpu_id -> bus id
	arch    map[string]string // bus id -> gfx target ("gfx942"), from KFD topology
}

// isDRMCard accepts "card0", "card10", "card57" and rejects connectors
// ("card0-DP-1") and render nodes ("renderD128"). A "card[0-9]" glob would
// miss card10 and up, which is where MI300/MI350 nodes put most GPUs.
func isDRMCard(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "card")
	if !ok || rest == "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// scanAMDCards lists the amdgpu cards under sysRoot, sorted by card number.
func scanAMDCards(sysRoot string) []amdCard {
	dir := filepath.Join(sysRoot, "class", "drm")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var cards []amdCard
	for _, e := range ents {
		n, ok := isDRMCard(e.Name())
		if !ok {
			continue
		}
		dev := filepath.Join(dir, e.Name(), "device")
		// Only amdgpu has mem_info_vram_total; a BMC's VGA (ast) or an
		// NVIDIA card under nouveau/nvidia-drm has none.
		if drv, err := os.Readlink(filepath.Join(dev, "driver")); err == nil && filepath.Base(drv) != "amdgpu" {
			continue
		}
		total := filepath.Join(dev, "mem_info_vram_total")
		if _, err := os.Stat(total); err != nil {
			continue
		}
		c := amdCard{name: e.Name(), num: n, usedPath: filepath.Join(dev, "mem_info_vram_used"), totalPath: total}
		c.busID = amdBusID(dev)
		if b, err := os.ReadFile(filepath.Join(dev, "product_name")); err == nil {
			c.product = strings.TrimSpace(string(b))
		}
		cards = append(cards, c)
	}
	sort.Slice(cards, func(i, j int) bool { return cards[i].num < cards[j].num })
	return cards
}

// amdBusID reads the PCI address from uevent (present on real sysfs and in
// fixtures), else from where the device link points.
func amdBusID(dev string) string {
	if b, err := os.ReadFile(filepath.Join(dev, "uevent")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PCI_SLOT_NAME="); ok {
				return gpuNormBusID(v)
			}
		}
	}
	if t, err := os.Readlink(dev); err == nil {
		return gpuNormBusID(filepath.Base(t))
	}
	return ""
}

// state returns the cards and the KFD id map, scanning when needed. Both
// are replaced, never changed, so the caller may read them unlocked.
func (a *amdSysfs) state(root string) ([]amdCard, map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.scanned || a.root != root {
		a.root, a.scanned = root, true
		a.cards = scanAMDCards(root)
		a.kfdBus, a.arch = kfdTopology(root)
	}
	return a.cards, a.kfdBus
}

// archOf is the gfx target of the card at busID, "" when KFD does not say.
func (a *amdSysfs) archOf(busID string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.arch[busID]
}

func (a *amdSysfs) cardCount(root string) int {
	cards, _ := a.state(root)
	return len(cards)
}

// read samples every card. A card whose counters cannot be read is
// reported with null values rather than dropped, so a GPU that fell off
// the bus shows as a gap in the timeline.
func (a *amdSysfs) read(root string) []GPUMem {
	cards, _ := a.state(root)
	var buf [64]byte
	out := make([]GPUMem, 0, len(cards))
	failed := false
	for i, c := range cards {
		g := GPUMem{Index: i, BusID: c.busID, Name: c.product, Vendor: "amd", Card: c.name, Source: "sysfs", Arch: a.archOf(c.busID)}
		g.UsedBytes = amdReadU64(c.usedPath, buf[:])
		g.TotalBytes = amdReadU64(c.totalPath, buf[:])
		failed = failed || g.UsedBytes == nil
		out = append(out, g)
	}
	if failed {
		a.mu.Lock()
		a.scanned = false
		a.mu.Unlock()
	}
	return out
}

func amdReadU64(path string, buf []byte) *uint64 {
	b, err := gpuReadSmall(path, buf)
	if err != nil {
		return nil
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return nil
	}
	return &v
}

// kfdProcesses reads per-process VRAM from KFD: every process with a ROCm
// compute context has /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>. Reading
// all of them, not only the run's, shows a neighbour holding VRAM.
func (a *amdSysfs) kfdProcesses(root string) []gpuProcEntry {
	procDir := filepath.Join(root, "class", "kfd", "kfd", "proc")
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return nil
	}
	_, bus := a.state(root)
	var buf [64]byte
	var out []gpuProcEntry
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		files, err := os.ReadDir(filepath.Join(procDir, e.Name()))
		if err != nil {
			continue
		}
		for _, f := range files {
			id, ok := strings.CutPrefix(f.Name(), "vram_")
			if !ok {
				continue
			}
			v := amdReadU64(filepath.Join(procDir, e.Name(), f.Name()), buf[:])
			gpu := bus[id]
			if gpu == "" {
				gpu = "kfd:" + id
			}
			out = append(out, gpuProcEntry{Pid: pid, GPU: gpu, Used: v, Where: "kfd"})
		}
	}
	return out
}

// kfdTopology maps KFD gpu_ids to PCI addresses through the topology
// nodes' domain and location_id (bus<<8 | device<<3 | function), and those
// addresses to the gfx target the node's gfx_target_version names (what a
// ROCm build must hold code for: 90402 is gfx942, 90010 gfx90a, 110000
// gfx1100).
func kfdTopology(root string) (bus, arch map[string]string) {
	bus, arch = map[string]string{}, map[string]string{}
	nodes, _ := filepath.Glob(filepath.Join(root, "class", "kfd", "kfd", "topology", "nodes", "*"))
	for _, n := range nodes {
		id, err := os.ReadFile(filepath.Join(n, "gpu_id"))
		if err != nil || strings.TrimSpace(string(id)) == "0" {
			continue // CPU nodes have gpu_id 0
		}
		props, err := os.ReadFile(filepath.Join(n, "properties"))
		if err != nil {
			continue
		}
		var dom, loc, gfx int64 = -1, -1, 0
		for _, l := range strings.Split(string(props), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(l), " ")
			if !ok {
				continue
			}
			switch k {
			case "domain":
				dom, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			case "location_id":
				loc, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			case "gfx_target_version":
				gfx, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
		if dom < 0 || loc < 0 {
			continue
		}
		b := fmt.Sprintf("%04x:%02x:%02x.%x", dom, (loc>>8)&0xff, (loc>>3)&0x1f, loc&7)
		bus[strings.TrimSpace(string(id))] = b
		if gfx > 0 {
			arch[b] = fmt.Sprintf("gfx%d%d%x", gfx/10000, gfx/100%100, gfx%100)
		}
	}
	return bus, arch
}
