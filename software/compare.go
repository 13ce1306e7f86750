package software

import (
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Row is one line of two bundles' software side by side.
type Row struct {
	What string `json:"what"` // "torch", "ROCm", "libamdhip64.so.6"
	A    string `json:"a"`
	B    string `json:"b"`
	Same bool   `json:"same"`
}

// Compare lines up two reports for `kcrash diff` and the report page: the
// main interpreter's GPU-serving and develop-installed packages, driver and
// runtime versions, then the mapped libraries whose build differs (by file
// name: the same name with another build id, size or version).
func Compare(a, b *Report) []Row {
	var rows []Row
	add := func(what, x, y string) {
		if x != "" || y != "" {
			rows = append(rows, Row{What: what, A: x, B: y, Same: x == y})
		}
	}
	pa, pb := mainPackages(a), mainPackages(b)
	names := map[string]bool{}
	for n := range pa {
		names[n] = true
	}
	for n := range pb {
		names[n] = true
	}
	for _, n := range sortedKeys(names) {
		add(n, pa[n], pb[n])
	}
	add("NVIDIA driver", a.Runtime.NVIDIADriver, b.Runtime.NVIDIADriver)
	add("CUDA toolkit", a.Runtime.CUDA, b.Runtime.CUDA)
	add("ROCm", a.Runtime.ROCm, b.Runtime.ROCm)
	add("amdgpu", a.Runtime.AMDGPU, b.Runtime.AMDGPU)
	la, lb := libsByName(a), libsByName(b)
	libNames := map[string]bool{}
	for n := range la {
		if _, ok := lb[n]; ok && la[n] != lb[n] {
			libNames[n] = true
		}
	}
	for _, n := range sortedKeys(libNames) {
		add(n, la[n], lb[n])
	}
	return rows
}

// mainPackages is name → "version (develop, commit)" for the first
// interpreter's GPU-serving and editable packages.
func mainPackages(r *Report) map[string]string {
	out := map[string]string{}
	if len(r.Python) == 0 {
		return out
	}
	for _, p := range r.Python[0].Packages {
		if !p.GPU && p.Editable == nil {
			continue
		}
		out[Normalize(p.Name)] = strings.TrimPrefix(packageText(p), p.Name+" ")
	}
	return out
}

// libsByName is file name → build (build id, else size) of the mapped libraries.
func libsByName(r *Report) map[string]string {
	out := map[string]string{}
	for _, l := range r.Libraries {
		id := l.BuildID
		if id == "" {
			id = "size " + strconv.FormatInt(l.Size, 10)
		} else {
			id = "build id " + shortID(id)
		}
		n := filepath.Base(l.Path)
		if prev, ok := out[n]; ok && prev != id {
			id = prev + " + " + id // two builds of one name in the tree
		}
		out[n] = id
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
