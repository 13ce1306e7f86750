package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/spf13/cobra"
)

// check is doctor's verdict on one collector on this host.
type check struct {
	Collector string `json:"collector"`
	Works     string `json:"works"` // yes, partly, no
	Why       string `json:"why"`
}

func init() {
	register(func(s *streams) *cobra.Command {
		var asJSON bool
		c := &cobra.Command{
			Use:   "doctor",
			Short: "Tell which collectors will work on this host, and why not",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				checks := doctorChecks("/proc", "/sys", "/dev")
				if asJSON {
					enc := json.NewEncoder(s.Out)
					enc.SetIndent("", "  ")
					return enc.Encode(checks)
				}
				tw := tabwriter.NewWriter(s.Out, 2, 8, 2, ' ', 0)
				fmt.Fprintln(tw, "COLLECTOR\tWORKS\tWHY")
				for _, c := range checks {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Collector, c.Works, c.Why)
				}
				return tw.Flush()
			},
		}
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		return c
	})
}

func doctorChecks(proc, sys, dev string) []check {
	var out []check
	add := func(name, works, why string) { out = append(out, check{name, works, why}) }

	// kernel messages
	restrict := strings.TrimSpace(readFileString(filepath.Join(proc, "sys/kernel/dmesg_restrict")))
	if f, err := os.Open(filepath.Join(dev, "kmsg")); err == nil {
		f.Close()
		add("kmsg", "yes", fmt.Sprintf("%s/kmsg is readable (dmesg_restrict=%s)", dev, restrict))
	} else if p, lerr := exec.LookPath("dmesg"); lerr == nil {
		add("kmsg", "partly", fmt.Sprintf("%s/kmsg: %v; falling back to %s (dmesg_restrict=%s)", dev, unwrapErr(err), p, restrict))
	} else if p, lerr := exec.LookPath("journalctl"); lerr == nil {
		add("kmsg", "partly", fmt.Sprintf("%s/kmsg: %v; falling back to %s -k", dev, unwrapErr(err), p))
	} else {
		add("kmsg", "no", fmt.Sprintf("%s/kmsg: %v, and neither dmesg nor journalctl is installed", dev, unwrapErr(err)))
	}

	// GPUs
	var gpu []string
	for _, tool := range []string{"nvidia-smi", "rocm-smi", "amd-smi"} {
		if p, err := exec.LookPath(tool); err == nil {
			gpu = append(gpu, p)
		}
	}
	cards := 0
	ents, _ := filepath.Glob(filepath.Join(sys, "class/drm/card*/device/mem_info_vram_total"))
	cards = len(ents)
	switch {
	case len(gpu) > 0 || cards > 0:
		add("gpu", "yes", fmt.Sprintf("%d amdgpu card(s) in sysfs; tools: %s", cards, orNone(gpu)))
	default:
		add("gpu", "no", "no GPU: no nvidia-smi, rocm-smi or amd-smi in PATH and no amdgpu card with mem_info_vram_total in "+sys+"/class/drm")
	}

	// host memory and cgroups
	var st unix.Statfs_t
	cg := "unknown"
	if err := unix.Statfs(filepath.Join(sys, "fs/cgroup"), &st); err == nil {
		switch st.Type {
		case unix.CGROUP2_SUPER_MAGIC:
			cg = "v2 (unified)"
		case unix.TMPFS_MAGIC:
			cg = "v1"
			if _, err := os.Stat(filepath.Join(sys, "fs/cgroup/memory/memory.usage_in_bytes")); err != nil {
				cg = "v1 without the memory controller"
			}
			if _, err := os.Stat(filepath.Join(sys, "fs/cgroup/unified")); err == nil {
				cg += " (hybrid: v2 also at /sys/fs/cgroup/unified)"
			}
		}
	}
	if _, err := os.Stat(filepath.Join(proc, "meminfo")); err == nil {
		add("memory", "yes", "/proc/meminfo readable; cgroup "+cg)
	} else {
		add("memory", "no", "no "+proc+"/meminfo")
	}

	// core dumps
	pattern := strings.TrimSpace(readFileString(filepath.Join(proc, "sys/kernel/core_pattern")))
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_CORE, &lim)
	why := fmt.Sprintf("core_pattern %q, ulimit -c %s", pattern, rlimitString(lim.Cur))
	switch {
	case lim.Cur == 0:
		add("coredump", "partly", why+": children dump no core unless they raise the limit")
	case strings.HasPrefix(pattern, "|"):
		add("coredump", "partly", why+": cores go to a handler; kcrash names it")
	default:
		add("coredump", "yes", why)
	}

	// stacks
	if os.Geteuid() == 0 {
		add("stacks", "yes", "root: kernel stacks of every thread readable")
	} else {
		add("stacks", "partly", "not root: wchan and state only, no kernel stacks")
	}
	if p, err := exec.LookPath("py-spy"); err == nil {
		out[len(out)-1].Why += "; py-spy at " + p
	} else {
		out[len(out)-1].Why += "; no py-spy in PATH (no Python stacks of hung processes)"
	}
	for _, n := range []string{"output", "kernel-api", "processes", "host"} {
		add(n, "yes", "needs nothing from the host")
	}
	return out
}

func readFileString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func unwrapErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func rlimitString(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return fmt.Sprint(v / 1024)
}
