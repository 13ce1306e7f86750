package kernlog

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/kcrash/kcrash/evidence"
)

func parseText(t *testing.T, text string) []evidence.Finding {
	t.Helper()
	fs, err := ParseReader(strings.NewReader(text), 2025)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// Shapes the corpus lacks but kernels print; written from the kernel and
// driver sources' format strings.
func TestParseShapes(t *testing.T) {
	cases := []struct {
		name string
		text string
		want []want
	}{
		{"fallen off bus in one kmsg record",
			`6,901,1843308145,-;NVRM: The NVIDIA GPU 0000:b3:00.0\x0aNVRM: (PCI ID: 10de:26b5) installed in this system has\x0aNVRM: fallen off the bus and is not responding to commands.` + "\n",
			[]want{{kind: evidence.GPUHardwareError, line: 1, gpu: "0000:b3:00.0", xid: 79,
				text:    "NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus",
				details: d{"event": "fallen_off_bus", "pci_id": "10de:26b5", "uptime_s": 1843.308145}}}},
		{"fallen off bus single line",
			"[ 10.000000] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n",
			[]want{{kind: evidence.GPUHardwareError, line: 1, gpu: "0000:3b:00.0", xid: 79}}},
		{"unsupported GPU notice is not a fault",
			"[ 1.0] NVRM: The NVIDIA GPU 0000:01:00.0\n          NVRM: (PCI ID: 10de:1b80) installed in this system is\n          NVRM: not supported by the 580.65 NVIDIA driver release.\n",
			nil},
		{"Xid newer than the catalog",
			"[ 5.0] NVRM: Xid (PCI:0000:01:00): 999, pid=42, name=python3, Something new\n",
			[]want{{kind: evidence.GPUHardwareError, line: 1, pid: 42, gpu: "0000:01:00.0", xid: 999,
				details: d{"catalogued": false, "role": "unknown", "message": "Something new"}, absent: []string{"mnemonic"}}}},
		{"Xid without PCI: and without pid",
			"[ 5.0] NVRM: Xid (0000:02:00): 8, Channel 00000001\n",
			[]want{{kind: evidence.GPUHang, line: 1, gpu: "0000:02:00.0", xid: 8, details: d{"pci": "0000:02:00"}}}},
		{"legacy OOM with sacrifice child",
			"[ 1.0] Out of memory: Kill process 4242 (python3) score 912 or sacrifice child\n" +
				"[ 1.1] Killed process 4242 (python3) total-vm:1000kB, anon-rss:900kB, file-rss:0kB, shmem-rss:0kB\n",
			[]want{{kind: evidence.HostOOM, line: 1, pid: 4242, text: "Killed process 4242",
				details: d{"victim": "python3", "oom_score": 912, "anon_rss_kb": 900, "scope": "global", "kill_line": 2}}}},
		{"memcg usage lines and comm with spaces",
			"[ 1.0] Web Content invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n" +
				"[ 1.0] memory: usage 2097152kB, limit 2097152kB, failcnt 17\n" +
				"[ 1.1] Memory cgroup out of memory: Killed process 77 (Web Content) total-vm:5kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0\n",
			[]want{{kind: evidence.HostOOM, line: 1, pid: 77,
				details: d{"victim": "Web Content", "trigger": "Web Content", "scope": "memcg", "memcg_usage_kb": 2097152,
					"memcg_limit_kb": 2097152, "memcg_failcnt": 17}}}},
		{"only the reaper line survived",
			"[ 9.0] oom_reaper: reaped process 555 (vllm), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB\n",
			[]want{{kind: evidence.HostOOM, line: 1, pid: 555, details: d{"victim": "vllm", "oom_reaper": "reaped"}}}},
		{"constraint with multi-node mems_allowed",
			"oom-kill:constraint=CONSTRAINT_CPUSET,nodemask=(null),cpuset=/job,mems_allowed=0,2,task_memcg=/kubepods/burstable/pod0f7b3c1e-1234-4a6b-9c2d-0123456789ab/" +
				strings.Repeat("ab", 32) + ",task=python,pid=9,uid=0\n",
			[]want{{kind: evidence.HostOOM, line: 1, pid: 9,
				details: d{"mems_allowed": "0,2", "scope": "cpuset", "pod_uid": "0f7b3c1e-1234-4a6b-9c2d-0123456789ab",
					"container_id": strings.Repeat("ab", 32)}}}},
		{"amdgpu RAS",
			"[ 3.0] amdgpu 0000:03:00.0: amdgpu: 2 uncorrectable hardware errors detected in umc block\n",
			[]want{{kind: evidence.GPUHardwareError, line: 1, gpu: "0000:03:00.0", details: d{"count": 2, "block": "umc"}}}},
		{"amdgpu reset outcome",
			"[ 3.0] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!\n[ 3.1] amdgpu 0000:03:00.0: amdgpu: VRAM is lost due to GPU reset!\n" +
				"[ 3.2] amdgpu 0000:03:00.0: amdgpu: GPU reset(2) succeeded!\n",
			[]want{{kind: evidence.GPUHang, line: 1, gpu: "0000:03:00.0", details: d{"vram_lost": true, "reset_result": "succeeded"}}}},
		{"legacy amdgpu VM fault",
			"[ 3.0] amdgpu 0000:01:00.0: GPU fault detected: 146 0x0c80440c for process glxgears pid 1234 thread glxgears:cs0 pid 1240\n" +
				"[ 3.0] amdgpu 0000:01:00.0:   VM_CONTEXT1_PROTECTION_FAULT_ADDR   0x00001234\n" +
				"[ 3.0] amdgpu 0000:01:00.0:   VM_CONTEXT1_PROTECTION_FAULT_STATUS 0x0C04400C\n" +
				"[ 3.0] amdgpu 0000:01:00.0: VM fault (0x0c, vmid 6, pasid 32768) at page 4660, read from 'TC0' (0x54433000) (68)\n",
			[]want{{kind: evidence.GPUPageFault, line: 1, pid: 1234, gpu: "0000:01:00.0", addr: "0x1234000",
				details: d{"src_id": "146", "vmid": 6, "pasid": 32768, "client": "TC0", "fault_addr_register": "0x00001234",
					"status_register_value": "0x0C04400C", "thread": "glxgears:cs0"}}}},
		{"ROCr GPU hang exception",
			"HW Exception by GPU node-2 (Agent handle: 0x55d3d1f6a040) reason :GPU Hang\n",
			[]want{{kind: evidence.GPUHang, line: 1, gpu: "node-2", source: evidence.SourceLog, details: d{"reason": "GPU Hang", "node": 2}}}},
		{"HIP queue abort, newer shape",
			":0:rocdevice.cpp            :2982: 1143003422 us: [pid:3148 tid:0x7f8df4bff640] Callback: Queue 0x7f8dd4600000 aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016\n",
			[]want{{kind: evidence.GPUIllegalMemoryAccess, line: 1, pid: 3148, source: evidence.SourceLog,
				details: d{"status": "HSA_STATUS_ERROR_EXCEPTION", "queue": "0x7f8dd4600000", "code": "0x1016", "source": "rocdevice.cpp:2982"}}}},
		{"segfault, 6.x kernel shape",
			"[ 7.0] pt_main_thread[991]: segfault at 0 ip 00007f00deadbeef sp 00007ffc00000000 error 14 in libtorch_cuda.so[19b9a,7f00de000000+2000000] likely on CPU 3 (core 3, socket 0)\n" +
				"[ 7.0] Code: Unable to access opcode bytes at 0x7f00deadbec5.\n",
			[]want{{kind: evidence.NativeCrash, line: 1, pid: 991, addr: "0x0",
				details: d{"error_decoded": "user-mode instruction fetch, page not present", "object": "libtorch_cuda.so",
					"base": "7f00de000000", "size": "2000000", "offset": "0xadbeef", "cpu": 3,
					"code": "Unable to access opcode bytes at 0x7f00deadbec5."}}}},
		{"trap invalid opcode",
			"[ 7.0] traps: python3[12] trap invalid opcode ip:7f0000001000 sp:7ffd00000000 error:0 in libc.so.6[7f0000000000+195000]\n",
			[]want{{kind: evidence.NativeCrash, line: 1, pid: 12, details: d{"event": "trap", "trap": "invalid opcode", "offset": "0x1000"}}}},
		{"arm64 unhandled fault",
			"[ 7.0] python3[4321]: unhandled level 3 translation fault (11) at 0x0000000000000008, esr 0x0000000092000007, in libc.so.6[ffff8c800000+1a0000]\n",
			[]want{{kind: evidence.NativeCrash, line: 1, pid: 4321, addr: "0x0000000000000008",
				details: d{"event": "unhandled_fault", "signal": 11, "esr": "0x0000000092000007", "object": "libc.so.6"}}}},
		{"systemd line is not a crash",
			"[ 7.0] systemd[1]: Started Session 3 of user root.\n",
			nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkFindings(t, parseText(t, c.text), c.want)
		})
	}
}

