package software

import (
	"encoding/json"
	"fmt"
	"strings"
)

// lineOrder is the order packages appear in the one-line stack summary.
var lineOrder = []string{"torch", "sglang", "vllm", "flashinfer-python", "flashinfer", "aiter", "amd-aiter",
	"sgl-kernel", "triton", "pytorch-triton-rocm", "transformers", "xformers", "flash-attn"}

// Line is the one-line stack summary of a report: the main interpreter's
// GPU-serving packages, then driver and runtime versions, then the number
// of build issues. "" when nothing is known.
func Line(rep *Report) string {
	var parts []string
	if len(rep.Python) > 0 {
		py := rep.Python[0] // the interpreter of most processes
		byName := map[string]Package{}
		for _, p := range py.Packages {
			if _, dup := byName[Normalize(p.Name)]; !dup {
				byName[Normalize(p.Name)] = p
			}
		}
		for _, n := range lineOrder {
			p, ok := byName[n]
			if !ok || (n == "flashinfer" && byName["flashinfer-python"].Name != "") || (n == "amd-aiter" && byName["aiter"].Name != "") {
				continue
			}
			parts = append(parts, packageText(p))
		}
		shown := map[string]bool{}
		for _, n := range lineOrder {
			shown[n] = true
		}
		for _, p := range py.Packages {
			if p.Editable != nil && !shown[Normalize(p.Name)] {
				parts = append(parts, packageText(p)) // a develop install is what people change
			}
		}
	}
	rt := rep.Runtime
	if rt.NVIDIADriver != "" {
		parts = append(parts, "NVIDIA "+rt.NVIDIADriver)
	}
	if rt.CUDA != "" {
		parts = append(parts, "CUDA "+rt.CUDA)
	}
	if rt.ROCm != "" {
		parts = append(parts, "ROCm "+strings.SplitN(rt.ROCm, "-", 2)[0])
	}
	if rt.AMDGPU != "" {
		parts = append(parts, "amdgpu "+rt.AMDGPU)
	}
	if len(parts) == 0 {
		return ""
	}
	s := strings.Join(parts, ", ")
	if n := len(rep.Issues); n > 0 {
		s += fmt.Sprintf("; %d build issue%s (software.json)", n, plural(n))
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func packageText(p Package) string {
	s := p.Name + " " + p.Version
	if p.Version == "" {
		s = p.Name
	}
	e := p.Editable
	if e == nil {
		return s
	}
	var d []string
	d = append(d, "develop")
	if g := e.Git; g != nil {
		switch {
		case g.Ahead != nil && *g.Ahead > 0:
			d = append(d, fmt.Sprintf("%d commit%s ahead of %s", *g.Ahead, plural(*g.Ahead), g.Upstream))
		case g.Commit != "":
			d = append(d, shortID(g.Commit))
		}
	}
	if e.Stale {
		d = append(d, "stale build")
	}
	return s + " (" + strings.Join(d, ", ") + ")"
}

// BundleLine is `kcrash show`'s line, from a bundle's file reader: "Stack:
// ..." and a newline, or "" when the bundle has no usable software.json.
func BundleLine(file func(name string) ([]byte, bool)) string {
	b, ok := file("software.json")
	if !ok {
		return ""
	}
	var rep Report
	if json.Unmarshal(b, &rep) != nil {
		return ""
	}
	if l := Line(&rep); l != "" {
		return "Stack: " + l + "\n"
	}
	return ""
}
