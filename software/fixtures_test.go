package software

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fixtureRoots(t *testing.T, host string) Roots {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("testdata", "hosts", host))
	if err != nil {
		t.Fatal(err)
	}
	return Roots{Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"), FS: root}
}

// TestRuntimeVersionFiles reads driver and ROCm version files recorded on
// GPU hosts: the proprietary and the open NVIDIA module's wording, ROCm's
// .info/version behind the /opt/rocm link, and the DKMS amdgpu version.
func TestRuntimeVersionFiles(t *testing.T) {
	for host, want := range map[string]Runtime{
		"nvidia-384":      {NVIDIADriver: "384.98"},
		"nvidia-565-open": {NVIDIADriver: "565.57.01"},
		"rocm":            {ROCm: "7.1.1", ROCmPath: "/opt/rocm", AMDGPU: "6.16.6"},
	} {
		rt := ReadRuntime(fixtureRoots(t, host))
		if rt.NVIDIADriver != want.NVIDIADriver || rt.ROCm != want.ROCm || rt.ROCmPath != want.ROCmPath || rt.AMDGPU != want.AMDGPU || len(rt.ROCmOthers) != 0 {
			t.Errorf("%s: %+v, want %+v", host, rt, want)
		}
	}
}

// fixtureReport reads a fixture host's torch the way Build does.
func fixtureReport(t *testing.T, host, site string) *Report {
	t.Helper()
	r := fixtureRoots(t, host)
	pkgs, dirs, _ := ReadPackages(context.Background(), r, []string{site}, DefaultLimits)
	rep := &Report{Runtime: ReadRuntime(r), Python: []Python{{Executable: "/usr/bin/python3", Packages: pkgs, SiteDirs: dirs}}}
	rep.Issues = Check(rep)
	return rep
}

// TestTorchBuildAgainstHost compares torch builds read from real version.py
// files with the host's versions: a ROCm 6.0 torch under ROCm 7.1.1, a CUDA
// 12.6 torch on the 384 driver (too old) and on 565 (fine).
func TestTorchBuildAgainstHost(t *testing.T) {
	rep := fixtureReport(t, "rocm", "/venv/lib/python3.12/site-packages")
	tp := pkgNamed(rep.Python[0], "torch")
	if tp == nil || tp.Version != "2.3.0.dev20240308+rocm6.0" || tp.HIP != "6.0.32830-d62f6a171" || tp.CUDA != "" {
		t.Fatalf("torch: %+v", tp)
	}
	mm := issuesOf(rep, IssueTorchMismatch)
	if len(mm) != 1 || !strings.Contains(mm[0].Text, "ROCm/HIP 6.0.32830-d62f6a171, the host has ROCm 7.1.1") {
		t.Errorf("rocm mismatch: %+v", rep.Issues)
	}
	if l := Line(rep); l != "torch 2.3.0.dev20240308+rocm6.0, ROCm 7.1.1, amdgpu 6.16.6; 1 build issue (software.json)" {
		t.Errorf("line %q", l)
	}

	cuda := fixtureReport(t, "cuda-venv", "/lib/python3.10/site-packages")
	tp = pkgNamed(cuda.Python[0], "torch")
	if tp == nil || tp.CUDA != "12.6" || tp.HIP != "" {
		t.Fatalf("torch: %+v", tp)
	}
	for driver, mismatch := range map[string]bool{"nvidia-384": true, "nvidia-565-open": false} {
		rep := &Report{Python: cuda.Python, Runtime: ReadRuntime(fixtureRoots(t, driver))}
		rep.Issues = Check(rep)
		mm := issuesOf(rep, IssueTorchMismatch)
		if got := len(mm) == 1 && strings.Contains(mm[0].Text, "needs NVIDIA driver 525.60.13 or newer; the driver is 384.98"); got != mismatch || len(rep.Issues) != len(mm) {
			t.Errorf("%s: %+v, want mismatch %v", driver, rep.Issues, mismatch)
		}
	}
}

