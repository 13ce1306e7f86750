package triage

import (
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// GPUs whose runtime is neither CUDA nor ROCm (Intel's i915/xe, Moore
// Threads' MTGPU) get steps that name neither: CUDA_LAUNCH_BLOCKING, HIP
// graphs or an amdgpu VM fault mean nothing there, and their drivers keep
// their own record of a hang.

// otherGPUVendor is "intel" or "moorethreads" when the verdict's evidence
// comes from such a GPU's driver, else "".
func (s *stepCtx) otherGPUVendor() string {
	for _, c := range s.ev {
		switch v := c.f.Details.Text(detail.Vendor); v {
		case "intel", "moorethreads":
			return v
		}
	}
	return ""
}

// gpuHangSteps: a hung engine's steps, by the vendor that reported it.
func (s *stepCtx) gpuHangSteps() string {
	switch s.otherGPUVendor() {
	case "intel":
		return strings.Join([]string{
			"Intel's driver saved the hung context's error state: read it right after the hang, before another overwrites it (i915: `/sys/class/drm/card0/error`; xe: `/sys/class/drm/card0/device/devcoredump/data`); it names the engine, the process and the batch buffer that stopped.",
			"A GPU hang can be a bug anywhere in the stack (kernel driver, GuC/HuC firmware, Mesa or the compute runtime): check that the kernel, linux-firmware's i915/xe files and the user-space driver are current, and report a hang that recurs on one workload to the driver's tracker with that error state.",
			"Look in kmsg.log for a GPU page fault (`CAT error`, `page fault`) just before the hang or reset: a fault that stalled the engine is the cause, the reset its consequence.",
		}, "\n")
	case "moorethreads":
		return "A hang or reset often follows a page fault: look in kmsg.log for the driver's MMU fault lines just before the reset."
	}
	if s.vulkanDeviceLost() {
		return vulkanDeviceLostSteps()
	}
	return strings.Join([]string{
		"A hang or reset often follows a page fault: look in kmsg.log for an amdgpu VM fault or Xid 13/31 just before the ring timeout or reset.",
		s.syncStep(), s.graphStep(), s.opAloneStep(),
	}, "\n")
}

// otherGPUSteps adds the steps for a fault on a GPU that is neither
// NVIDIA's nor AMD's and reports whether it did.
func (s *stepCtx) otherGPUSteps(k evidence.Kind, add func(string)) bool {
	if s.otherGPUVendor() == "" {
		return false
	}
	add("The GPU's kernel driver caught a kernel of the program (or of a library it calls) reading or writing memory that was not mapped for it (freed, out of bounds, a page-table entry not valid): the driver's lines in the log name the faulting address and the process.")
	add("Make kernel launches synchronous with the vendor runtime's setting, so that the error is reported at the operation that faulted, and run that operation alone with the same shapes and dtypes to reproduce it.")
	if k == evidence.GPUPageFault {
		add(s.pageFaultStep())
	}
	add(s.nativeDebugStep())
	return true
}
