package software

import (
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Roots are where the readers look; tests point them at fixture trees.
type Roots struct {
	Proc string // "/proc"
	Sys  string // "/sys"
	FS   string // "/": installs (/opt/rocm, /usr/local/cuda) and the files maps name

	log *readLog // where the Python readers note what they left unread; nil: nowhere
}

// DefaultRoots are the host's own.
func DefaultRoots() Roots { return Roots{Proc: "/proc", Sys: "/sys", FS: "/"} }

// Path returns an absolute host path under the FS root.
func (r Roots) Path(p string) string {
	if r.FS == "" || r.FS == "/" {
		return p
	}
	return filepath.Join(r.FS, p)
}

// Runtime is the driver and runtime versions of the host.
type Runtime struct {
	NVIDIADriver     string   `json:"nvidia_driver,omitempty"` // kernel module, /proc/driver/nvidia/version
	NVIDIADriverLine string   `json:"nvidia_driver_line,omitempty"`
	CUDA             string   `json:"cuda,omitempty"` // the CUDA toolkit installed (/usr/local/cuda/version.json)
	CUDAPath         string   `json:"cuda_path,omitempty"`
	ROCm             string   `json:"rocm,omitempty"` // /opt/rocm/.info/version
	ROCmPath         string   `json:"rocm_path,omitempty"`
	ROCmOthers       []string `json:"rocm_others,omitempty"` // other /opt/rocm-X installs: "6.2.0 (/opt/rocm-6.2.0)"
	AMDGPU           string   `json:"amdgpu,omitempty"`      // the amdgpu module's version (DKMS builds only)
	AMDGPUSrcVersion string   `json:"amdgpu_srcversion,omitempty"`
	// Mapped lists, per GPU runtime library, the versions the tree's
	// processes mapped (from the file names: libcuda.so.550.54.15 is the
	// driver's user-space half, libamdhip64.so.6.3.60301 HIP 6.3).
	Mapped map[string][]string `json:"mapped,omitempty"`
}

var soVersionRe = regexp.MustCompile(`\.so\.([0-9]+(?:\.[0-9]+)*)$`)

// mappedRuntimes fills Runtime.Mapped from the libraries.
func mappedRuntimes(rt *Runtime, libs []Library) {
	for _, l := range libs {
		fam := RuntimeFamily(l.Path)
		if fam == "" {
			continue
		}
		v := "unversioned name"
		if m := soVersionRe.FindStringSubmatch(l.Path); m != nil {
			v = m[1]
		}
		v += " (" + l.Path + ")"
		if rt.Mapped == nil {
			rt.Mapped = map[string][]string{}
		}
		if !slices.Contains(rt.Mapped[fam], v) {
			rt.Mapped[fam] = append(rt.Mapped[fam], v)
		}
	}
}

var nvrmRe = regexp.MustCompile(`Kernel Module(?:\s+for\s+\S+)?\s+([0-9]+(?:\.[0-9]+)+)`)

// ReadRuntime reads the versions from files only.
func ReadRuntime(r Roots) Runtime {
	var rt Runtime
	if b, err := r.readHead(filepath.Join(r.Proc, "driver", "nvidia", "version"), maxHead); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		rt.NVIDIADriverLine = strings.TrimSpace(line)
		if m := nvrmRe.FindStringSubmatch(line); m != nil {
			rt.NVIDIADriver = m[1]
		}
	}
	if rt.NVIDIADriver == "" {
		rt.NVIDIADriver = readTrim(filepath.Join(r.Sys, "module", "nvidia", "version"))
	}
	for _, p := range []string{"/usr/local/cuda/version.json", "/usr/local/cuda/version.txt"} {
		if v := cudaToolkitVersion(r.Path(p)); v != "" {
			rt.CUDA, rt.CUDAPath = v, p
			break
		}
	}
	rt.ROCm, rt.ROCmPath = rocmVersion(r, "/opt/rocm")
	others, _ := filepath.Glob(r.Path("/opt/rocm-*"))
	sort.Strings(others)
	for _, o := range others {
		host := "/opt/" + filepath.Base(o)
		if v, _ := rocmVersion(r, host); v != "" {
			if real, err := filepath.EvalSymlinks(r.Path("/opt/rocm")); err == nil && real == o {
				continue
			}
			rt.ROCmOthers = append(rt.ROCmOthers, v+" ("+host+")")
			if rt.ROCm == "" {
				rt.ROCm, rt.ROCmPath = v, host
			}
		}
	}
	rt.AMDGPU = readTrim(filepath.Join(r.Sys, "module", "amdgpu", "version"))
	rt.AMDGPUSrcVersion = readTrim(filepath.Join(r.Sys, "module", "amdgpu", "srcversion"))
	return rt
}

var cudaJSONRe = regexp.MustCompile(`"cuda"\s*:\s*\{[^}]*?"version"\s*:\s*"([^"]+)"`)
var cudaTxtRe = regexp.MustCompile(`CUDA Version\s+([0-9][0-9.]*)`)

func cudaToolkitVersion(p string) string {
	b, err := Roots{}.readSmall(p, maxConfig)
	if err != nil {
		return ""
	}
	if m := cudaJSONRe.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	if m := cudaTxtRe.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// rocmVersion reads an install's .info/version ("6.3.1-48"), "" when absent.
func rocmVersion(r Roots, dir string) (string, string) {
	v := readTrim(r.Path(dir + "/.info/version"))
	if v == "" {
		v = readTrim(r.Path(dir + "/.info/version-dev"))
	}
	if v == "" {
		return "", ""
	}
	v, _, _ = strings.Cut(v, "\n")
	return v, dir
}

// readTrim is a host file's readTrim.
func readTrim(p string) string { return Roots{}.readTrim(p) }
