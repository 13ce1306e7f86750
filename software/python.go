package software

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Python is one interpreter of the tree and the packages on its path.
type Python struct {
	Executable string    `json:"executable"`
	Version    string    `json:"version,omitempty"` // "3.11"
	Prefix     string    `json:"prefix,omitempty"`
	Venv       string    `json:"venv,omitempty"`
	Pids       []int     `json:"pids"`
	SiteDirs   []string  `json:"site_dirs"`
	Packages   []Package `json:"packages"`
	// PackagesCut: more packages than the size limit; the GPU-serving ones are all kept.
	PackagesCut bool `json:"packages_cut,omitempty"`
}

// Package is one installed distribution, from its metadata directory.
type Package struct {
	Name     string    `json:"name"`
	Version  string    `json:"version"`
	Path     string    `json:"path"` // the .dist-info/.egg-info (or .egg-link)
	GPU      bool      `json:"gpu,omitempty"`
	CUDA     string    `json:"cuda,omitempty"` // torch's build: torch/version.py
	HIP      string    `json:"hip,omitempty"`
	Editable *Editable `json:"editable,omitempty"`
}

// Editable is a develop install: the package is imported from a checkout.
type Editable struct {
	Source string `json:"source"`
	How    string `json:"how"` // direct_url.json, egg-link, __editable__ finder, .pth
	Git    *Git   `json:"git,omitempty"`
	// The newest native source (C/C++/CUDA/HIP) and the newest built .so of
	// the checkout: sources newer than every build mean the .so files predate the last edit.
	NewestSource *FileTime `json:"newest_source,omitempty"`
	NewestBuilt  *FileTime `json:"newest_built,omitempty"`
	Stale        bool      `json:"stale,omitempty"`
	Scanned      int       `json:"scanned_files,omitempty"`
	ScanCut      bool      `json:"scan_cut,omitempty"` // the walk stopped at its limit; Stale may miss a newer file
}

// FileTime is a file and its modification time.
type FileTime struct {
	Path  string    `json:"path"`
	MTime time.Time `json:"mtime"`
}

// gpuPackages are the distributions that matter for a GPU serving stack
// (normalized names, PEP 503).
var gpuPackages = map[string]bool{
	"torch": true, "sglang": true, "vllm": true, "flashinfer": true, "flashinfer-python": true, "flashinfer-cubin": true,
	"aiter": true, "amd-aiter": true, "triton": true, "pytorch-triton-rocm": true, "pytorch-triton": true, "triton-rocm": true,
	"sgl-kernel": true, "transformers": true, "xformers": true, "flash-attn": true, "vllm-flash-attn": true,
	"deep-gemm": true, "deep-ep": true, "torchvision": true, "torchaudio": true, "numpy": true, "cupy": true,
	"cupy-cuda12x": true, "jax": true, "jaxlib": true, "accelerate": true, "safetensors": true, "tokenizers": true,
	"amdsmi": true, "pynvml": true, "nvidia-ml-py": true, "mooncake-transfer-engine": true, "nixl": true,
	"nvidia-nccl-cu12": true, "nvidia-cuda-runtime-cu12": true, "nvidia-cublas-cu12": true, "nvidia-cudnn-cu12": true,
	"nvidia-nccl-cu13": true, "nvidia-cuda-runtime-cu13": true, "nvidia-cublas-cu13": true, "nvidia-cudnn-cu13": true,
	"composable-kernel": true, "quark": true, "amd-quark": true, "petit-kernel": true, "torchao": true,
}

var normRe = regexp.MustCompile(`[-_.]+`)

// Normalize is PEP 503's name normalization.
func Normalize(name string) string { return strings.ToLower(normRe.ReplaceAllString(name, "-")) }

// Limits bound the Python readers.
type Limits struct {
	Packages   int // per interpreter (GPU packages are always kept)
	WalkFiles  int // per editable checkout
	SiteDirs   int
	SourceExts map[string]bool
}

// DefaultLimits are the collector's.
var DefaultLimits = Limits{Packages: 1500, WalkFiles: 30000, SiteDirs: 64,
	SourceExts: map[string]bool{".c": true, ".cc": true, ".cpp": true, ".cxx": true, ".cu": true, ".cuh": true,
		".hip": true, ".h": true, ".hpp": true, ".hh": true, ".inl": true}}

var pyExeRe = regexp.MustCompile(`^python([0-9]+(?:\.[0-9]+)?)?[dmu]*$`)
var libpythonRe = regexp.MustCompile(`/libpython([0-9]+\.[0-9]+)[a-z]*\.so`)
var pyLibDirRe = regexp.MustCompile(`/lib(?:64)?/python([0-9]+\.[0-9]+)[a-z]*/`)

