package kernlog

import (
	"regexp"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// The NVIDIA driver's own status for a GPU that no longer answers on PCIe is
// NV_ERR_GPU_IS_LOST, status 0x0000000F, whose text is "GPU lost from the
// bus" (nvstatuscodes.h): what a register read of all ones tells it, the
// event Xid 79 ("GPU has fallen off the bus") reports. The open driver
// (GSP-RM) prints the status where calls fail once the GPU is gone, often
// without the Xid line in the excerpt: the resource manager's asserts
// (`nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus
// [NV_ERR_GPU_IS_LOST] (0x0000000F) returned from rmStatus @ FILE:N`) and
// the GSP RPCs it can no longer send (`_issueRpcAndWait: rpcSendMessage
// failed with status 0x0000000f for fn N!`). Those lines are the lost GPU,
// not a crash of the driver: read as fallen off the bus. Other NVRM statuses
// in the same wordings (timeouts, full-chip resets) are not read here.
var gpuLostRe = regexp.MustCompile(`\bGPU lost from the bus\b|\bNV_ERR_GPU_IS_LOST\b|\brpcSendMessage failed with status 0x0*[fF]\b`)

// gpuLostLine is the cheap test before the regexp.
func gpuLostLine(t string) bool {
	return (strings.Contains(t, "lost from the bus") || strings.Contains(t, "GPU_IS_LOST") || strings.Contains(t, "rpcSendMessage failed")) && gpuLostRe.MatchString(t)
}

// gpuLost reports one such line; a run of them (the asserts and RPC failures
// alternate) folds into one finding.
func (p *parser) gpuLost(r *rec, t string) {
	f := newFinding(r, evidence.GPUHardwareError, "fallen_off_bus", "nvidia")
	fallenOffDetails(&f, t)
	f.Details.SetText(detail.Status, "NV_ERR_GPU_IS_LOST")
	p.flushBlock()
	p.emit(f, "fob|"+f.GPU)
}
