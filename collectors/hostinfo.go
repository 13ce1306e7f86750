package collectors

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strings"

	"github.com/kcrash/kcrash/bundle"
	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/mem"
)

func init() {
	Register(Info{Name: "host", Description: "hostname, kernel, OS, CPU, memory, limits and load (raw/host.json)", Default: true},
		func() Collector { return hostCollector{} })
}

// HostInfo is the manifest's host block, read without spawning anything.
func HostInfo(ctx context.Context) bundle.Host {
	h := bundle.Host{GPUs: []string{}, CPUs: runtime.NumCPU()}
	h.Hostname, _ = os.Hostname()
	if info, err := host.InfoWithContext(ctx); err == nil {
		h.Kernel = info.KernelVersion
		h.OS = strings.TrimSpace(info.Platform + " " + info.PlatformVersion)
	}
	if cs, err := cpu.InfoWithContext(ctx); err == nil && len(cs) > 0 {
		h.CPU = cs[0].ModelName
	}
	if vm, err := mem.VirtualMemoryWithContext(ctx); err == nil {
		h.MemBytes = vm.Total
	}
	return h
}

type hostCollector struct{}

func (hostCollector) Collect(ctx context.Context, env *Env, out *Output) error {
	info := map[string]any{"host": env.Host(ctx)}
	for name, p := range map[string]string{
		"loadavg": env.Proc("loadavg"), "uptime": env.Proc("uptime"), "cmdline": env.Proc("cmdline"),
		"os_release": "/etc/os-release", "core_pattern": env.Proc("sys", "kernel", "core_pattern"),
		"dmesg_restrict": env.Proc("sys", "kernel", "dmesg_restrict"), "overcommit_memory": env.Proc("sys", "vm", "overcommit_memory"),
	} {
		if b, err := os.ReadFile(p); err == nil {
			info[name] = strings.TrimSpace(string(b))
		}
	}
	if env.RootPid > 0 {
		if l, err := env.ProcFS().Limits(env.RootPid); err == nil {
			info["child_limits"] = l
		}
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return out.WriteFile("raw/host.json", append(b, '\n'))
}