// PythonOf says whether a process runs Python, from its executable and
// mappings, and which version ("3.11"; "" when it cannot tell).
func PythonOf(exe string, maps []Mapping) (bool, string) {
	isPy := false
	ver := ""
	if m := pyExeRe.FindStringSubmatch(filepath.Base(exe)); m != nil {
		isPy = true
		if strings.Contains(m[1], ".") {
			ver = m[1]
		}
	}
	for _, mp := range maps {
		if m := libpythonRe.FindStringSubmatch(mp.Path); m != nil {
			return true, m[1]
		}
	}
	if isPy && ver == "" {
		for _, mp := range maps {
			if m := pyLibDirRe.FindStringSubmatch(mp.Path); m != nil {
				return true, m[1]
			}
		}
	}
	return isPy, ver
}

// SiteDirsFrom lists the directories a mapped file sits in that are site
// or dist package directories ("…/site-packages").
func SiteDirsFrom(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		for _, k := range []string{"/site-packages/", "/dist-packages/"} {
			if i := strings.Index(p, k); i >= 0 {
				d := p[:i+len(k)-1]
				if !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// CandidateSiteDirs are the directories an interpreter's site module would
// add, from its prefix, a virtual environment and the process's variables.
func CandidateSiteDirs(prefix, venv, ver string, environ map[string]string) []string {
	var out []string
	add := func(ds ...string) { out = append(out, ds...) }
	if ver != "" {
		for _, p := range []string{venv, prefix} {
			if p == "" {
				continue
			}
			add(p+"/lib/python"+ver+"/site-packages", p+"/lib64/python"+ver+"/site-packages",
				p+"/local/lib/python"+ver+"/dist-packages", p+"/lib/python"+ver+"/dist-packages")
		}
		if home := environ["HOME"]; home != "" {
			add(home + "/.local/lib/python" + ver + "/site-packages")
		}
	}
	if prefix == "/usr" || prefix == "/usr/local" {
		add("/usr/lib/python3/dist-packages")
	}
	for _, p := range strings.Split(environ["PYTHONPATH"], ":") {
		if strings.HasPrefix(p, "/") {
			add(p)
		}
	}
	return out
}

// ReadPackages lists the distributions in the site directories (in order;
// the first of a name wins, as on sys.path) and the extra directories their
// .pth files add. Only metadata is read.
func ReadPackages(ctx context.Context, r Roots, sites []string, lim Limits) ([]Package, []string, bool) {
	seenDir := map[string]bool{}
	seenPkg := map[string]bool{}
	var pkgs []Package
	var dirs []string
	cut := false
	queue := append([]string(nil), sites...)
	for len(queue) > 0 && len(dirs) < lim.SiteDirs && ctx.Err() == nil {
		d := filepath.Clean(queue[0])
		queue = queue[1:]
		if seenDir[d] {
			continue
		}
		seenDir[d] = true
		ents, err := r.readDir(r.Path(d))
		if err != nil && len(ents) == 0 {
			continue
		}
		dirs = append(dirs, d)
		for _, e := range ents {
			n := e.Name()
			var p *Package
			switch {
			case strings.HasSuffix(n, ".dist-info") || strings.HasSuffix(n, ".egg-info"):
				p = readDistInfo(r, d, n)
			case strings.HasSuffix(n, ".egg-link"):
				p = readEggLink(r, d, n)
			case strings.HasSuffix(n, ".pth"):
				queue = append(queue, pthDirs(r, d, n)...)
				continue
			default:
				continue
			}
			if p == nil || seenPkg[Normalize(p.Name)] {
				continue
			}
			key := Normalize(p.Name)
			p.GPU = gpuPackages[key]
			if len(pkgs) >= lim.Packages && !p.GPU {
				cut = true
				continue
			}
			seenPkg[key] = true
			pkgs = append(pkgs, *p)
		}
	}
	for i := range pkgs {
		if ctx.Err() != nil {
			break
		}
		p := &pkgs[i]
		if Normalize(p.Name) == "torch" {
			p.CUDA, p.HIP = torchBuild(r, p, seenDir)
		}
		if p.Editable != nil {
			p.Editable.Git = r.findGit(r.Path(p.Editable.Source))
			if p.Editable.Git != nil {
				p.Editable.Git.Dir = p.Editable.Source
			}
			scanStale(ctx, r, p.Editable, lim)
		}
	}
	sort.SliceStable(pkgs, func(i, j int) bool { return strings.ToLower(pkgs[i].Name) < strings.ToLower(pkgs[j].Name) })
	return pkgs, dirs, cut
}

// readDistInfo reads NAME-VERSION.dist-info or .egg-info; the version comes
// from the directory name, else from METADATA/PKG-INFO's headers.
func readDistInfo(r Roots, site, dirName string) *Package {
	base := strings.TrimSuffix(strings.TrimSuffix(dirName, ".dist-info"), ".egg-info")
	name, ver, _ := strings.Cut(base, "-")
	if i := strings.Index(ver, "-py"); i >= 0 { // egg-info: NAME-VER-py3.11
		ver = ver[:i]
	}
	path := filepath.Join(site, dirName)
	p := &Package{Name: name, Version: ver, Path: path}
	host := r.Path(path)
	if st, err := os.Stat(host); err == nil && !st.IsDir() {
		// a plain-file egg-info (distutils) is PKG-INFO itself
		p.Name, p.Version = r.metadataNameVersion(host, name, ver)
		return p
	}
	if ver == "" || strings.HasSuffix(dirName, ".egg-info") {
		for _, m := range []string{"METADATA", "PKG-INFO"} {
			if _, err := os.Stat(filepath.Join(host, m)); err == nil {
				p.Name, p.Version = r.metadataNameVersion(filepath.Join(host, m), name, ver)
				break
			}
		}
	}
	if b, err := r.readSmall(filepath.Join(host, "direct_url.json"), maxSmall); err == nil {
		if src, ok := parseDirectURL(b); ok {
			p.Editable = &Editable{Source: src, How: "direct_url.json"}
		}
	}
	if p.Editable == nil && strings.HasSuffix(dirName, ".egg-info") && !isSiteDir(site) {
		// an egg-info inside a checkout on the path: `setup.py develop`
		p.Editable = &Editable{Source: site, How: "egg-info in a checkout on the path"}
	}
	return p
}

func isSiteDir(d string) bool {
	b := filepath.Base(d)
	return b == "site-packages" || b == "dist-packages"
}

// parseDirectURL reads PEP 610's direct_url.json: the checkout of an
// editable install from a file: URL.
func parseDirectURL(b []byte) (string, bool) {
	var du struct {
		URL     string `json:"url"`
		DirInfo struct {
			Editable bool `json:"editable"`
		} `json:"dir_info"`
	}
	if json.Unmarshal(b, &du) != nil || !du.DirInfo.Editable {
		return "", false
	}
	u, err := url.Parse(du.URL)
	if err != nil || u.Scheme != "file" || !filepath.IsAbs(u.Path) {
		return "", false
	}
	return u.Path, true
}

func (r Roots) metadataNameVersion(path, name, ver string) (string, string) {
	b, err := r.readHead(path, maxMetaHead)
	if err != nil {
		return name, ver
	}
	return parseMetadata(b, name, ver)
}

// parseMetadata takes Name and Version from the headers of a METADATA or
// PKG-INFO file (name and ver when it has none).
func parseMetadata(b []byte, name, ver string) (string, string) {
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(l, "\r")
		if l == "" {
			break // end of the headers
		}
		if v, ok := strings.CutPrefix(l, "Name:"); ok {
			name = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(l, "Version:"); ok {
			ver = strings.TrimSpace(v)
		}
	}
	return name, ver
}

// readEggLink reads NAME.egg-link (`setup.py develop`): its first line is the checkout.
func readEggLink(r Roots, site, n string) *Package {
	b, err := r.readSmall(r.Path(filepath.Join(site, n)), maxSmall)
	if err != nil {
		return nil
	}
	src, _, _ := strings.Cut(string(b), "\n")
	src = strings.TrimSpace(src)
	if src == "" {
		return nil
	}
	if !filepath.IsAbs(src) {
		src = filepath.Join(site, src)
	}
	p := &Package{Name: strings.TrimSuffix(n, ".egg-link"), Path: filepath.Join(site, n),
		Editable: &Editable{Source: filepath.Clean(src), How: "egg-link"}}
	ents, _ := r.readDir(r.Path(src))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".egg-info") {
			p.Name, p.Version = r.metadataNameVersion(filepath.Join(r.Path(src), e.Name(), "PKG-INFO"), p.Name, "")
			break
		}
	}
	return p
}

var finderImportRe = regexp.MustCompile(`import (__editable___[A-Za-z0-9_]+_finder)`)
var finderMapRe = regexp.MustCompile(`MAPPING\s*(?::[^=]*)?=\s*\{([^}]*)\}`)
var finderPathRe = regexp.MustCompile(`['"][^'"]+['"]\s*:\s*['"]([^'"]+)['"]`)

// pthDirs reads the directories a .pth file adds to the path; for a
// setuptools editable finder (__editable__.*.pth importing its finder) the
// finder's MAPPING names the checkout's package directories.
func pthDirs(r Roots, site, n string) []string {
	b, err := r.readSmall(r.Path(filepath.Join(site, n)), maxSmall)
	if err != nil {
		return nil
	}
	return parsePth(b, site, func(module string) []byte {
		fb, _ := r.readSmall(r.Path(filepath.Join(site, module+".py")), maxSmall)
		return fb
	})
}

// parsePth reads a .pth file of site: its directories, and for an editable
// finder's import line the directories of the finder module's MAPPING
// (finder returns the module's source, nil when it cannot be read).
func parsePth(b []byte, site string, finder func(module string) []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "import ") || strings.HasPrefix(l, "import\t"):
			if m := finderImportRe.FindStringSubmatch(l); m != nil {
				if fb := finder(m[1]); fb != nil {
					if mm := finderMapRe.FindSubmatch(fb); mm != nil {
						for _, pm := range finderPathRe.FindAllSubmatch(mm[1], -1) {
							// the mapped path is the package dir; its parent is
							// on the path (setuptools writes absolute paths: a
							// relative one would be read from kcrash's directory)
							if d := string(pm[1]); filepath.IsAbs(d) {
								out = append(out, filepath.Dir(d))
							}
						}
					}
				}
			}
		default:
			if !filepath.IsAbs(l) {
				l = filepath.Join(site, l)
			}
			out = append(out, l)
		}
	}
	return out
}

