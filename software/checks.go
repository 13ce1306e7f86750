package software

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Issue is a build problem the report shows, with its evidence.
type Issue struct {
	Kind      string   `json:"kind"`
	Text      string   `json:"text"`
	Package   string   `json:"package,omitempty"`
	Libraries []string `json:"libraries,omitempty"`
	Pid       int      `json:"pid,omitempty"`
}

// Issue kinds.
const (
	IssueStaleBuild       = "stale_build"            // a develop install's sources are newer than its built .so files
	IssueDeletedLibrary   = "deleted_library"        // a mapped file was deleted or replaced on disk after it was mapped
	IssueModifiedLibrary  = "modified_library"       // a mapped file was written in place after the process started
	IssueDuplicateRuntime = "duplicate_runtime"      // two different builds of one GPU runtime library in one process
	IssueTorchMismatch    = "torch_runtime_mismatch" // torch's CUDA/HIP build does not fit the host's driver or ROCm
	IssueDriverMismatch   = "driver_mismatch"        // the user-space NVIDIA driver mapped is not the kernel module\'s version
)

// gpuRuntimes are the libraries of which one process must hold one build.
var gpuRuntimes = []string{
	"libamdhip64", "libhsa-runtime64", "libamd_comgr", "libhiprtc", "librccl", "libMIOpen", "librocblas",
	"libhipblas", "libhipblaslt", "librocm_smi64", "libamd_smi",
	"libcudart", "libcuda", "libnccl", "libcublas", "libcublasLt", "libcudnn", "libnvrtc", "libnvJitLink",
	"libcufft", "libcusparse", "libcurand", "libnvidia-ml",
}

// RuntimeFamily returns the GPU runtime a library file is a build of
// ("libamdhip64" for libamdhip64.so.6.3.60301 or auditwheel's
// libamdhip64-3a9f1b2c.so), "" for any other file.
func RuntimeFamily(path string) string {
	b := filepath.Base(path)
	for _, f := range gpuRuntimes {
		rest, ok := strings.CutPrefix(b, f)
		if !ok {
			continue
		}
		if strings.HasPrefix(rest, ".so") {
			return f
		}
		if len(rest) > 10 && rest[0] == '-' && isHexStr(rest[1:9]) && strings.HasPrefix(rest[9:], ".so") {
			return f
		}
	}
	return ""
}

