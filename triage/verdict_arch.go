package triage

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// A GPU architecture mismatch is a build problem, not a kernel bug: the
// usual fault workflow (synchronous launches, the op alone, graphs off)
// cannot help, so its next steps only say which build the GPU needs.

var archRe = regexp.MustCompile(`\b(sm_\d{2,3}a?|gfx[0-9a-f]{3,4})\b|compute capability (\d{1,2})\.(\d)`)

// archFrom reads an architecture out of one text: "sm_120", "gfx1100", or
// "compute capability 7.5" as sm_75.
func archFrom(s string) string {
	m := archRe.FindStringSubmatch(s)
	switch {
	case m == nil:
		return ""
	case m[1] != "":
		return m[1]
	}
	return "sm_" + m[2] + m[3]
}

// gpuArch is the architecture the run's GPU has, as the evidence names it
// (the mismatch's own line first, then any finding), else as smi reported it.
func (x *facts) gpuArch(ev []*cf) string {
	for _, group := range [][]*cf{ev, x.all} {
		for _, c := range group {
			if c.hidden {
				continue
			}
			if a := c.f.Details.Text(detail.Arch); a != "" {
				return a
			}
			if a := archFrom(c.f.Text); a != "" {
				return a
			}
		}
	}
	// smi's list: every GPU's arch, each once ("sm_70, sm_89")
	var out []string
	for _, part := range strings.Split(x.in.GPUArch, ",") {
		if a := archFrom(strings.TrimSpace(part)); a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return strings.Join(out, ", ")
}

// archList joins the build setting's values for each arch of a list:
// TORCH_CUDA_ARCH_LIST's "7.0;8.9", PYTORCH_ROCM_ARCH's "gfx1030;gfx1036";
// quoted when there are several (the ';' is the shell's).
func archList(arch string, each func(string) string) string {
	var vs []string
	for _, a := range strings.Split(arch, ", ") {
		if v := each(a); v != "" {
			vs = append(vs, v)
		}
	}
	if len(vs) > 1 {
		return `"` + strings.Join(vs, ";") + `"`
	}
	return strings.Join(vs, "")
}

func (x *facts) headlineArchMismatch(ev []*cf, d evidence.Details, short string) string {
	s := "GPU architecture mismatch: no kernel in this build for the GPU"
	if toolchainArch(ev) {
		s = "GPU architecture mismatch: the CUDA toolchain (ptxas, LLVM) has no target for the GPU"
	}
	if a := x.gpuArch(ev); a != "" {
		s += " (" + a + ")"
	}
	what := d.Text(detail.Message)
	if what == "" {
		what = d.Text(detail.Code)
	}
	if what == "" {
		what = short
	}
	return s + ": " + what
}

// torchCUDAArch turns sm_120 into TORCH_CUDA_ARCH_LIST's "12.0".
func torchCUDAArch(sm string) string {
	n := strings.TrimSuffix(strings.TrimPrefix(sm, "sm_"), "a")
	if _, err := strconv.Atoi(n); err != nil || len(n) < 2 {
		return ""
	}
	return n[:len(n)-1] + "." + n[len(n)-1:]
}

// hsaOverrideFor is the HSA_OVERRIDE_GFX_VERSION that makes ROCm load the
// kernels of the nearest supported consumer ISA; "" where no such trick
// applies (Instinct parts, unknown ISAs).
func hsaOverrideFor(gfx string) string {
	switch {
	case strings.HasPrefix(gfx, "gfx103"):
		return "10.3.0"
	case strings.HasPrefix(gfx, "gfx110"), strings.HasPrefix(gfx, "gfx115"):
		return "11.0.0"
	case strings.HasPrefix(gfx, "gfx120"):
		return "12.0.1"
	}
	return ""
}

func (s *stepCtx) archSteps() string {
	arch := s.x.gpuArch(s.ev)
	vendor := s.x.vendor
	switch {
	case strings.HasPrefix(arch, "sm_"):
		vendor = "nvidia"
	case strings.HasPrefix(arch, "gfx"):
		vendor = "amd"
	}
	which := "this GPU"
	if arch != "" {
		which = "this GPU (" + arch + ")"
	}
	var out []string
	if tensileNoArch(s.ev) {
		out = append(out, tensilePathStep())
	}
	if toolchainArch(s.ev) {
		out = append(out, "The compiler that builds kernels at run time (ptxas, LLVM's NVPTX backend: Triton's and XLA's JIT, nvcc) does not know "+which+": it is older than the GPU, or the GPU is older than what it still supports. Use a CUDA toolkit that covers it (Triton: `TRITON_PTXAS_PATH` pointing at that toolkit's `bin/ptxas`; JAX: the jaxlib CUDA wheels of a CUDA that supports it), or, for an old GPU, an older toolkit.")
	}
	out = append(out, "This is a build problem, not a kernel bug: the program (PyTorch, or an extension or wheel it loads: vLLM, SGLang's sgl-kernel, flash-attn, aiter, llama.cpp) holds no kernel built for "+which+". Rebuilding or re-running with other inputs will not help until the build matches the GPU.")
	switch vendor {
	case "nvidia":
		check := "See what the installed torch was built for: `python -c 'import torch; print(torch.cuda.get_device_capability(), torch.cuda.get_arch_list())'`."
		fix := "Install a torch (and the other wheels) built for it, from the index of a CUDA version that supports it (Blackwell sm_100/sm_120 needs CUDA 12.8 or later, the cu128 wheels), or build the extension yourself for it"
		if v := archList(arch, torchCUDAArch); v != "" {
			fix += fmt.Sprintf(": `TORCH_CUDA_ARCH_LIST=%s pip install --no-build-isolation --no-binary :all: PACKAGE` (or `TORCH_CUDA_ARCH_LIST=%s` before `python setup.py install`)", v, v)
		} else {
			fix += " with `TORCH_CUDA_ARCH_LIST` set to its compute capability (e.g. `TORCH_CUDA_ARCH_LIST=9.0`)"
		}
		out = append(out, check, fix+".")
	case "amd":
		out = append(out, "See which ISAs the installed build has: `rocminfo | grep gfx` for the GPU, `python -c 'import torch; print(torch.cuda.get_arch_list())'` for torch.")
		target := "the GPU's gfx ISA"
		if arch != "" {
			target = arch
		}
		fix := "Install a ROCm torch (and wheels) built for " + target + ", or build the extension for it: `PYTORCH_ROCM_ARCH=" + archList(target, func(a string) string { return a }) + "` (aiter/CK: `GPU_ARCHS`)"
		if arch == "" {
			fix = "Install a ROCm torch (and wheels) built for the GPU's gfx ISA, or build the extension for it with `PYTORCH_ROCM_ARCH=gfxNNNN` (aiter/CK: `GPU_ARCHS`)"
		}
		out = append(out, fix+".")
		if o := hsaOverrideFor(strings.Split(arch, ", ")[0]); o != "" {
			out = append(out, fmt.Sprintf("A consumer Radeon that ROCm ships no kernels for can borrow those of the nearest supported ISA: `%s` (unsupported; on a failure, go back to a matching build).",
				s.kcrash("none", 0, "--env HSA_OVERRIDE_GFX_VERSION="+o)))
		} else if arch == "" {
			out = append(out, "On a consumer Radeon (RDNA2/3) without ROCm kernels, `HSA_OVERRIDE_GFX_VERSION` set to the nearest supported ISA (10.3.0 for gfx103x, 11.0.0 for gfx110x/gfx115x) lets the runtime load those (unsupported).")
		}
	default:
		out = append(out, "Compare the GPU's architecture with what the build holds: `python -c 'import torch; print(torch.cuda.get_arch_list())'`; install a build for it or rebuild the extension for it (`TORCH_CUDA_ARCH_LIST` on NVIDIA, `PYTORCH_ROCM_ARCH` on AMD).")
	}
	return strings.Join(out, "\n")
}

var (
	gfxRe       = regexp.MustCompile(`\bgfx[0-9a-f]{3,4}\b`)
	capNumRe    = regexp.MustCompile(`^(\d{1,2})\.(\d)$`)
	deviceCapRe = regexp.MustCompile(`CUDA Capability Major/Minor version number:\s*(\d{1,2})\.(\d)`)
)

// ArchFromSMI reads the GPUs' architectures out of GPU tool output, for a
// log that does not name them: rocm-smi's "GFX Version" (CSV, JSON or
// plain), rocminfo's "Name: gfx942" and ISA names, amd-smi's
// TARGET_GRAPHICS_VERSION, nvidia-smi's compute_cap column (`--query-gpu=…
// --format=csv`, its header naming the columns) and deviceQuery's "CUDA
// Capability Major/Minor version number". Each distinct arch once, in the
// order met, joined by ", "; "" when none is named.
func ArchFromSMI(text string) string {
	var out []string
	add := func(a string) {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	capCol := -1
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		for _, g := range gfxRe.FindAllString(line, -1) {
			add(g)
		}
		if m := deviceCapRe.FindStringSubmatch(line); m != nil {
			add("sm_" + m[1] + m[2])
		}
		cells := strings.Split(line, ",")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if i := slices.Index(cells, "compute_cap"); i >= 0 {
			capCol = i
			continue
		}
		if capCol >= 0 && capCol < len(cells) {
			if m := capNumRe.FindStringSubmatch(cells[capCol]); m != nil {
				add("sm_" + m[1] + m[2])
				continue
			}
		}
		if line == "" || strings.HasPrefix(line, "$") {
			capCol = -1 // the table ended
		}
	}
	return strings.Join(out, ", ")
}

// toolchainArch: the mismatch is the CUDA toolchain's own (ptxas or LLVM
// without a target for the GPU), not a prebuilt binary's.
func toolchainArch(ev []*cf) bool {
	for _, c := range ev {
		if c.f.Details.Text(detail.Signature) == "toolchain-unknown-arch" {
			return true
		}
	}
	return false
}

// archCauses are the arch-mismatch causes, less the toolchain's when XLA
// says it fell back to the driver's compiler (a terminal may have wrapped
// that warning so that its ptxas text stands on a line of its own).
func (x *facts) archCauses() []*cf {
	cs := x.causes(evidence.GPUArchMismatch)
	fellBack := false
	for _, c := range x.all {
		if c.f.Details.Text(detail.Signature) == "xla-ptxas-fallback" {
			fellBack = true
		}
	}
	if !fellBack {
		return cs
	}
	var out []*cf
	for _, c := range cs {
		if c.f.Details.Text(detail.Signature) != "toolchain-unknown-arch" {
			out = append(out, c)
		}
	}
	return out
}