var pyStrRe = func(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + name + `\s*(?::[^=\n]*)?=\s*['"]([^'"]*)['"]`)
}
var torchCudaRe, torchHipRe = pyStrRe("cuda"), pyStrRe("hip")

// torchBuild reads torch/version.py next to torch's metadata.
func torchBuild(r Roots, p *Package, sites map[string]bool) (cuda, hip string) {
	dirs := []string{filepath.Dir(p.Path)}
	if p.Editable != nil {
		dirs = append(dirs, p.Editable.Source)
	}
	for _, d := range dirs {
		b, err := r.readSmall(r.Path(filepath.Join(d, "torch", "version.py")), maxSmall)
		if err != nil {
			continue
		}
		if m := torchCudaRe.FindSubmatch(b); m != nil {
			cuda = string(m[1])
		}
		if m := torchHipRe.FindSubmatch(b); m != nil {
			hip = string(m[1])
		}
		return cuda, hip
	}
	return "", ""
}

// scanStale walks an editable checkout (bounded) for its newest native
// source and newest built .so. Vendored trees (3rdparty/, third_party/:
// aiter's composable_kernel alone is thousands of headers) are walked last,
// so the limit is spent on the project's own sources and builds first.
func scanStale(ctx context.Context, r Roots, e *Editable, lim Limits) {
	// A directory of the checkout its user cannot list (a root-owned build
	// tree) is nothing its interpreter imports from: not worth a note.
	r.log = nil
	var src, so *FileTime
	n := 0
	var vendored []string
	// Every entry counts toward the limit (a tree of empty directories
	// too); directories are listed without blocking on a FIFO in their place.
	var walk func(dir string, deferVendored bool) bool
	walk = func(dir string, deferVendored bool) bool {
		ents, _ := r.readDir(dir)
		for _, d := range ents {
			n++
			if n > lim.WalkFiles || ctx.Err() != nil {
				e.ScanCut = true
				return false
			}
			p := filepath.Join(dir, d.Name())
			if d.IsDir() {
				switch d.Name() {
				case ".git", "__pycache__", "node_modules", ".tox", ".venv":
					continue
				case "3rdparty", "third_party", "thirdparty":
					if deferVendored {
						vendored = append(vendored, p)
						continue
					}
				}
				if !walk(p, deferVendored) {
					return false
				}
				continue
			}
			name := d.Name()
			isSo := strings.HasSuffix(name, ".so") || strings.Contains(name, ".so.")
			if !isSo && !lim.SourceExts[filepath.Ext(name)] {
				continue
			}
			info, err := d.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			ft := &FileTime{Path: hostPath(r, p), MTime: info.ModTime().UTC()}
			if isSo {
				// on a tie, the importable copy rather than build/'s
				inBuild := func(f *FileTime) bool { return strings.Contains(f.Path, "/build/") }
				if so == nil || ft.MTime.After(so.MTime) || ft.MTime.Equal(so.MTime) && inBuild(so) && !inBuild(ft) {
					so = ft
				}
			} else if src == nil || ft.MTime.After(src.MTime) {
				src = ft
			}
		}
		return true
	}
	if walk(r.Path(e.Source), true) {
		for _, v := range vendored {
			if !walk(v, false) {
				break
			}
		}
	}
	e.Scanned = n
	e.NewestSource, e.NewestBuilt = src, so
	e.Stale = src != nil && so != nil && src.MTime.After(so.MTime)
}

// hostPath turns a path under the FS root back into the host's path.
func hostPath(r Roots, p string) string {
	if r.FS == "" || r.FS == "/" {
		return p
	}
	rel, err := filepath.Rel(r.FS, p)
	if err != nil {
		return p
	}
	return "/" + rel
}
