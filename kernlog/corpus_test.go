package kernlog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// corpusDir is the repository's copy of the crash-evidence corpus.
func corpusDir(t testing.TB) string { return testcorpus.Dir(t) }

// corpusBody returns a corpus file without its three header lines (source:,
// expect:, blank), exactly as the sample text was captured.
func corpusBody(t testing.TB, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(b), "\n", 4)
	if len(parts) < 4 || !strings.HasPrefix(parts[0], "source:") || !strings.HasPrefix(parts[1], "expect:") || parts[2] != "" {
		t.Fatalf("%s: unexpected corpus header", rel)
	}
	return parts[3]
}

// want is one expected finding. kind, line, pid, gpu, address, xid, source
// and time are always compared (zero values included), so a field that
// should be empty is asserted empty.
type want struct {
	kind    evidence.Kind
	line    int
	pid     int
	gpu     string
	addr    string
	xid     int
	time    string // RFC 3339 (UTC); "" means Time must be nil
	source  string // "" means dmesg
	text    string // required prefix of Text
	details map[string]any
	absent  []string // detail keys that must not be set
}

type d = map[string]any

type corpusCase struct {
	file string
	year int
	want []want
}

var corpusCases = []corpusCase{
	// 1. amdgpu VM faults
	{file: "1-amdgpu-page-fault/gfx11-gfxhub-sdma-fault-journal-rdna4-python3.txt", want: []want{{
		kind: evidence.GPUPageFault, line: 1, pid: 15615, gpu: "0000:0e:00.0", addr: "0x00007febd6383000",
		text: "amdgpu 0000:0e:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:173 vmid:8 pasid:32791)",
		details: d{"vendor": "amd", "event": "vm_fault", "hub": "gfxhub", "vmid": 8, "pasid": 32791, "ring": 173,
			"process": "python3", "thread": "python3", "tid": 15615, "client_id": "10", "status": "0x00841B5B",
			"status_register": "GCVM_L2_PROTECTION_FAULT_STATUS", "utcl2_client": "SDMA0", "utcl2_client_id": "0xd",
			"walker_error": "0x5", "mapping_error": "0x1", "permission_faults": "0x5", "rw": "0x1", "more_faults": "0x1",
			"uptime_s": 2480.727732, "repeat": 2, "last_line": 11,
			"addresses": []string{"0x00007febd6383000", "0x00007febd6380000"}},
		absent: []string{"retry"},
	}}},
	{file: "1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt", want: []want{{
		kind: evidence.GPUPageFault, line: 1, pid: 12924, gpu: "0000:c6:00.0", addr: "0x0000ae8570611000",
		details: d{"hub": "gfxhub0", "retry": "no", "vmid": 3, "pasid": 32769, "process": "pt_main_thread",
			"thread": "pt_main_thread", "client": "UTCL2", "client_id": "0x1b", "status": "0x00301031",
			"status_register": "VM_L2_PROTECTION_FAULT_STATUS", "utcl2_client": "TCP", "permission_faults": "0x3",
			"walker_error": "0x0", "repeat": 2},
	}}},
	{file: "1-amdgpu-page-fault/mi300x-mmhub0-sdma-no-retry-fault.txt", want: []want{
		{kind: evidence.GPUPageFault, line: 1, gpu: "0000:3d:00.0",
			details: d{"hub": "mmhub0", "retry": "yes", "vmid": 3, "pasid": 32790, "ring": 0},
			absent:  []string{"process", "status"}},
		{kind: evidence.GPUPageFault, line: 2, pid: 6071, gpu: "0000:3d:00.0", addr: "0x0000709843600000",
			details: d{"hub": "mmhub0", "retry": "no", "vmid": 3, "pasid": 32790, "ring": 160, "process": "python3.12",
				"client": "VMC", "client_id": "0x12", "node_id": 0, "die": "AID0", "status": "0x00360251",
				"utcl2_client": "SDMA1", "utcl2_client_id": "0x101", "more_faults": "0x1"}},
	}},
	{file: "1-amdgpu-page-fault/mmhub0-no-retry-ipython3-inline-process.txt", want: []want{{
		kind: evidence.GPUPageFault, line: 1, pid: 846049, gpu: "0000:88:00.0", addr: "0x00007fe99dff7000",
		details: d{"hub": "mmhub0", "retry": "no", "vmid": 8, "pasid": 32768, "process": "ipython3", "tid": 846049,
			"client": "VMC", "status": "0x00000000", "utcl2_client": "MP0", "repeat": 2,
			"addresses": []string{"0x00007fe99dff7000", "0x00007fe99dff8000"}},
	}}},

	// 2. ROCm runtime faults, amdgpu ring timeouts and resets
	{file: "2-rocm-userspace-fault/amdgpu-ring-gfx-timeout-hip-blender-reset.txt", want: []want{
		{kind: evidence.GPUHang, line: 2, pid: 10728, gpu: "0000:0c:00.0",
			text: "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout",
			details: d{"event": "ring_timeout", "ring": "gfx_0.0.0", "signaled_seq": 502589, "emitted_seq": 502591,
				"process": "blender", "thread": "blender:cs0", "tid": 10762}},
		{kind: evidence.GPUHang, line: 4, gpu: "0000:0c:00.0", text: "amdgpu 0000:0c:00.0: amdgpu: GPU reset begin!",
			details: d{"event": "gpu_reset", "failed_suspend_pasid": "0x800c"}},
	}},
	{file: "2-rocm-userspace-fault/amdgpu-ring-sdma0-timeout-gpu-reset-begin-mes.txt", year: 2023, want: []want{
		{kind: evidence.GPUHang, line: 1, gpu: "0000:0a:00.0", time: "2023-10-07T12:58:23Z",
			details: d{"event": "ring_timeout", "ring": "sdma0", "signaled_seq": 16060, "emitted_seq": 16062,
				"process": "", "tid": 0, "uptime_s": 2237.944235}},
		{kind: evidence.GPUHang, line: 3, gpu: "0000:0a:00.0", time: "2023-10-07T12:58:23Z",
			details: d{"event": "gpu_reset"}},
	}},
	{file: "2-rocm-userspace-fault/hsa-aperture-violation-callbackqueue-fortran.txt", want: []want{{
		kind: evidence.GPUPageFault, line: 1, pid: 5999, source: evidence.SourceLog,
		details: d{"event": "hsa_error", "status": "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION", "code": "0x29",
			"tid": "0x7f676e4c7640", "source": "rocdevice.cpp:2672",
			"message": "The agent attempted to access memory beyond the largest legal address."},
		absent: []string{"queue"},
	}}},
	{file: "2-rocm-userspace-fault/hsa-memory-access-fault-write-readonly-in-tqdm.txt", want: []want{{
		kind: evidence.GPUPageFault, line: 1, gpu: "node-3", addr: "0x709843600000", source: evidence.SourceLog,
		text:    "Memory access fault by GPU node-3 (Agent handle: 0x5a5c587a51c0) on address 0x709843600000. Reason: Write access to a read-only page.",
		details: d{"event": "memory_access_fault", "node": 3, "agent_handle": "0x5a5c587a51c0", "reason": "Write access to a read-only page."},
	}}},
	{file: "2-rocm-userspace-fault/hsa-status-error-memory-fault-old-rocdevice.txt", want: []want{{
		kind: evidence.GPUPageFault, line: 1, pid: 6856, source: evidence.SourceLog,
		details: d{"status": "HSA_STATUS_ERROR_MEMORY_FAULT", "code": "0x2b", "tid": "0x7fe7bb747700", "source": "rocdevice.cpp:2614"},
	}}},
	{file: "2-rocm-userspace-fault/ollama-docker-page-not-present-aborted.txt", want: []want{{
		kind: evidence.GPUPageFault, line: 1, gpu: "node-1", addr: "0x7fe05f439000", source: evidence.SourceLog,
		details: d{"node": 1, "agent_handle": "0x559ee9967590", "reason": "Page not present or supervisor privilege."},
	}}},
	// A PyTorch exception is program-log evidence, read by the log signatures, not here.
	{file: "2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt"},
	{file: "2-rocm-userspace-fault/vllm-worker-memory-access-fault-cudagraph-capture.txt", want: []want{{
		kind: evidence.GPUPageFault, line: 7, gpu: "node-5", addr: "0x7ec4dfe0e000", source: evidence.SourceLog,
		details: d{"agent_handle": "0x460e3a50", "reason": "Write access to a read-only page."},
	}}},

	// 3. NVIDIA Xid
	{file: "3-nvidia-xid/xid-catalog-meanings.txt"},
	{file: "3-nvidia-xid/xid119-gsp-rpc-timeout-h100-full-dump.txt", want: []want{
		{kind: evidence.GPUHardwareError, line: 3, pid: 2024380, gpu: "0000:9b:00.0", xid: 119, time: "2025-02-23T16:24:18Z",
			text: "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s",
			details: d{"vendor": "nvidia", "event": "xid", "pci": "0000:9b:00", "process": "nvidia-smi", "category": "firmware",
				"mnemonic": "GSP_RPC_TIMEOUT", "action": "RESET_GPU", "role": "cause", "catalogued": true,
				"rpc_function": "GSP_RM_ALLOC", "rpc_function_id": 103, "timeout": "6s",
				"gpu_uuid": "GPU-509665ad-b600-ac93-3616-d754b23d636d", "repeat": 3, "last_line": 40, "gsp_rate_limited": true}},
		{kind: evidence.GPUHardwareError, line: 42, pid: 1263500, gpu: "0000:9b:00.0", xid: 119, time: "2025-02-23T16:27:12Z",
			details: d{"process": "cache_mgr_main", "rpc_function": "GSP_RM_CONTROL"}},
		{kind: evidence.GPUHardwareError, line: 43, pid: 1240590, gpu: "0000:9b:00.0", xid: 119, time: "2025-02-23T16:30:13Z",
			details: d{"process": "gpud"}},
	}},
	{file: "3-nvidia-xid/xid120-gsp-exception-then-xid154-reset-required.txt", year: 2025, want: []want{
		{kind: evidence.GPUHardwareError, line: 1, gpu: "0000:01:00.0", xid: 120, time: "2025-03-29T15:38:59Z",
			details: d{"pc": "0xffffffff93003d42", "mnemonic": "GSP_ERROR",
				"message": "GSP kernel exception: store access page fault (cause:0xf) @ pc:0xffffffff93003d42, partition:4#0"}},
		{kind: evidence.GPUHardwareError, line: 2, gpu: "0000:01:00.0", xid: 154, time: "2025-03-29T15:38:59Z",
			details: d{"role": "info", "recovery_action": "GPU Reset Required", "recovery_action_code": "0x1",
				"previous_recovery_action": "None", "previous_recovery_action_code": "0x0"}},
	}},
	{file: "3-nvidia-xid/xid13-burst-then-xid43-pt_main_thread-dmesg-iso.txt", want: []want{
		{kind: evidence.GPUIllegalMemoryAccess, line: 1, gpu: "0000:38:00.0", xid: 13, time: "2025-01-21T04:41:44.283302Z",
			details: d{"repeat": 16, "last_line": 16, "role": "cause", "category": "app_fault",
				"location": "GPC 8, TPC 5, SM 1", "exception": "Multiple Warp Errors",
				"exceptions": []string{"Multiple Warp Errors", "Out Of Range Address"}},
			absent: []string{"process"}},
		{kind: evidence.GPUIllegalMemoryAccess, line: 17, pid: 2924364, gpu: "0000:38:00.0", xid: 43, time: "2025-01-21T04:41:44.287197Z",
			details: d{"process": "pt_main_thread", "channel": "00000008", "message": "Ch 00000008", "role": "consequence"}},
	}},
	{file: "3-nvidia-xid/xid13-xid109-pt_main_thread-dmesg-ctime.txt", want: []want{
		{kind: evidence.GPUIllegalMemoryAccess, line: 2, gpu: "0000:cb:00.0", xid: 13, time: "2024-08-30T11:43:09Z",
			details: d{"repeat": 3, "exception": "Illegal Instruction Parameter"}},
		{kind: evidence.GPUHang, line: 5, pid: 1797828, gpu: "0000:cb:00.0", xid: 109, time: "2024-08-30T11:43:14Z",
			details: d{"process": "pt_main_thread", "channel": "00000008", "error_string": "CTX SWITCH TIMEOUT", "info": "0x58005"}},
	}},
	{file: "3-nvidia-xid/xid145-149-nvlink5-kmsg-inputs.txt", want: []want{
		{kind: evidence.GPUHardwareError, line: 1, gpu: "0019:01:00.0", xid: 149,
			details: d{"unit": "NETIR", "severity": "Fatal", "xc": "XC0", "instance": "i0", "link": -1,
				"intrinfo": "0x000fe406", "error_status": "0x00000000", "category": "nvlink"}},
		{kind: evidence.GPUHardwareError, line: 2, gpu: "0000:00:00.0", xid: 149,
			details: d{"unit": "NETIR_LINK_EVT", "severity": "Fatal", "link": 0, "intrinfo": "0x025001c6"}},
		{kind: evidence.GPUHardwareError, line: 3, gpu: "0018:01:00.0", xid: 145,
			details: d{"unit": "RLW_RXPIPE", "severity": "Nonfatal", "link": 13, "intrinfo": "0x0409a0c2", "error_status": "0x00000008"}},
		{kind: evidence.GPUHardwareError, line: 4, pid: 1234, gpu: "0000:9b:00.0", xid: 94,
			details: d{"process": "python3", "contained": true, "message": "Contained ECC error"}},
	}},
	{file: "3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt", want: []want{
		{kind: evidence.GPUPageFault, line: 2, pid: 13332, gpu: "0000:0a:00.0", addr: "0x7f295b8c9000", xid: 31,
			details: d{"process": "cuda_plot_k32_v", "channel": "00000010", "engine": "CE2", "hub_client": "HUBCLIENT_CE0",
				"fault_type": "FAULT_PRIV_VIOLATION", "access_type": "ACCESS_TYPE_VIRT_READ",
				"gpu_uuid": "GPU-760d0170-b7c5-6817-9414-6cc7112645de", "uptime_s": 14328.198504}},
		{kind: evidence.GPUHardwareError, line: 3, gpu: "0000:0a:00.0", xid: 62,
			details: d{"mnemonic": "PMU_HALT_ERROR", "message": "2023b230 20238a3a 2023e8b6 2023eac4 2023ec3c 2023ea86 00000000 00000000"}},
		{kind: evidence.Unknown, line: 4, gpu: "0000:0a:00.0", xid: 45,
			details: d{"role": "consequence", "category": "cleanup", "repeat": 8, "last_line": 12,
				"messages": []string{"Ch 00000008", "Ch 00000009", "Ch 0000000a", "Ch 0000000b", "Ch 0000000c", "Ch 0000000d", "Ch 0000000e", "Ch 0000000f"}}},
	}},
	{file: "3-nvidia-xid/xid48-dbe-syslog-gpu-operator-TRUNCATED.txt", year: 2024, want: []want{{
		kind: evidence.GPUHardwareError, line: 1, gpu: "0000:07:00.0", xid: 48, time: "2024-12-02T10:43:35Z",
		details: d{"phys_addr": "0x7fdd60000", "uptime_s": 240314.528856, "category": "memory_ecc", "mnemonic": "ROBUST_CHANNEL_GPU_ECC_DBE"},
		absent:  []string{"process"},
	}}},
	{file: "3-nvidia-xid/xid63-row-remapper-new-row.txt", want: []want{{
		kind: evidence.GPUHardwareError, line: 1, pid: 1896, gpu: "0000:10:1c.0", xid: 63,
		details: d{"pci": "0000:10:1c", "role": "info", "message": "Row Remapper: New row marked for remapping, reset gpu to activate."},
		absent:  []string{"process"},
	}}},
	{file: "3-nvidia-xid/xid74-nvlink-fatal-7-registers.txt", want: []want{{
		kind: evidence.GPUHardwareError, line: 1, gpu: "0003:00:00.0", xid: 74,
		details: d{"link": 14, "registers": []string{"0x0", "0x0", "0x10000", "0x0", "0x0", "0x0", "0x0"}, "category": "nvlink"},
	}}},
	{file: "3-nvidia-xid/xid79-modal-gpu-health-wrapped.txt", want: []want{{
		kind: evidence.GPUHardwareError, line: 1, pid: 1101234, gpu: "0000:c6:00.0", xid: 79,
		text:    "NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus.",
		details: d{"process": "nvc:[driver]", "category": "pcie_bus", "action": "RESTART_BM"},
	}}},
	{file: "3-nvidia-xid/xid79-multiline-fallen-off-bus-no-xid-number.txt", want: []want{{
		kind: evidence.GPUHardwareError, line: 1, gpu: "0000:b3:00.0", xid: 79,
		text:    "NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus and is not responding to commands.",
		details: d{"event": "fallen_off_bus", "pci_id": "10de:26b5", "xid_from_text": true, "uptime_s": 1843.308145},
	}}},
	{file: "3-nvidia-xid/xid94-95-format-from-nvidia-driver-source.txt", want: []want{
		{kind: evidence.GPUHardwareError, line: 3, pid: 7194, gpu: "0000:01:00.0", xid: 94,
			details: d{"gpu_instance": "05", "contained": true, "unit": "CE User Channel (0x9)", "reset_required": false,
				"drain_reset_required": false, "message": "Contained: CE User Channel (0x9). RST: No, D-RST: No"}},
		{kind: evidence.GPUHardwareError, line: 6, pid: 7062, gpu: "0000:01:00.0", xid: 94,
			details: d{"contained": true}, absent: []string{"gpu_instance"}},
		{kind: evidence.GPUHardwareError, line: 9, pid: 7062, gpu: "0000:01:00.0", xid: 95,
			details: d{"contained": false, "unit": "LTC TAG (0x2, 0x1)", "reset_required": true, "drain_reset_required": false,
				"action": "RESET_GPU"}},
	}},

	// 4. OOM killer. cgroup files and kubectl output are read by other
	// collectors; here they must produce nothing.
	{file: "4-oom-killer/cgroupv2-memory-events-max-hits-no-oom-kill.txt"},
	{file: "4-oom-killer/cgroupv2-memory-events-oom-kill-1-five-keys.txt"},
	{file: "4-oom-killer/k8s-oomkilled-describe-pod-last-state.txt"},
	{file: "4-oom-killer/k8s-oomkilled-get-pods-status-column.txt"},
	{file: "4-oom-killer/global-oom-perl-dmesg-iso-grep.txt", want: []want{{
		kind: evidence.HostOOM, line: 1, pid: 1440763, time: "2024-04-29T12:55:41.678628Z",
		text: "Out of memory: Killed process 1440763 (perl) total-vm:87033376kB",
		details: d{"event": "oom_kill", "victim": "perl", "scope": "global", "constraint": "CONSTRAINT_NONE", "global_oom": true,
			"trigger": "pool", "gfp_mask": "0x6200ca(GFP_HIGHUSER_MOVABLE)", "order": 0, "total_vm_kb": 87033376,
			"anon_rss_kb": 60356340, "file_rss_kb": 0, "shmem_rss_kb": 0, "pgtables_kb": 169956, "uid": 21417,
			"oom_score_adj": 0, "task_memcg": "/user.slice/user-21417.slice/user@21417.service",
			"oom_reaper": "reaped", "oom_reaper_line": 6, "kill_line": 5},
	}}},
	{file: "4-oom-killer/global-oom-python-then-next-invocation-calltrace.txt", want: []want{
		{kind: evidence.HostOOM, line: 1, pid: 698405,
			details: d{"victim": "python", "uid": 1000, "total_vm_kb": 49978204, "anon_rss_kb": 12918388, "scope": "global",
				"task_memcg": "/user.slice/user-1000.slice/user@1000.service", "oom_reaper": "reaped"},
			absent: []string{"trigger"}},
		{kind: evidence.HostOOM, line: 4,
			text: "sunloginclient invoked oom-killer",
			details: d{"event": "oom_invoked", "trigger": "sunloginclient", "trigger_pid": 940,
				"gfp_mask": "0x100cca(GFP_HIGHUSER_MOVABLE)", "uptime_s": 448212.100902},
			absent: []string{"victim", "oom_reaper"}},
	}},
	{file: "4-oom-killer/memcg-oom-k8s-kubelet-constraint-memcg-uvicorn.txt", want: []want{{
		kind: evidence.HostOOM, line: 4, pid: 32550, time: "2026-08-21T22:26:52Z",
		text: "oom-kill:constraint=CONSTRAINT_MEMCG",
		details: d{"victim": "uvicorn", "uid": 525287, "constraint": "CONSTRAINT_MEMCG", "scope": "memcg",
			"pod_uid":      "17d1d0b1-bbeb-4252-a45c-c9f426d1cb34",
			"container_id": "799855c3e9e23ea07677c581b96f444dffb0932d7a907973bb08a8391803c559",
			"memcg":        "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-11017d9ed95ddc35b24735fce395331554737a0676defb9930e07b0ee6d802e5.scope/container/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod17d1d0b1_bbeb_4252_a45c_c9f426d1cb34.slice"},
		absent: []string{"kill_line"},
	}}},
	{file: "4-oom-killer/memcg-oom-openshift-crio-with-xid119-context.txt", want: []want{
		{kind: evidence.GPUHardwareError, line: 1, pid: 123417, gpu: "0000:61:00.0", xid: 119,
			details: d{"process": "nv-hostengine", "repeat": 2, "gsp_rate_limited": true}},
		{kind: evidence.GPUHardwareError, line: 4, gpu: "0000:41:00.0",
			details: d{"event": "rm_init_adapter_failed", "code": "0x62:0x40:2404", "repeat": 4}},
		{kind: evidence.GPUHardwareError, line: 12, pid: 126121, gpu: "0000:61:00.0", xid: 119,
			details: d{"process": "nvidia-smi"}},
		{kind: evidence.HostOOM, line: 13, pid: 184260,
			text: "Memory cgroup out of memory: Killed process 184260 (mimir)",
			details: d{"victim": "mimir", "uid": 1001240000, "total_vm_kb": 2462120, "anon_rss_kb": 900908, "oom_score_adj": 999,
				"constraint": "CONSTRAINT_MEMCG", "scope": "memcg", "trigger": "mimir", "trigger_pid": 128187,
				"gfp_mask": "0x6000c0(GFP_KERNEL)", "mems_allowed": "0-1", "pod_uid": "58dc1221-d430-496e-951d-e8cb23caaead",
				"container_id": "8371caad8cc369f16c55ce039fbbe0e4fd1be88e72f119bce94ccd5d07d152fe",
				"oom_reaper":   "reaped", "kill_line": 30}},
	}},

	// 5. userspace crashes
	{file: "5-userspace-crash-dmesg/gpf-libc-crashloop-interleaved-noise.txt", want: gpfLoop()},
	{file: "5-userspace-crash-dmesg/gpf-old-kernel-wording-no-fault-word.txt", want: []want{{
		kind: evidence.NativeCrash, line: 1, pid: 3786,
		text: "traps: conky[3786] general protection ip:30e2c4ecc0",
		details: d{"event": "general_protection", "process": "conky", "ip": "30e2c4ecc0", "sp": "7fff40b4a120", "error": "0",
			"object": "libc-2.23.so", "base": "30e2c00000", "size": "1c0000", "offset": "0x4ecc0"},
	}}},
	{file: "5-userspace-crash-dmesg/python2-segfault-libc-with-code-line.txt", want: []want{{
		kind: evidence.NativeCrash, line: 1, pid: 4598, addr: "0xda84cf8",
		details: d{"event": "segfault", "process": "python2", "ip": "00007f7b2cbac94d", "sp": "00007ffe4e250b60", "error": "4",
			"error_decoded": "user-mode read, page not present", "object": "libc-2.27.so", "base": "7f7b2cb15000",
			"size": "1e7000", "offset": "0x9794d", "uptime_s": 2013042.849886},
	}}},
	{file: "5-userspace-crash-dmesg/trap-divide-error-journalctl.txt", year: 2025, want: []want{
		{kind: evidence.NativeCrash, line: 1, pid: 3239587, time: "2025-05-02T06:09:05Z",
			details: d{"event": "trap", "trap": "divide error", "process": "adaptivemmd", "error": "0", "object": "adaptivemmd",
				"ip": "57d6038f7046", "offset": "0x5046"}},
		{kind: evidence.NativeCrash, line: 3, pid: 3243499, time: "2025-05-03T03:49:15Z",
			details: d{"trap": "divide error", "object": "adaptivemmd"}},
	}},
}