// An Xid burst and a fault storm must collapse, not flood the bundle.
func TestCoalesceBurst(t *testing.T) {
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "[%d.000000] NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC %d, TPC 1, SM 1): Out Of Range Address\n", i+1, i%12)
	}
	fs := parseText(t, b.String())
	if len(fs) != 1 {
		t.Fatalf("got %d findings, want 1", len(fs))
	}
	if fs[0].Details["repeat"] != int64(5000) || fs[0].Details["last_line"] != int64(5000) {
		t.Errorf("repeat/last_line = %v/%v", fs[0].Details["repeat"], fs[0].Details["last_line"])
	}
	if msgs := fs[0].Details["messages"].([]string); len(msgs) != 8 {
		t.Errorf("messages kept = %d, want cap 8", len(msgs))
	}
}

func TestFindingsBounded(t *testing.T) {
	var b strings.Builder
	for i := range MaxFindings + 50 {
		fmt.Fprintf(&b, "p[%d]: segfault at 0 ip %x sp 0 error 4\n", i+1, i)
	}
	fs := parseText(t, b.String())
	if len(fs) != MaxFindings {
		t.Fatalf("got %d findings, want the cap %d", len(fs), MaxFindings)
	}
	if fs[len(fs)-1].Details["findings_dropped"] != int64(50) {
		t.Errorf("findings_dropped = %v", fs[len(fs)-1].Details["findings_dropped"])
	}
}

