package kernlog

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// subjectLine finds the line of a fixture file at 1-based line n (counting
// the file's header lines) and returns its message text, prefix removed as
// the node agent would see it in a /dev/kmsg record.
func subjectLine(t *testing.T, path string, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if n < 1 || n > len(lines) {
		t.Fatalf("%s has no line %d", path, n)
	}
	return SplitPrefix(lines[n-1], n, 0).Text
}

func TestSubjectsRealLines(t *testing.T) {
	corpus := corpusDir(t)
	uid := func(v int) *int { return &v }
	cases := []struct {
		file string // under the corpus, or kernlog/testdata when it starts with "testdata/"
		line int
		want LineSubjects
	}{
		// amdgpu: the device prefix and "process X pid N thread X pid N".
		{"1-amdgpu-page-fault/gfx11-gfxhub-sdma-fault-journal-rdna4-python3.txt", 5,
			LineSubjects{Pids: []int{15615}, BDFs: []string{"0000:0e:00.0"}}},
		{"1-amdgpu-page-fault/mmhub0-no-retry-ipython3-inline-process.txt", 4,
			LineSubjects{Pids: []int{846049}, BDFs: []string{"0000:88:00.0"}}},
		// The thread's pid differs from the process's: both are named.
		{"2-rocm-userspace-fault/amdgpu-ring-gfx-timeout-hip-blender-reset.txt", 6,
			LineSubjects{Pids: []int{10728, 10762}}},
		{"2-rocm-userspace-fault/amdgpu-ring-gfx-timeout-hip-blender-reset.txt", 7,
			LineSubjects{BDFs: []string{"0000:0c:00.0"}}},
		// "Failed to suspend process 0x800c" names a pasid, not a pid.
		{"2-rocm-userspace-fault/amdgpu-ring-gfx-timeout-hip-blender-reset.txt", 8, LineSubjects{}},
		// The kernel's own job: pid 0 is nobody's.
		{"2-rocm-userspace-fault/amdgpu-ring-sdma0-timeout-gpu-reset-begin-mes.txt", 0, LineSubjects{}},
		// NVRM Xid: "(PCI:0000:cb:00)", pid=N; pid='<unknown>' names no process.
		{"3-nvidia-xid/xid13-xid109-pt_main_thread-dmesg-ctime.txt", 5,
			LineSubjects{BDFs: []string{"0000:cb:00.0"}}},
		{"3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt", 0,
			LineSubjects{Pids: []int{13332}, BDFs: []string{"0000:0a:00.0"}}},
		{"3-nvidia-xid/xid119-gsp-rpc-timeout-h100-full-dump.txt", 28, LineSubjects{Pids: []int{2024380}}},
		{"3-nvidia-xid/xid79-modal-gpu-health-wrapped.txt", 0,
			LineSubjects{Pids: []int{1101234}, BDFs: []string{"0000:c6:00.0"}}},
		// OOM: oom-kill's pid, uid and memcg (task_memcg preferred), the
		// kill line, the reaper, a task-dump row's pid and uid columns.
		{"4-oom-killer/global-oom-python-then-next-invocation-calltrace.txt", 4,
			LineSubjects{Pids: []int{698405}, UID: uid(1000), Memcg: "/user.slice/user-1000.slice/user@1000.service"}},
		{"4-oom-killer/global-oom-python-then-next-invocation-calltrace.txt", 5,
			LineSubjects{Pids: []int{698405}, UID: uid(1000)}},
		{"4-oom-killer/global-oom-python-then-next-invocation-calltrace.txt", 6, LineSubjects{Pids: []int{698405}}},
		{"4-oom-killer/global-oom-python-then-next-invocation-calltrace.txt", 8, LineSubjects{Pids: []int{940}}},
		{"4-oom-killer/memcg-oom-openshift-crio-with-xid119-context.txt", 31,
			LineSubjects{Pids: []int{184260}, UID: uid(1001240000)}},
		{"4-oom-killer/memcg-oom-openshift-crio-with-xid119-context.txt", 32,
			LineSubjects{Pids: []int{184260}, UID: uid(1001240000),
				Memcg: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod58dc1221_d430_496e_951d_e8cb23caaead.slice/crio-8371caad8cc369f16c55ce039fbbe0e4fd1be88e72f119bce94ccd5d07d152fe.scope"}},
		// CPU exceptions: "traps: comm[N]", "comm[N]: segfault at".
		{"5-userspace-crash-dmesg/gpf-libc-crashloop-interleaved-noise.txt", 4, LineSubjects{Pids: []int{8542}}},
		{"5-userspace-crash-dmesg/python2-segfault-libc-with-code-line.txt", 0, LineSubjects{Pids: []int{4598}}},
		{"5-userspace-crash-dmesg/trap-divide-error-journalctl.txt", 0, LineSubjects{Pids: []int{3239587}}},
		// pci's own lines.
		{"testdata/subjects-pci-dmesg.txt", 5, LineSubjects{BDFs: []string{"0000:00:01.0"}}},
	}
	for _, c := range cases {
		path := filepath.Join(corpus, c.file)
		if strings.HasPrefix(c.file, "testdata/") {
			path = c.file
		}
		n := c.line
		if n == 0 {
			n = firstEvidenceLine(t, path)
		}
		text := subjectLine(t, path, n)
		got := Subjects(text)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:%d %q\n got %+v\nwant %+v", c.file, n, text, show(got), show(c.want))
		}
		// A marked test record names what the driver's line after the mark names.
		if marked := Subjects(TestMark("tok") + text); !reflect.DeepEqual(marked, got) {
			t.Errorf("%s:%d marked: %+v, unmarked %+v", c.file, n, show(marked), show(got))
		}
	}
}

// firstEvidenceLine is the first line after the header that names a
// process or device by the forms the case is about, for files whose
// interesting line moves when the capture is re-cut.
func firstEvidenceLine(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if i < 3 {
			continue
		}
		for _, m := range []string{"Process information:", "NVRM: Xid (", "]: segfault at", "traps: "} {
			if strings.Contains(l, m) {
				return i + 1
			}
		}
	}
	t.Fatalf("%s: no evidence line", path)
	return 0
}