func gpfLoop() []want {
	var ws []want
	for i, pid := range []int{8542, 9249, 10349, 11586, 13413, 16510, 22956} {
		line := []int{1, 2, 6, 7, 8, 9, 10}[i]
		ws = append(ws, want{kind: evidence.NativeCrash, line: line, pid: pid,
			details: d{"event": "general_protection", "process": "pcm-sensor-serv", "error": "0",
				"object": "libc-2.32.so", "offset": "0x967"}})
	}
	return ws
}

func TestCorpus(t *testing.T) {
	dir := corpusDir(t)
	for _, c := range corpusCases {
		t.Run(c.file, func(t *testing.T) {
			body := corpusBody(t, dir, c.file)
			got, err := ParseReader(strings.NewReader(body), c.year)
			if err != nil {
				t.Fatal(err)
			}
			checkFindings(t, got, c.want)

			// Parse over SplitPrefix lines must agree with ParseReader.
			var lines []Line
			for i, raw := range strings.SplitAfter(body, "\n") {
				if raw != "" {
					lines = append(lines, SplitPrefix(raw, i+1, c.year))
				}
			}
			if a, b := jsonOf(t, got), jsonOf(t, Parse(lines)); a != b {
				t.Errorf("Parse(SplitPrefix) differs from ParseReader:\n%s\n%s", b, a)
			}
		})
	}
}