// A 10 MB line of garbage is cut, parsed quickly, and does not hide the
// kernel line after it.
func TestHugeGarbageLine(t *testing.T) {
	garbage := strings.Repeat("NVRM: Xid (amdgpu [gfxhub] page fault (src_id: oom-kill:constraint=traps: x[", 10<<20/72)
	text := garbage + "\n[ 2.0] NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
	start := time.Now()
	fs := parseText(t, text)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if len(fs) == 0 || fs[len(fs)-1].Xid != 79 || fs[len(fs)-1].Line != 2 {
		t.Fatalf("line after the garbage not found: %s", jsonOf(t, fs))
	}
	for _, f := range fs {
		if len(f.Text) > maxTextBytes+len("…") {
			t.Errorf("finding text of %d bytes", len(f.Text))
		}
	}

	// The same line handed straight to Parse and SplitPrefix.
	start = time.Now()
	l := SplitPrefix(garbage, 1, 2025)
	_ = Parse([]Line{l, {N: 2, Text: garbage, Raw: garbage}})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Parse of a 10 MB line took %v", d)
	}
}

// A line cut at MaxLineBytes keeps its start; the next line is unharmed.
func TestLongLineCut(t *testing.T) {
	xid := "[ 1.0] NVRM: Xid (PCI:0000:01:00): 31, pid=7, name=x, " + strings.Repeat("A", 3*MaxLineBytes) + "\n"
	fs := parseText(t, xid+"[ 2.0] python[8]: segfault at 10 ip 1 sp 2 error 6\n")
	if len(fs) != 2 || fs[0].Xid != 31 || fs[0].Pid != 7 || fs[1].Pid != 8 || fs[1].Line != 2 {
		t.Fatalf("got %s", jsonOf(t, fs))
	}
}

func TestParseReaderCRLFAndNoFinalNewline(t *testing.T) {
	fs := parseText(t, "[ 1.0] noise\r\n[ 2.5] python2[4598]: segfault at da84cf8 ip 1 sp 2 error 4")
	if len(fs) != 1 || fs[0].Line != 2 || fs[0].Pid != 4598 || fs[0].Text != "python2[4598]: segfault at da84cf8 ip 1 sp 2 error 4" {
		t.Fatalf("got %s", jsonOf(t, fs))
	}
}

func TestParseReaderSmallReads(t *testing.T) {
	dir := corpusDir(t)
	body := corpusBody(t, dir, "1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt")
	a := parseText(t, body)
	b, err := ParseReader(iotest.OneByteReader(strings.NewReader(body)), 2025)
	if err != nil || jsonOf(t, a) != jsonOf(t, b) {
		t.Fatalf("one-byte reads differ (err %v)", err)
	}
}