func isHexStr(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// Check finds the build problems in a report.
func Check(rep *Report) []Issue {
	out := []Issue{}
	for _, py := range rep.Python {
		for _, pk := range py.Packages {
			e := pk.Editable
			if e == nil || !e.Stale {
				continue
			}
			out = append(out, Issue{Kind: IssueStaleBuild, Package: pk.Name, Libraries: []string{e.NewestBuilt.Path},
				Text: fmt.Sprintf("%s is a develop install (%s) whose sources changed after its last build: %s (%s) is newer than the newest built .so %s (%s)",
					pk.Name, e.Source, e.NewestSource.Path, stamp(e.NewestSource.MTime), e.NewestBuilt.Path, stamp(e.NewestBuilt.MTime))})
		}
	}
	for _, l := range rep.Libraries {
		switch {
		case l.Deleted:
			what := "deleted"
			if l.Replaced {
				what = "replaced by a new file"
			}
			out = append(out, Issue{Kind: IssueDeletedLibrary, Package: l.Package, Libraries: []string{l.Path}, Pid: first(l.Pids),
				Text: fmt.Sprintf("%s was %s on disk after %s mapped it: the process ran the old build", l.Path, what, pidsText(l))})
		case l.Replaced:
			out = append(out, Issue{Kind: IssueDeletedLibrary, Package: l.Package, Libraries: []string{l.Path}, Pid: first(l.Pids),
				Text: fmt.Sprintf("%s now holds another file than the one %s mapped: the process ran the old build", l.Path, pidsText(l))})
		case l.ModifiedAfterStart:
			out = append(out, Issue{Kind: IssueModifiedLibrary, Package: l.Package, Libraries: []string{l.Path}, Pid: first(l.Pids),
				Text: fmt.Sprintf("%s was written in place (mtime %s) while %s had it mapped", l.Path, stamp(l.MTime), pidsText(l))})
		}
	}
	out = append(out, duplicates(rep)...)
	out = append(out, torchMismatch(rep)...)
	out = append(out, driverHalves(rep)...)
	return out
}

// driverHalves compares the NVIDIA kernel module with the user-space
// driver (libcuda.so.VERSION) the processes mapped: after a driver update
// without a reboot they differ, and CUDA fails to initialise or misbehaves
// ("Driver/library version mismatch").
func driverHalves(rep *Report) []Issue {
	k := rep.Runtime.NVIDIADriver
	if k == "" {
		return nil
	}
	var out []Issue
	for _, l := range rep.Libraries {
		if RuntimeFamily(l.Path) != "libcuda" {
			continue
		}
		m := soVersionRe.FindStringSubmatch(l.Path)
		if m == nil || strings.Count(m[1], ".") < 1 || m[1] == k {
			continue
		}
		out = append(out, Issue{Kind: IssueDriverMismatch, Libraries: []string{l.Path}, Pid: first(l.Pids),
			Text: fmt.Sprintf("%s mapped the user-space NVIDIA driver %s, but the loaded kernel module is %s", pidsText(l), m[1], k)})
	}
	return out
}

func first(p []int) int {
	if len(p) == 0 {
		return 0
	}
	return p[0]
}

func pidsText(l Library) string {
	n := len(l.Pids)
	if l.PidCount > n {
		n = l.PidCount
	}
	switch {
	case n == 0:
		return "a process"
	case n == 1:
		return fmt.Sprintf("pid %d", l.Pids[0])
	}
	return fmt.Sprintf("%d processes (pid %d...)", n, l.Pids[0])
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// duplicates finds processes holding two different builds of one GPU runtime.
func duplicates(rep *Report) []Issue {
	seen := map[string]bool{}
	var out []Issue
	for _, p := range rep.Processes {
		fam := map[string][]int{}
		for _, i := range p.libIdx {
			if f := RuntimeFamily(rep.Libraries[i].Path); f != "" {
				fam[f] = append(fam[f], i)
			}
		}
		names := make([]string, 0, len(fam))
		for f := range fam {
			names = append(names, f)
		}
		sort.Strings(names)
		for _, f := range names {
			idx := fam[f]
			if len(idx) < 2 || !differentBuilds(rep.Libraries, idx) {
				continue
			}
			var paths, descr []string
			for _, i := range idx {
				l := rep.Libraries[i]
				paths = append(paths, l.Path)
				d := l.Path
				if l.BuildID != "" {
					d += " (build id " + shortID(l.BuildID) + ")"
				}
				descr = append(descr, d)
			}
			key := f + "\x00" + strings.Join(paths, "\x00")
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, Issue{Kind: IssueDuplicateRuntime, Libraries: paths, Pid: p.Pid, Package: rep.Libraries[idx[0]].Package,
				Text: fmt.Sprintf("pid %d (%s) has %d different builds of %s mapped: %s", p.Pid, p.Name, len(idx), f, strings.Join(descr, ", "))})
		}
	}
	return out
}

func differentBuilds(libs []Library, idx []int) bool {
	for _, i := range idx[1:] {
		a, b := libs[idx[0]], libs[i]
		if a.BuildID != "" && b.BuildID != "" {
			if a.BuildID != b.BuildID {
				return true
			}
			continue
		}
		if a.Size != b.Size || filepath.Base(a.Path) != filepath.Base(b.Path) {
			return true
		}
	}
	return false
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// minDriverForCUDA is the oldest Linux driver that runs any CUDA release of
// a major version (minor version compatibility; NVIDIA's CUDA Toolkit
// release notes, "CUDA Driver" table).
var minDriverForCUDA = map[int]string{13: "580.65.06", 12: "525.60.13", 11: "450.80.02", 10: "410.48"}

var majMinRe = regexp.MustCompile(`^(\d+)\.(\d+)`)

// torchMismatch compares torch's build with the host's driver and ROCm.
func torchMismatch(rep *Report) []Issue {
	var out []Issue
	rt := rep.Runtime
	seen := map[string]bool{}
	for _, py := range rep.Python {
		for _, pk := range py.Packages {
			if Normalize(pk.Name) != "torch" || seen[pk.Path] {
				continue
			}
			seen[pk.Path] = true
			where := fmt.Sprintf("torch %s (%s)", pk.Version, pk.Path)
			if pk.HIP != "" {
				tv := majMinRe.FindString(pk.HIP)
				switch {
				case rt.ROCm != "" && tv != "" && majMinRe.FindString(rt.ROCm) != tv:
					out = append(out, Issue{Kind: IssueTorchMismatch, Package: pk.Name,
						Text: fmt.Sprintf("%s is built for ROCm/HIP %s, the host has ROCm %s (%s)", where, pk.HIP, rt.ROCm, rt.ROCmPath)})
				case rt.NVIDIADriver != "" && rt.ROCm == "" && rt.AMDGPU == "":
					out = append(out, Issue{Kind: IssueTorchMismatch, Package: pk.Name,
						Text: fmt.Sprintf("%s is a ROCm build (HIP %s) on a host with the NVIDIA driver %s and no ROCm", where, pk.HIP, rt.NVIDIADriver)})
				}
			}
			if pk.CUDA != "" {
				m := majMinRe.FindStringSubmatch(pk.CUDA)
				maj := 0
				if m != nil {
					maj, _ = strconv.Atoi(m[1])
				}
				need, known := minDriverForCUDA[maj]
				switch {
				case rt.NVIDIADriver != "" && known && versionLess(rt.NVIDIADriver, need):
					out = append(out, Issue{Kind: IssueTorchMismatch, Package: pk.Name,
						Text: fmt.Sprintf("%s is built for CUDA %s, which needs NVIDIA driver %s or newer; the driver is %s", where, pk.CUDA, need, rt.NVIDIADriver)})
				case rt.NVIDIADriver == "" && rt.ROCm != "":
					out = append(out, Issue{Kind: IssueTorchMismatch, Package: pk.Name,
						Text: fmt.Sprintf("%s is a CUDA build (CUDA %s) on a host with ROCm %s and no NVIDIA driver", where, pk.CUDA, rt.ROCm)})
				}
			}
		}
	}
	return out
}

// versionLess compares dotted numeric versions.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