// TestMapsOfACUDAVenv parses a CUDA process's recorded maps: file mappings
// only, one library per file, the site directory and the runtime family.
func TestMapsOfACUDAVenv(t *testing.T) {
	f, err := os.Open("testdata/maps/memray-547-cuda-venv.maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms := ParseMaps(f)
	if len(ms) != 8 {
		t.Fatalf("%d file mappings, want 8 (2 anonymous lines left out)", len(ms))
	}
	var exec []Mapping
	for _, m := range ms {
		if m.Exec() {
			exec = append(exec, m)
		}
	}
	if len(exec) != 2 || exec[0].Inode != 8272 || exec[0].Dev != "00:20" || exec[0].Start != 0x7fff99800000 || exec[1].Path != "/tmp/venv/lib/python3.11/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12" {
		t.Errorf("code mappings: %+v", exec)
	}
	if got := SiteDirsFrom([]string{exec[0].Path, exec[1].Path}); len(got) != 1 || got[0] != "/tmp/venv/lib/python3.11/site-packages" {
		t.Errorf("site dirs %v", got)
	}
	for path, fam := range map[string]string{
		exec[0].Path: "libcusparse",
		"/opt/rocm-6.2.0/lib/libamdhip64.so.6.2.41133": "libamdhip64",
		"/x/torch/lib/libamdhip64.so":                  "libamdhip64",
		"/x/torch.libs/libcudart-9335f6a2.so.12":       "libcudart",
		"/usr/lib/libcublasLt.so.12":                   "libcublasLt",
		"/usr/lib/libcublas.so.12":                     "libcublas",
		"/usr/lib/libhsa-runtime64.so.1":               "libhsa-runtime64",
		"/usr/lib/libcudart_static.a":                  "",
	} {
		if got := RuntimeFamily(path); got != fam {
			t.Errorf("RuntimeFamily(%s) = %q, want %q", path, got, fam)
		}
	}
}

// TestBundleLine is `kcrash show`'s line from a bundle's software.json, and
// nothing for a bundle without one or with a broken one.
func TestBundleLine(t *testing.T) {
	rep := fixtureReport(t, "rocm", "/venv/lib/python3.12/site-packages")
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"software.json": b}
	get := func(n string) ([]byte, bool) { v, ok := files[n]; return v, ok }
	if got := BundleLine(get); got != "Stack: torch 2.3.0.dev20240308+rocm6.0, ROCm 7.1.1, amdgpu 6.16.6; 1 build issue (software.json)\n" {
		t.Errorf("line %q", got)
	}
	files["software.json"] = []byte("{broken")
	if got := BundleLine(get); got != "" {
		t.Errorf("broken: %q", got)
	}
	delete(files, "software.json")
	if got := BundleLine(get); got != "" {
		t.Errorf("none: %q", got)
	}
}

// TestDriverHalves: the user-space driver a process mapped (libcuda.so's
// version) against the kernel module of a recorded host (565.57.01).
func TestDriverHalves(t *testing.T) {
	r := fixtureRoots(t, "nvidia-565-open")
	for lib, mismatch := range map[string]bool{
		"/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15": true,
		"/usr/lib/x86_64-linux-gnu/libcuda.so.565.57.01": false,
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1":         false, // the soname link says nothing
	} {
		rep := &Report{Runtime: ReadRuntime(r), Libraries: []Library{{Path: lib, Pids: []int{42}}}}
		mappedRuntimes(&rep.Runtime, rep.Libraries)
		is := Check(rep)
		if got := len(is) == 1 && is[0].Kind == IssueDriverMismatch && is[0].Pid == 42 &&
			strings.Contains(is[0].Text, "driver 550.54.15, but the loaded kernel module is 565.57.01"); got != mismatch || !mismatch && len(is) != 0 {
			t.Errorf("%s: %+v", lib, is)
		}
		if len(rep.Runtime.Mapped["libcuda"]) != 1 {
			t.Errorf("mapped: %v", rep.Runtime.Mapped)
		}
	}
}

// TestCompare lines up the ROCm host's stack with the CUDA venv's, for
// `kcrash diff` and the report page.
func TestCompare(t *testing.T) {
	a := fixtureReport(t, "rocm", "/venv/lib/python3.12/site-packages")
	b := fixtureReport(t, "cuda-venv", "/lib/python3.10/site-packages")
	b.Runtime = ReadRuntime(fixtureRoots(t, "nvidia-565-open"))
	a.Libraries = []Library{{Path: "/v/torch/lib/libamdhip64.so", BuildID: "aaaaaaaaaaaaaaaa"}, {Path: "/usr/lib/libc.so.6", BuildID: "cccc"}}
	b.Libraries = []Library{{Path: "/w/torch/lib/libamdhip64.so", BuildID: "bbbbbbbbbbbbbbbb"}, {Path: "/usr/lib/libc.so.6", BuildID: "cccc"}}
	var got []string
	for _, r := range Compare(a, b) {
		got = append(got, r.What+": "+r.A+" | "+r.B)
	}
	want := []string{
		"torch: 2.3.0.dev20240308+rocm6.0 | 2.7.1+cu126",
		"NVIDIA driver:  | 565.57.01",
		"ROCm: 7.1.1 | ",
		"amdgpu: 6.16.6 | ",
		"libamdhip64.so: build id aaaaaaaaaaaa | build id bbbbbbbbbbbb",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
