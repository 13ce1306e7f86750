package kernlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// noiseLines are the kind of kernel chatter that surrounds real faults; most
// of a kernel log is lines like these, so they set the throughput.
var noiseLines = []string{
	"IPv6: ADDRCONF(NETDEV_CHANGE): cali2df86566d7a: link becomes ready",
	"audit: type=1400 audit(1700000000.123:456): apparmor=\"DENIED\" operation=\"open\" profile=\"snap.x\" name=\"/proc/1/environ\" pid=4242 comm=\"python3\" requested_mask=\"r\" denied_mask=\"r\" fsuid=0 ouid=0",
	"EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
	"eth0: renamed from veth3f1c2a1",
	"docker0: port 3(veth9b1e2f0) entered forwarding state",
	"nvidia-uvm: Loaded the UVM driver, major device number 508.",
	"[drm] Initialized amdgpu 3.57.0 20150101 for 0000:c1:00.0 on minor 1",
	"systemd-journald[812]: Received client request to flush runtime journal.",
	"mlx5_core 0000:17:00.0: mlx5_pcie_event:301:(pid 1521): PCIe slot advertised sufficient power (75W).",
	"perf: interrupt took too long (2505 > 2500), lowering kernel.perf_event_max_sample_rate to 79750",
	"sched: RT throttling activated",
	"TCP: request_sock_TCP: Possible SYN flooding on port 8000. Sending cookies.  Check SNMP counters.",
}

// faultBlocks are real fault reports from the corpus, one per kind.
var faultBlocks = [][]string{
	{
		"amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)",
		"amdgpu 0000:c6:00.0: amdgpu:  for process pt_main_thread pid 12924 thread pt_main_thread pid 12924)",
		"amdgpu 0000:c6:00.0: amdgpu:   in page starting at address 0x0000ae8570611000 from IH client 0x1b (UTCL2)",
		"amdgpu 0000:c6:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031",
		"amdgpu 0000:c6:00.0: amdgpu: \t Faulty UTCL2 client ID: TCP (0x8)",
		"amdgpu 0000:c6:00.0: amdgpu: \t MORE_FAULTS: 0x1",
		"amdgpu 0000:c6:00.0: amdgpu: \t WALKER_ERROR: 0x0",
		"amdgpu 0000:c6:00.0: amdgpu: \t PERMISSION_FAULTS: 0x3",
	},
	{"NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 9, TPC 1, SM 1): Out Of Range Address"},
	{"NVRM: Xid (PCI:0000:0a:00): 31, pid=13332, name=cuda_plot_k32_v, Ch 00000010, intr 00000000. MMU Fault: ENGINE CE2 HUBCLIENT_CE0 faulted @ 0x7f29_5b8c9000. Fault is of type FAULT_PRIV_VIOLATION ACCESS_TYPE_VIRT_READ"},
	{
		"python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
		"CPU: 11 PID: 940 Comm: python Tainted: P           OE     5.11.0-43-generic #47~20.04.2-Ubuntu",
		"oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-1000.slice/user@1000.service,task=python,pid=698405,uid=1000",
		"Out of memory: Killed process 698405 (python) total-vm:49978204kB, anon-rss:12918388kB, file-rss:68668kB, shmem-rss:53352kB, UID:1000 pgtables:49772kB oom_score_adj:0",
		"oom_reaper: reaped process 698405 (python), now anon-rss:0kB, file-rss:68664kB, shmem-rss:53172kB",
	},
	{"python2[4598]: segfault at da84cf8 ip 00007f7b2cbac94d sp 00007ffe4e250b60 error 4 in libc-2.27.so[7f7b2cb15000+1e7000]"},
	{"[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=502589, emitted seq=502591"},
}

// benchLog builds a kernel log of about size bytes: noise with a fault
// report every ~200 lines, in the prefix forms kcrash meets (plain dmesg,
// dmesg -T, ISO, syslog).
func benchLog(size int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.Grow(size + 4096)
	mono := 100.0
	for b.Len() < size {
		var msgs []string
		if rng.IntN(200) == 0 {
			msgs = faultBlocks[rng.IntN(len(faultBlocks))]
		} else {
			msgs = []string{noiseLines[rng.IntN(len(noiseLines))]}
		}
		form := rng.IntN(4)
		for _, m := range msgs {
			mono += rng.Float64()
			sec := int(mono)
			switch form {
			case 0:
				fmt.Fprintf(&b, "[%12.6f] %s\n", mono, m)
			case 1:
				fmt.Fprintf(&b, "[Sun Feb 23 16:%02d:%02d 2025] %s\n", sec/60%60, sec%60, m)
			case 2:
				fmt.Fprintf(&b, "kern  :warn  : 2025-01-21T04:%02d:%02d,283302+00:00 %s\n", sec/60%60, sec%60, m)
			default:
				fmt.Fprintf(&b, "Oct  7 12:%02d:%02d worker4 kernel: [%12.6f] %s\n", sec/60%60, sec%60, mono, m)
			}
		}
	}
	return b.Bytes()
}

func BenchmarkParseReader(b *testing.B) {
	data := benchLog(32 << 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		fs, err := ParseReader(bytes.NewReader(data), 2025)
		if err != nil || len(fs) == 0 {
			b.Fatalf("findings=%d err=%v", len(fs), err)
		}
	}
}

func BenchmarkSplitPrefix(b *testing.B) {
	lines := strings.Split(string(benchLog(4<<20)), "\n")
	var n int64
	for _, l := range lines {
		n += int64(len(l) + 1)
	}
	b.SetBytes(n)
	for b.Loop() {
		for i, l := range lines {
			_ = splitPrefix(l, i+1, 2025)
		}
	}
}

// BenchmarkParse measures Parse alone over lines already split.
func BenchmarkParse(b *testing.B) {
	data := benchLog(8 << 20)
	var lines []Line
	for i, raw := range strings.Split(string(data), "\n") {
		lines = append(lines, SplitPrefix(raw, i+1, 2025))
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if len(Parse(lines)) == 0 {
			b.Fatal("no findings")
		}
	}
}
