package triage

import (
	"regexp"

	"github.com/kcrash/kcrash/evidence/detail"
)

// rocBLAS reads one Tensile library per gfx ISA (TensileLibrary_lazy_gfx1030.dat);
// a build made with merged architectures, and older rocBLAS, read a single
// TensileLibrary.dat. "Cannot read .../TensileLibrary.dat" names no ISA, so it
// is read two ways: the library for this GPU is not in the install (a build
// without its ISA, an HSA_OVERRIDE_GFX_VERSION naming another), or rocBLAS
// looked in the wrong place (ROCm or torch installed under another prefix, a
// ROCBLAS_TENSILE_LIBPATH or LD_LIBRARY_PATH that points at another rocBLAS's
// files). Both leave the GPU without its GEMM kernels, and rocBLAS aborts; the
// reading stays gpu_arch_mismatch at medium confidence and the steps name both.

var tensileDatRe = regexp.MustCompile(`TensileLibrary\.dat\b`)

// tensileNoArch: every piece of evidence is rocBLAS's failed read of a
// Tensile library that names no gfx ISA.
func tensileNoArch(ev []*cf) bool {
	n := 0
	for _, c := range ev {
		if c.f.Details.Text(detail.Signature) != "rocblas-no-tensile-library" {
			continue
		}
		if c.f.Details.Text(detail.Arch) != "" || !tensileDatRe.MatchString(c.f.Text) {
			return false
		}
		n++
	}
	return n > 0
}

// tensilePathStep: the second reading, the library's path.
func tensilePathStep() string {
	return "rocBLAS could not read its Tensile library, and the file it names (`TensileLibrary.dat`) names no gfx ISA: either the install has no library for this GPU's ISA (the arch steps below), or rocBLAS looked in the wrong place (ROCm or torch under another prefix, a `ROCBLAS_TENSILE_LIBPATH` or `LD_LIBRARY_PATH` pointing at another rocBLAS). List the directory the error names next to `/opt/rocm/lib/rocblas/library/` (and torch's `torch/lib/rocblas/library/`): if a `TensileLibrary*_gfxNNNN*` file for the GPU (`rocminfo | grep gfx`) is there, set `ROCBLAS_TENSILE_LIBPATH` to that directory; if none is, the install lacks the GPU's ISA."
}
