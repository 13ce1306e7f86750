package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/evidence"
)

// synthStart is the synthetic run's start.
var synthStart = time.Date(2026, 5, 2, 13, 0, 0, 0, time.UTC)

// synthPeak is where the synthetic run's VRAM peaks: GPU 3, 41 min 7 s in,
// one sample above every other (the drawing must keep it).
const (
	synthPeakGPU = 3
	synthPeakAt  = 41*time.Minute + 7*time.Second
	synthPeak    = 79_999_000_000
)

// synthetic builds a bundle of a one-hour run on 8 GPUs sampled every
// second: 3600 samples of each GPU and of memory, procs processes, a
// kernel-API log whose last call never returned, kernel events (an Xid, an
// OOM kill), an output log of progress bars. Its shapes are those the
// collectors write (gpu.json, memory.json, processes.json).
func synthetic(gpus, seconds, procs int) *Input {
	in := newInput("kcrash-20260502T140000Z-node7-4242-r3")
	end := synthStart.Add(time.Duration(seconds) * time.Second)
	total := uint64(85_520_809_984)
	type gpuMem struct {
		Index  int     `json:"index"`
		BusID  string  `json:"bus_id"`
		Name   string  `json:"name"`
		Vendor string  `json:"vendor"`
		Used   *uint64 `json:"vram_used_bytes"`
		Total  *uint64 `json:"vram_total_bytes"`
		Source string  `json:"source"`
	}
	type gpuSample struct {
		Time time.Time `json:"time"`
		GPUs []gpuMem  `json:"gpus"`
	}
	var gs []gpuSample
	for s := 0; s < seconds; s++ {
		t := synthStart.Add(time.Duration(s) * time.Second)
		smp := gpuSample{Time: t}
		for g := 0; g < gpus; g++ {
			// weights loaded in the first minute, then a sawtooth of the KV cache
			u := uint64(2e9)
			if s > 60 {
				u = 60e9 + uint64((s*(g+3))%900)*10e6
			} else {
				u += uint64(s) * 9e8
			}
			if g == synthPeakGPU && time.Duration(s)*time.Second == synthPeakAt {
				u = synthPeak
			}
			tot := total
			smp.GPUs = append(smp.GPUs, gpuMem{Index: g, BusID: fmt.Sprintf("0000:%02x:00.0", 0x17+g*0x10), Name: "NVIDIA H100 80GB HBM3", Vendor: "nvidia", Used: &u, Total: &tot, Source: "nvidia-smi"})
		}
		gs = append(gs, smp)
	}
	type gpuProc struct {
		Pid       int       `json:"pid"`
		GPU       string    `json:"gpu"`
		Used      uint64    `json:"used_bytes"`
		Max       uint64    `json:"max_used_bytes"`
		InTree    bool      `json:"in_tree"`
		Source    string    `json:"source"`
		FirstSeen time.Time `json:"first_seen"`
		LastSeen  time.Time `json:"last_seen"`
	}
	var gp []gpuProc
	for g := 0; g < gpus; g++ {
		gp = append(gp, gpuProc{Pid: 4243 + g, GPU: fmt.Sprintf("00000000:%02X:00.0", 0x17+g*0x10), Used: 58e9, Max: 61e9, InTree: true, Source: "nvidia-smi", FirstSeen: synthStart.Add(5 * time.Second), LastSeen: end.Add(-time.Second)})
	}
	in.files["gpu.json"] = mustJSON(map[string]any{"interval_ms": 1000, "samples": gs, "snapshot": gs[len(gs)-1], "processes": gp, "tool_errors": []any{}, "tools": []string{"nvidia-smi"}})

	type memSample struct {
		Time    time.Time         `json:"time"`
		Meminfo map[string]uint64 `json:"meminfo"`
		RSS     uint64            `json:"tree_rss_bytes"`
		Procs   int               `json:"tree_procs"`
		Cgroup  uint64            `json:"cgroup_usage_bytes"`
	}
	var ms []memSample
	for s := 0; s < seconds; s++ {
		avail := uint64(1800e9) - uint64(s%600)*1e8
		ms = append(ms, memSample{Time: synthStart.Add(time.Duration(s) * time.Second), Meminfo: map[string]uint64{"MemTotal": 2000e9, "MemAvailable": avail},
			RSS: 150e9 + uint64(s)*1e7, Procs: 40, Cgroup: 160e9 + uint64(s)*1e7})
	}
	lim := uint64(400e9)
	in.files["memory.json"] = mustJSON(map[string]any{"interval_ms": 1000, "samples": ms, "snapshot": ms[len(ms)-1],
		"cgroup": map[string]any{"version": 2, "path": "/system.slice/slurmstepd.scope/job_4242", "effective_limit_bytes": lim, "effective_limit_path": "/system.slice/slurmstepd.scope/job_4242", "oom_kill_delta": 1}})

	root := 4242
	var ps []evidence.Process
	ps = append(ps, evidence.Process{Pid: int32(root), PPid: 1, Name: "python3", Cmdline: []string{"python3", "-m", "sglang.launch_server", "--tp", "8"}, StartTime: synthStart, FirstSeen: synthStart, LastSeen: end, Exited: true})
	for i := 1; i < procs; i++ {
		born := synthStart.Add(time.Duration(i*seconds/procs) * time.Second)
		p := evidence.Process{Pid: int32(root + i), PPid: int32(root), Name: "compile_worker", Cmdline: []string{"python3", "-c", "compile"}, StartTime: born, FirstSeen: born, LastSeen: born.Add(2 * time.Second), Exited: true}
		zero := 0
		p.ExitCode = &zero
		if i <= gpus {
			p.Name, p.Cmdline = fmt.Sprintf("TP%d", i-1), []string{"sglang::scheduler_TP" + fmt.Sprint(i-1)}
			p.StartTime, p.FirstSeen, p.LastSeen = synthStart.Add(5*time.Second), synthStart.Add(5*time.Second), end.Add(-time.Second)
			if i == 4 {
				p.ExitCode, p.ExitSignal, p.CoreDumped = nil, "SIGABRT", true
			} else {
				p.ExitCode, p.ExitSignal = nil, "SIGKILL"
			}
		}
		ps = append(ps, p)
	}
	in.files["processes.json"] = mustJSON(map[string]any{"root_pid": root, "processes": ps})

	xidAt := end.Add(-2 * time.Second)
	oomAt := synthStart.Add(30 * time.Minute)
	kmsg := []evidence.Finding{
		{Kind: evidence.GPUIllegalMemoryAccess, Source: evidence.SourceDmesg, File: "kmsg.log", Line: 3, Text: "NVRM: Xid (PCI:0000:47:00): 13, pid=4246, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1): Out Of Range Address", Time: &xidAt, Pid: 4246, GPU: "0000:47:00.0", Xid: 13, Attribution: "pid-in-tree"},
		{Kind: evidence.HostOOM, Source: evidence.SourceDmesg, File: "kmsg.log", Line: 2, Text: "Memory cgroup out of memory: Killed process 4300 (compile_worker) total-vm:1234kB", Time: &oomAt, Pid: 4300, Attribution: "pid-in-tree"},
	}
	in.files["raw/kmsg-findings.json"] = mustJSON(map[string]any{"source": "/dev/kmsg", "findings": kmsg})
	in.files["kmsg.log"] = []byte(fmt.Sprintf("kcrash: kernel messages from /dev/kmsg\n%s kern  :err   : Memory cgroup out of memory: Killed process 4300 (compile_worker)\n%s kern  :warn  : NVRM: Xid (PCI:0000:47:00): 13, pid=4246\n",
		oomAt.Format(time.RFC3339Nano), xidAt.Format(time.RFC3339Nano)))

	var ka strings.Builder
	for s := seconds - 40; s < seconds-1; s++ {
		for c := 0; c < 20; c++ {
			fmt.Fprintf(&ka, "================================================================================\n[%s] SGLang Kernel API Call: sglang.moe.fused_experts\nOutput:\n  return=Tensor(\n      shape=(8, 4096)\n    )\n",
				synthStart.Add(time.Duration(s)*time.Second).Format("2006-01-02 15:04:05"))
		}
	}
	lastCall := synthStart.Add(time.Duration(seconds-2) * time.Second)
	fmt.Fprintf(&ka, "================================================================================\n[%s] SGLang Kernel API Call: sglang.quant_method.Fp8LinearMethod.apply\nPositional input arguments:\n", lastCall.Format("2006-01-02 15:04:05"))
	in.files["kernel-api.log"] = []byte(ka.String())

	var out strings.Builder
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&out, "[2026-05-02 13:%02d:%02d] Decode batch. #running-req: %d, #token: %d\n", (i/170)%60, i%60, i%64, i*7)
	}
	out.WriteString("Capturing batches (bs=8):  10%|#         | 1/10\rCapturing batches (bs=8): 100%|##########| 10/10\n")
	out.WriteString("[rank3]: torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n")
	in.files["output.log"] = []byte(out.String())

	rank := 3
	sig := "SIGABRT"
	tri := map[string]any{
		"verdict": map[string]any{"kind": "gpu_illegal_memory_access", "confidence": "high", "summary": "Xid 13 on GPU 0000:47:00.0 (pid 4246); the kernel-API call sglang.quant_method.Fp8LinearMethod.apply never returned"},
		"findings": []any{
			map[string]any{"kind": "gpu_illegal_memory_access", "source": "dmesg", "file": "kmsg.log", "line": 3, "text": kmsg[0].Text, "time": xidAt, "pid": 4246, "xid": 13, "details": map[string]any{"verdict_role": "root_cause"}},
			map[string]any{"kind": "gpu_illegal_memory_access", "source": "log", "file": "output.log", "line": 10002, "text": "[rank3]: torch.AcceleratorError: CUDA error: an illegal memory access was encountered", "details": map[string]any{"verdict_role": "explained"}},
		},
		"kernel_api": map[string]any{"calls": 781, "format": "sglang", "level": 3, "files": []string{"kernel-api.log"},
			"unfinished_call": map[string]any{"api": "sglang.quant_method.Fp8LinearMethod.apply", "time": lastCall, "file": "kernel-api.log", "line": 4681, "finished": false},
			"start":           synthStart.Add(time.Duration(seconds-40) * time.Second), "end": lastCall},
		"next_steps": []string{"Make the fault synchronous: `kcrash run --profile sglang,cuda-sync -- python3 -m sglang.launch_server --tp 8`."},
	}
	in.Manifest = bundle.Manifest{SchemaVersion: 1, KcrashVersion: "0.1.0-test", Mode: "run", Command: []string{"python3", "-m", "sglang.launch_server", "--tp", "8"},
		StartTime: synthStart, EndTime: end, Exit: bundle.Exit{Signal: &sig, CoreDumped: true},
		Host: bundle.Host{Hostname: "node7", Kernel: "6.8.0-51-generic"}, Job: &bundle.Job{Scheduler: "slurm", JobID: "4242", Rank: &rank, Node: "node7"},
		Triage: mustJSON(tri), Collectors: []bundle.CollectorStatus{{Name: "gpu", Status: "ok", Files: []string{"gpu.json"}}, {Name: "memory", Status: "ok", Files: []string{"memory.json"}}}}
	for n := range in.files {
		in.names = append(in.names, n)
	}
	return in
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
