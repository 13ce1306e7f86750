package access

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// procTree builds a /proc, /sys and /dev under t.TempDir() holding the
// files the agent reads, in the kernel's formats.
type procTree struct {
	t              *testing.T
	proc, sys, dev string
}

func newProcTree(t *testing.T) *procTree {
	d := t.TempDir()
	p := &procTree{t: t, proc: filepath.Join(d, "proc"), sys: filepath.Join(d, "sys"), dev: filepath.Join(d, "dev")}
	for _, dir := range []string{p.proc, p.sys, p.dev} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *procTree) write(path, body string) {
	p.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// process writes /proc/PID/{stat,status,cgroup} of a process.
func (p *procTree) process(pid, ppid, uid int, start uint64, comm, cgroup string) {
	dir := filepath.Join(p.proc, strconv.Itoa(pid))
	p.write(filepath.Join(dir, "stat"), fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %d 1000000 200 18446744073709551615\n",
		pid, comm, ppid, pid, pid, start))
	p.write(filepath.Join(dir, "status"), fmt.Sprintf("Name:\t%s\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nGroups:\t\n",
		comm, pid, pid, ppid, uid, uid, uid, uid, uid, uid, uid, uid))
	p.write(filepath.Join(dir, "cgroup"), "0::"+cgroup+"\n")
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		p.t.Fatal(err)
	}
}

// holds makes descriptor fd of pid a link to the device file name under dev.
func (p *procTree) holds(pid, fd int, name string) {
	p.t.Helper()
	if err := os.Symlink(filepath.Join(p.dev, name), filepath.Join(p.proc, strconv.Itoa(pid), "fd", strconv.Itoa(fd))); err != nil {
		p.t.Fatal(err)
	}
}

func (p *procTree) exit(pid int) {
	if err := os.RemoveAll(filepath.Join(p.proc, strconv.Itoa(pid))); err != nil {
		p.t.Fatal(err)
	}
}

// nvidiaGPU writes the driver's information file for bdf (an excerpt of
// /proc/driver/nvidia/gpus/BDF/information in the driver's layout).
func (p *procTree) nvidiaGPU(bdf string, minor int) {
	p.write(filepath.Join(p.proc, "driver", "nvidia", "gpus", bdf, "information"),
		fmt.Sprintf("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-00000000-0000-0000-0000-000000000000\nVideo BIOS: \t 96.00.74.00.0d\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Firmware: \t 550.54.15\nGPU Excluded:\t No\n", bdf, minor))
}

// amdGPU writes the sysfs PCI device of an AMD GPU with its DRM nodes.
func (p *procTree) amdGPU(bdf string, card, render int) {
	dir := filepath.Join(p.sys, "bus", "pci", "devices", bdf)
	p.write(filepath.Join(dir, "vendor"), "0x1002\n")
	// Each DRM node's dev file holds its device number (DRM's major 226).
	for n, minor := range map[string]int{"card" + strconv.Itoa(card): card, "renderD" + strconv.Itoa(render): render} {
		p.write(filepath.Join(dir, "drm", n, "dev"), fmt.Sprintf("226:%d\n", minor))
	}
}
