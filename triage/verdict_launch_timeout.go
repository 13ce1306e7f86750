package triage

import (
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// "the launch timed out and was terminated" is the display watchdog
// (Windows' TDR, X's limit on an interactive GPU) killing a kernel that ran
// for seconds on a GPU that also drives a display: a hang of its own kind,
// with its own fix.

func launchTimeout(d evidence.Details) bool {
	switch d.Text(detail.Signature) {
	case "gpu-launch-timeout", "gpu-launch-timeout-text":
		return true
	}
	return false
}

func headlineGPUHang(d evidence.Details, short string) string {
	if launchTimeout(d) {
		return "GPU hang: a kernel ran past the watchdog (the launch timed out and was terminated): " + short
	}
	return "GPU hang: " + short
}

// launchTimeoutStep is the watchdog's fix; "" for other hangs.
func (s *stepCtx) launchTimeoutStep() string {
	for _, c := range s.ev {
		if launchTimeout(c.f.Details) {
			return "A kernel ran longer than the display watchdog allows (Windows' TDR, 2 s by default; X's limit on a GPU that drives a screen): run on a GPU with no display attached (`nvidia-smi` shows `Disp.A Off`), raise the limit (Windows: `TdrDelay` in the registry, or TCC mode on a data-centre GPU; Linux: no X server on that GPU, or `Option \"Interactive\" \"off\"`), or split the work into shorter kernels (smaller batches)."
		}
	}
	return ""
}
