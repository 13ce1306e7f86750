package triage

import (
	"slices"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/human"
)

// softwareSteps turns the software collector's build problems into next
// steps. Those in the package or library the suspect kernel-API call lives
// in come first: a stale or mixed build explains a kernel fault better than
// anything the kernel's arguments say. The others come after the usual steps.
func (s *stepCtx) softwareSteps() (first, rest []string) {
	call, _ := s.x.suspect()
	seen := map[string]bool{}
	for _, c := range s.x.all {
		if c.hidden || c.f.Source != evidence.SourceSoftware {
			continue
		}
		d := c.f.Details
		fix := softwareFix(d.Text(detail.SoftwareIssue), d.Text(detail.Package))
		if fix == "" || seen[c.f.Text] {
			continue
		}
		seen[c.f.Text] = true
		if call != nil && callIn(call.API, d.Text(detail.Package), d.Text(detail.Library)) {
			first = append(first, "Build problem first: the suspect call "+call.API+" lives in "+human.OrDash(d.Text(detail.Package))+": "+c.f.Text+". "+fix)
			continue
		}
		rest = append(rest, "Build problem: "+c.f.Text+". "+fix)
	}
	return first, rest
}

func softwareFix(kind, pkg string) string {
	switch kind {
	case "stale_build":
		return "Rebuild it in its checkout (`python setup.py develop` or `pip install -e .`; for aiter, re-run setup.py develop), restart, and retry before debugging the kernel."
	case "deleted_library", "modified_library":
		return "The process ran the build that was on disk before: restart the server so every process loads the current one, and retry."
	case "duplicate_runtime":
		return "Make one copy load: check LD_LIBRARY_PATH and LD_PRELOAD, and which wheel bundles its own copy (`ldd` on its .so files)."
	case "driver_mismatch":
		return "The NVIDIA driver was updated without a reboot (or the container carries another libcuda): reboot, or load the matching module, so both halves agree."
	case "torch_runtime_mismatch":
		return "Install the torch build for this host's runtime (the rocmX.Y or cuXYZ wheel index), or the driver/ROCm it was built for."
	}
	return ""
}

// callIn says whether a kernel-API call (a dotted Python path such as
// "srt.layers.attention.aiter_backend.AiterAttnBackend.forward_extend" or
// "sglang.custom_op.topk_softmax") names the package or
// the directory of the library a build problem is about.
func callIn(api, pkg, lib string) bool {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	p := norm(pkg)
	for _, comp := range strings.Split(api, ".") {
		comp = norm(comp)
		if comp == "" {
			continue
		}
		// "aiter_backend" (sglang's backend calling aiter) names aiter too
		if comp == p || slices.Contains(strings.Split(comp, "_"), p) || (lib != "" && strings.Contains(norm(lib), "/"+comp+"/")) {
			return true
		}
	}
	return false
}
