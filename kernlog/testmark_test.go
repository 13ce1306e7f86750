package kernlog

import (
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
)

// A kernel log as `dmesg -x` prints it after the test suite ran on a host:
// a device-wide Xid 79 record of three lines marked on every line, the same
// marked on its first line only, and an amdgpu fault block, all written by
// kcrash tests, between two real lines.
const markedLog = `[  100.000001] NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception
[  200.000001] kcrash-test[t1]: NVRM: The NVIDIA GPU 0000:b3:00.0
               kcrash-test[t1]: NVRM: (PCI ID: 10de:26b5) installed in this system has
               kcrash-test[t1]: NVRM: fallen off the bus and is not responding to commands.
[  250.000001] kcrash-test[t3]: NVRM: The NVIDIA GPU 0000:b4:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[  200.000002] kcrash-test[t2]: amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)
[  200.000003] kcrash-test[t2]: amdgpu 0000:c6:00.0: amdgpu:  for process pt_main_thread pid 12924 thread pt_main_thread pid 12924)
[  200.000004] kcrash-test[t2]: amdgpu 0000:c6:00.0: amdgpu:   in page starting at address 0x0000ae8570611000 from IH client 0x1b (UTCL2)
[  300.000001] python3[77]: segfault at 0 ip 0000000000401000 sp 00007ffc00000000 error 4 in python3[400000+1000]
`

func TestMarkedRecordsAreNoEvidence(t *testing.T) {
	kinds := func(fs []evidence.Finding) []string {
		var out []string
		for _, f := range fs {
			out = append(out, string(f.Kind)+"@"+f.GPU)
		}
		return out
	}
	for _, tc := range []struct {
		token string
		want  []string
	}{
		// No token: the tests' records are not there for kcrash.
		{"", []string{"gpu_illegal_memory_access@0000:3b:00.0", "native_crash@"}},
		// A token from neither test: the same.
		{"other", []string{"gpu_illegal_memory_access@0000:3b:00.0", "native_crash@"}},
		// The test's own token: its records read as the driver printed them,
		// the other test's still hidden.
		{"t1", []string{"gpu_illegal_memory_access@0000:3b:00.0", "gpu_hardware_error@0000:b3:00.0", "native_crash@"}},
		{"t2", []string{"gpu_illegal_memory_access@0000:3b:00.0", "gpu_page_fault@0000:c6:00.0", "native_crash@"}},
		{"t3", []string{"gpu_illegal_memory_access@0000:3b:00.0", "gpu_hardware_error@0000:b4:00.0", "native_crash@"}},
	} {
		t.Run("token="+tc.token, func(t *testing.T) {
			t.Setenv(TestMarkEnv, tc.token)
			fs, err := ParseReader(strings.NewReader(markedLog), 2025)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(kinds(fs), " "); got != strings.Join(tc.want, " ") {
				t.Errorf("findings %s, want %s\n%s", got, strings.Join(tc.want, " "), jsonOf(t, fs))
			}
			for _, f := range fs {
				if f.Kind == evidence.GPUHardwareError && f.Details["pci_id"] != "10de:26b5" {
					t.Errorf("the record's later lines were not joined: %+v", f.Details)
				}
				if strings.Contains(f.Text, "kcrash-test") {
					t.Errorf("finding text keeps the marker: %q", f.Text)
				}
			}
		})
	}
	if got := TestMark("abc"); got != "kcrash-test[abc]: " {
		t.Errorf("TestMark = %q", got)
	}
}
