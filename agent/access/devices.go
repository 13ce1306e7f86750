package access

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/internal/procfs"
)

// DeviceRules are a cgroup's device rules as cgroup v1's devices.list
// says them: one "TYPE MAJOR:MINOR ACCESS" a line. They tell which GPUs a
// caller's processes can use when a scheduler gave the job only some
// (Slurm's ConstrainDevices, a container runtime's device list).
//
// cgroup v2 has no such file: its device rules are eBPF programs attached
// to the cgroup (BPF_CGROUP_DEVICE), which the agent does not read. A
// program can be listed and dumped, but what it allows is code, not a
// list, so under v2 the GPUs a caller can use are those whose device files
// its processes held open (Annotator.Holders) and nothing else.
type DeviceRules struct {
	Cgroup string   // the devices controller's path of the caller
	Allow  []string // the rules, as devices.list has them
}

// ReadDeviceRules reads the device rules of pid's cgroup in the v1
// devices hierarchy (sysRoot/fs/cgroup/devices, "" is /sys); ok is false
// where there is none (cgroup v2 alone, no devices controller).
func ReadDeviceRules(procRoot, sysRoot string, pid int) (DeviceRules, bool) {
	cgs, err := procfs.FS{Root: procRoot}.Cgroups(pid)
	if err != nil {
		return DeviceRules{}, false
	}
	if sysRoot == "" {
		sysRoot = "/sys"
	}
	for _, c := range cgs {
		if !c.Has("devices") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(sysRoot, "fs", "cgroup", "devices", filepath.Clean("/"+c.Path), "devices.list"))
		if err != nil {
			return DeviceRules{}, false
		}
		r := DeviceRules{Cgroup: c.Path}
		for line := range strings.Lines(string(b)) {
			if l := strings.TrimSpace(line); l != "" {
				r.Allow = append(r.Allow, l)
			}
		}
		return r, true
	}
	return DeviceRules{}, false
}

// Grants reports whether the rules give this cgroup the device node
// ("c 226:128"), read or written. Only a rule naming the node's major
// number counts: "a *:* rwm", the rules of a cgroup nobody restricted,
// give every device and so say nothing of which GPUs a job was given, and
// the kernel lists that rule alone for a cgroup that allows by default.
func (r DeviceRules) Grants(node string) bool {
	typ, num, ok := strings.Cut(node, " ")
	if !ok {
		return false
	}
	major, minor, ok := strings.Cut(num, ":")
	if !ok {
		return false
	}
	for _, rule := range r.Allow {
		f := strings.Fields(rule)
		if len(f) != 3 {
			continue
		}
		if f[0] == "a" {
			return false // allows everything: no restriction to speak of
		}
		rmaj, rmin, ok := strings.Cut(f[1], ":")
		if !ok || f[0] != typ || rmaj != major || (rmin != "*" && rmin != minor) {
			continue
		}
		if strings.ContainsAny(f[2], "rw") {
			return true
		}
	}
	return false
}

// GrantsAny reports whether the rules grant one of nodes.
func (r DeviceRules) GrantsAny(nodes []string) bool {
	for _, n := range nodes {
		if r.Grants(n) {
			return true
		}
	}
	return false
}

// nvidiaMajor is the character major NVIDIA's driver registers for
// /dev/nvidiaN: fixed in the driver (NV_MAJOR_DEVICE_NUMBER).
const nvidiaMajor = 195

// deviceNodes are the device numbers of a GPU's files (deviceFiles), as
// "c MAJOR:MINOR": from the file itself where it exists, else from sysfs
// (a DRM node's or kfd's dev file) or NVIDIA's fixed major.
func (a *Annotator) deviceNodes(bdf string, files map[string]bool) []string {
	sys := a.root(a.SysRoot, "/sys")
	dev := a.root(a.DevRoot, "/dev")
	var out []string
	for f := range files {
		node := ""
		var st unix.Stat_t
		if unix.Stat(f, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
			node = fmt.Sprintf("c %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		} else {
			rel, _ := filepath.Rel(dev, f)
			switch {
			case strings.HasPrefix(rel, "dri/"):
				node = sysDev(filepath.Join(sys, "bus", "pci", "devices", bdf, "drm", filepath.Base(rel), "dev"))
			case rel == "kfd":
				node = sysDev(filepath.Join(sys, "class", "kfd", "kfd", "dev"))
			case strings.HasPrefix(rel, "nvidia"):
				if n, err := strconv.Atoi(strings.TrimPrefix(rel, "nvidia")); err == nil {
					node = fmt.Sprintf("c %d:%d", nvidiaMajor, n)
				}
			}
		}
		if node != "" {
			out = append(out, node)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sysDev reads a sysfs dev file ("226:128") as a character node.
func sysDev(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(string(b))
	if maj, min, ok := strings.Cut(v, ":"); ok && isDigits(maj) && isDigits(min) {
		return "c " + v
	}
	return ""
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