// TestCorpusCovered keeps the table in step with the corpus: every kernel-log
// category file has expectations, and program logs and tool output yield no
// kernel findings.
func TestCorpusCovered(t *testing.T) {
	dir := corpusDir(t)
	listed := map[string]bool{}
	for _, c := range corpusCases {
		listed[c.file] = true
	}
	files, err := filepath.Glob(filepath.Join(dir, "[1-7]-*", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "6-") || strings.HasPrefix(rel, "7-") {
			got, err := ParseReader(strings.NewReader(corpusBody(t, dir, rel)), 2025)
			if err != nil || len(got) != 0 {
				t.Errorf("%s: want no kernel findings, got %d (%v): %s", rel, len(got), err, jsonOf(t, got))
			}
			continue
		}
		if !listed[rel] {
			t.Errorf("%s has no expectations in corpusCases", rel)
		}
	}
}

func checkFindings(t *testing.T, got []evidence.Finding, ws []want) {
	t.Helper()
	if len(got) != len(ws) {
		t.Fatalf("got %d findings, want %d:\n%s", len(got), len(ws), jsonOf(t, got))
	}
	for i, w := range ws {
		g := got[i]
		src := w.source
		if src == "" {
			src = evidence.SourceDmesg
		}
		gt := ""
		if g.Time != nil {
			gt = g.Time.Format(time.RFC3339Nano)
		}
		for _, c := range []struct {
			name      string
			got, want any
		}{
			{"kind", g.Kind, w.kind}, {"line", g.Line, w.line}, {"pid", g.Pid, w.pid}, {"gpu", g.GPU, w.gpu},
			{"address", g.Address, w.addr}, {"xid", g.Xid, w.xid}, {"source", g.Source, src}, {"time", gt, w.time},
		} {
			if c.got != c.want {
				t.Errorf("finding %d: %s = %v, want %v", i, c.name, c.got, c.want)
			}
		}
		if !strings.HasPrefix(g.Text, w.text) {
			t.Errorf("finding %d: text = %q, want prefix %q", i, g.Text, w.text)
		}
		for k, v := range w.details {
			if gv, ok := g.Details[k]; !ok || fmt.Sprint(gv) != fmt.Sprint(v) {
				t.Errorf("finding %d: details[%q] = %v (set %v), want %v", i, k, gv, ok, v)
			}
		}
		for _, k := range w.absent {
			if v, ok := g.Details[k]; ok {
				t.Errorf("finding %d: details[%q] = %v, want unset", i, k, v)
			}
		}
	}
}

func jsonOf(t testing.TB, v any) string {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
