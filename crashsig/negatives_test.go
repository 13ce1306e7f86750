package crashsig

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// replacer applies regexp → replacement pairs in order: how a variant of a
// real log is made, as the same bug would print on another node or run.
func vary(s string, pairs ...string) string {
	for i := 0; i < len(pairs); i += 2 {
		s = regexp.MustCompile(pairs[i]).ReplaceAllString(s, pairs[i+1])
	}
	return s
}

func kapiLog(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../kernelapi/testdata/7b-level3-shape-jump.log")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// syzbot's lesson: one bug printed with other addresses, pids, GPUs, shapes,
// install paths or rank prefixes is one bucket.
func TestOneBugOneBucket(t *testing.T) {
	amd := corpusText(t, "1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt")
	xid31 := corpusText(t, "3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt")
	sgl := corpusText(t, "6-program-log/sglang-device-side-assert-logits-processor.txt")
	hip := corpusText(t, "2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	kapi := kapiLog(t)
	for _, c := range []struct {
		name         string
		a, b         string
		kapiA, kapiB string
	}{
		{"amdgpu fault: other pid, pasid, vmid, address, PCI slot, uptime", amd, vary(amd,
			`pid 12924`, "pid 4711", `pasid:32769`, "pasid:32790", `vmid:3`, "vmid:8",
			`0x0000ae857061`, "0x00007f12345", `0000:c6:00\.0`, "0000:0e:00.0", `\[ 4778\.`, "[81234."), "", ""},
		{"amdgpu fault: other engine instance and hub number", amd, vary(amd, `gfxhub0`, "gfxhub1"), "", ""},
		{"amdgpu fault in one call: other shapes", amd, amd, kapi, vary(kapi, `shape=\((\d+), (\d+)\)`, "shape=(288, 8192)")},
		{"xid 31: other pid, GPU, address, channel", xid31, vary(xid31,
			`pid=13332`, "pid=99", `0000:0a:00`, "0000:9b:00", `0x7f29_5b8c9000`, "0x7f11_00000000", `Ch 00000010`, "Ch 00000018",
			`GPU-760d0170-b7c5-6817-9414-6cc7112645de`, "GPU-11111111-2222-3333-4444-555555555555"), "", ""},
		{"python traceback: other install path and line numbers", sgl, vary(sgl,
			`/data/redacted/py_env/sglang/lib/python3\.10/site-packages`, "/opt/venv/lib/python3.12/site-packages", `line \d+`, "line 999"), "", ""},
		{"python traceback: rank prefixes", hip, prefixLines(hip, "[rank3]: "), "", ""},
		{"python traceback: home directory of another user", hip, vary(hip, `/home/zeuss194/COMFY`, "/home/alice/work"), "", ""},
	} {
		if c.a+c.kapiA == c.b+c.kapiB {
			t.Fatalf("%s: the variant is the original", c.name)
		}
		a, b := sigOf(t, "a.log", c.a, c.kapiA), sigOf(t, "b.log", c.b, c.kapiB)
		if a.Fine != b.Fine || a.Coarse != b.Coarse {
			t.Errorf("%s: two buckets\n a: %s\n b: %s", c.name, a.Key, b.Key)
		}
		if a.Key == "kind=unknown" {
			t.Errorf("%s: the log was not recognised (%s)", c.name, a.Title)
		}
	}
}

func prefixLines(s, p string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		if lines[i] != "" {
			lines[i] = p + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// Different faults stay apart at the fine level, even in one call, while
// the coarse key (fault class in that call) may join them.
func TestDifferentFaultsApart(t *testing.T) {
	amd := corpusText(t, "1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt")
	xid31 := corpusText(t, "3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt")
	xid31 = xid31[:strings.Index(xid31, "Xid (PCI:0000:0a:00): 62")] // the MMU fault alone, without the PMU halt
	xid31 = xid31[:strings.LastIndex(xid31, "\n")+1]
	kapi := kapiLog(t)
	for _, c := range []struct {
		name        string
		a, b        string
		kapi        string
		sameCoarse  bool
		otherCoarse bool
	}{
		{"amdgpu: permission fault vs mapping error, same call", amd,
			vary(amd, `PERMISSION_FAULTS: 0x3`, "PERMISSION_FAULTS: 0x0", `MAPPING_ERROR: 0x0`, "MAPPING_ERROR: 0x1"), kapi, true, false},
		{"amdgpu: read vs write, same call", amd, vary(amd, `RW: 0x0`, "RW: 0x1"), kapi, true, false},
		{"amdgpu: TCP vs SDMA client", amd, vary(amd, `client ID: TCP \(0x8\)`, "client ID: SDMA0 (0x3)"), "", true, false},
		{"xid 31: privilege violation vs PDE fault", xid31, vary(xid31, `FAULT_PRIV_VIOLATION`, "FAULT_PDE"), "", true, false},
		{"xid 31 vs xid 13 in one job", xid31, vary(xid31, `\): 31, `, "): 13, ", `Ch 00000010, intr 00000000. MMU Fault: .*`, "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"), "", false, true},
	} {
		if c.a == c.b {
			t.Fatalf("%s: the variant is the original", c.name)
		}
		a, b := sigOf(t, "a.log", c.a, c.kapi), sigOf(t, "b.log", c.b, c.kapi)
		if a.Fine == b.Fine {
			t.Errorf("%s: one fine bucket for two faults: %s", c.name, a.Key)
		}
		if c.sameCoarse && a.Coarse != b.Coarse {
			t.Errorf("%s: coarse differs\n a: %s\n b: %s", c.name, a.Key, b.Key)
		}
		if c.otherCoarse && a.Coarse == b.Coarse {
			t.Errorf("%s: one coarse bucket\n a: %s\n b: %s", c.name, a.Key, b.Key)
		}
		if c.kapi != "" && !strings.Contains(a.Key, "api=sglang.quant_method.Fp8LinearMethod.apply") {
			t.Errorf("%s: the suspect call is not in the key: %s", c.name, a.Key)
		}
	}
}

// Cause rules win over the stack: a GPU that fell off the bus is one bucket
// whatever the program was doing, and it is hardware by itself.
func TestCauseRulesWin(t *testing.T) {
	bus := corpusText(t, "3-nvidia-xid/xid79-modal-gpu-health-wrapped.txt")
	hip := corpusText(t, "2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	a := sigOf(t, "a.log", bus, "")
	b := sigOf(t, "b.log", hip+"\n"+bus, kapiLog(t))
	if a.Fine != b.Fine || a.Class != ClassHardware || !strings.HasPrefix(a.Title, "gpu-fell-off-bus") {
		t.Fatalf("fell off the bus:\n a: %+v\n b: %+v", a, b)
	}
	other := sigOf(t, "c.log", corpusText(t, "3-nvidia-xid/xid79-multiline-fallen-off-bus-no-xid-number.txt"), "")
	if other.Fine != a.Fine {
		t.Fatalf("Xid 79 without its number is another bucket: %s vs %s", other.Key, a.Key)
	}
	ecc := sigOf(t, "d.log", corpusText(t, "3-nvidia-xid/xid48-dbe-syslog-gpu-operator-TRUNCATED.txt"), "")
	if ecc.Class != ClassHardware || ecc.Fine == a.Fine {
		t.Fatalf("Xid 48: %+v", ecc)
	}
	soft := sigOf(t, "e.log", hip, "")
	if soft.Class != "" {
		t.Fatalf("an illegal address is not hardware by itself: %+v", soft)
	}
}