// A read error still returns what was found before it.
func TestParseReaderError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("[ 1.0] python2[1]: segfault at 0 ip 1 sp 2 error 4\n"), iotest.ErrReader(boom))
	fs, err := ParseReader(r, 2025)
	if !errors.Is(err, boom) || len(fs) != 1 || fs[0].Pid != 1 {
		t.Fatalf("got %d findings, err %v", len(fs), err)
	}
}

// Findings must not keep the reader's buffers alive: every string is a copy.
func TestFindingsAreIndependentOfInput(t *testing.T) {
	line := []byte("[ 1.0] NVRM: Xid (PCI:0000:01:00): 31, pid=7, name=x, MMU Fault: ENGINE CE2 HUBCLIENT_CE0 faulted @ 0x1_000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n")
	fs, err := ParseReader(strings.NewReader(string(line)), 2025)
	if err != nil || len(fs) != 1 {
		t.Fatal(err)
	}
	if fs[0].Details["engine"] != "CE2" || fs[0].Address != "0x1000" {
		t.Fatalf("got %s", jsonOf(t, fs))
	}
}

func TestXidCatalog(t *testing.T) {
	for code := 1; code <= 172; code++ {
		x, ok := XidInfo(code)
		if !ok {
			t.Errorf("Xid %d missing", code)
			continue
		}
		if x.Code != code || x.Mnemonic == "" || x.Description == "" || x.Category == "" {
			t.Errorf("Xid %d incomplete: %+v", code, x)
		}
		if !slices.Contains(evidence.Kinds, x.Kind) {
			t.Errorf("Xid %d: kind %q is not a SPEC kind", code, x.Kind)
		}
		if !slices.Contains([]string{RoleCause, RoleConsequence, RoleInfo, RoleUnknown}, x.Role) {
			t.Errorf("Xid %d: role %q", code, x.Role)
		}
	}
	if _, ok := XidInfo(999); ok {
		t.Error("Xid 999 should be unknown")
	}
	for code, kind := range map[int]evidence.Kind{
		13: evidence.GPUIllegalMemoryAccess, 43: evidence.GPUIllegalMemoryAccess, 31: evidence.GPUPageFault,
		8: evidence.GPUHang, 109: evidence.GPUHang, 48: evidence.GPUHardwareError, 63: evidence.GPUHardwareError,
		64: evidence.GPUHardwareError, 74: evidence.GPUHardwareError, 79: evidence.GPUHardwareError,
		94: evidence.GPUHardwareError, 95: evidence.GPUHardwareError, 119: evidence.GPUHardwareError,
		120: evidence.GPUHardwareError, 149: evidence.GPUHardwareError,
	} {
		if x, _ := XidInfo(code); x.Kind != kind {
			t.Errorf("Xid %d: kind %q, want %q", code, x.Kind, kind)
		}
	}
}

// TestXidCatalogMatchesCorpus keeps configs/xid.yaml in step with the
// project's reference copy of NVIDIA's catalog.
func TestXidCatalogMatchesCorpus(t *testing.T) {
	dir := corpusDir(t)
	body := corpusBody(t, dir, "3-nvidia-xid/xid-catalog-meanings.txt")
	n := 0
	for line := range strings.Lines(body) {
		f := strings.Split(strings.TrimSpace(line), " | ")
		if len(f) != 5 {
			continue
		}
		n++
		var code int
		if _, err := fmt.Sscan(strings.TrimSpace(f[0]), &code); err != nil {
			t.Fatalf("bad line %q", line)
		}
		x, ok := XidInfo(code)
		if !ok {
			t.Errorf("Xid %d of the corpus catalog missing from configs/xid.yaml", code)
			continue
		}
		got := []string{x.Mnemonic, x.Description, x.Action, x.Meaning}
		if !slices.Equal(got, f[1:]) {
			t.Errorf("Xid %d differs:\n yaml   %q\n corpus %q", code, got, f[1:])
		}
	}
	if n < 15 {
		t.Fatalf("read only %d catalog lines", n)
	}
}

func TestParseRawOnlyLines(t *testing.T) {
	fs := Parse([]Line{{N: 4, Raw: "[ 1.500000] python2[1]: segfault at 0 ip 1 sp 2 error 4\n"}})
	checkFindings(t, fs, []want{{kind: evidence.NativeCrash, line: 4, pid: 1, addr: "0x0", details: d{"uptime_s": 1.5}}})
}