func show(s LineSubjects) string {
	u := "nil"
	if s.UID != nil {
		u = fmt.Sprint(*s.UID)
	}
	return fmt.Sprintf("pids=%v uid=%s memcg=%q bdfs=%v", s.Pids, u, s.Memcg, s.BDFs)
}

// FuzzSubjects: any text, however hostile, gives bounded subjects in the
// forms the agent stores: positive pids, sysfs-spelled addresses.
func FuzzSubjects(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		for l := range strings.Lines(s) {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		s := Subjects(text)
		if len(s.Pids) > maxSubjects || len(s.BDFs) > maxSubjects {
			t.Fatalf("unbounded: %+v", s)
		}
		for _, p := range s.Pids {
			if p <= 0 {
				t.Fatalf("pid %d from %q", p, text)
			}
		}
		for _, b := range s.BDFs {
			if !isBDF(b) || len(b) != 12 || strings.ToLower(b) != b {
				t.Fatalf("address %q from %q", b, text)
			}
		}
		if !reflect.DeepEqual(Subjects(TestMark("t")+text), Subjects(StripTestMark(TestMark("t")+text))) {
			t.Fatalf("a mark changed the subjects of %q", text)
		}
	})
}

// TestSubjectsWordBoundaries: "pid" inside a longer word is not a pid.
func TestSubjectsWordBoundaries(t *testing.T) {
	for _, text := range []string{
		"audit: type=1300 audit(1.2:3): arch=c000003e syscall=59 success=yes exit=0 ppid=4321 auid=1000",
		"amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)",
	} {
		if s := Subjects(text); len(s.Pids) != 0 {
			t.Errorf("%q: pids %v", text, s.Pids)
		}
	}
}
