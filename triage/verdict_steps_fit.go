package triage

import (
	"regexp"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Next steps must fit what the evidence names: the framework (vLLM is not
// SGLang), the vendor (no ROCm step on a CUDA error), the GPU (a GeForce has
// no row remapping), the transport (a peer's reset is not a P2P problem) and
// the logging already in place.

// framework is the serving framework the command or the evidence names,
// else the one the log names elsewhere (a banner, a sentence above a paste):
// "sglang", "vllm" or "".
func (x *facts) framework() string {
	cmd := strings.ToLower(strings.Join(x.in.Command, " "))
	switch {
	case strings.Contains(cmd, "sglang"):
		return "sglang"
	case strings.Contains(cmd, "vllm"):
		return "vllm"
	}
	for _, c := range x.all {
		if c.hidden {
			continue
		}
		d := c.f.Details
		switch fw := d.Text(detail.Framework); fw {
		case "sglang", "vllm":
			return fw
		}
		sig, file, proc := d.Text(detail.Signature), d.Text(detail.FrameFile), d.Text(detail.Process)
		switch {
		case strings.HasPrefix(sig, "vllm-"), strings.Contains(file, "/vllm/"), strings.HasPrefix(proc, "EngineCore"), strings.HasPrefix(proc, "VllmWorker"):
			return "vllm"
		case strings.HasPrefix(sig, "sglang-"), strings.Contains(file, "/sglang/"):
			return "sglang"
		}
	}
	return x.loggedFramework()
}

// aiterOn: the run uses AMD's aiter kernels, as the environment, the command
// line or the evidence (a frame or call in aiter) says.
func (x *facts) aiterOn() bool {
	if on, known := x.backendAiter(); known {
		return on
	}
	for _, c := range x.all {
		if !c.hidden && (strings.Contains(c.f.Details.Text(detail.FrameFile), "/aiter/") || strings.Contains(strings.ToLower(c.f.Details.Text(detail.API)), "aiter")) {
			return true
		}
	}
	return false
}

// consumerRe matches product names of GPUs without ECC reporting, row
// remapping or DCGM support: GeForce and TITAN, Radeon (not Radeon Pro).
var consumerRe = regexp.MustCompile(`\b(?:NVIDIA )?(?:GeForce [^,;()]*?|TITAN [A-Z0-9]+|RTX [2-5]0[5-9]0(?: Ti| SUPER)?|Radeon (?:RX )?[0-9]{3,4}[A-Z]*(?: XTX| XT)?|Radeon RX [^,;()]*?)(?:\s*$|[,;()\n]|\s(?:with|GPU|has|on)\b)`)

// consumerGPU names the run's GPU when it is a consumer part, from smi's
// product names or the evidence; "" when it is not, or not known.
func (x *facts) consumerGPU() string {
	texts := append([]string(nil), x.in.GPUModels...)
	for _, c := range x.all {
		if !c.hidden {
			texts = append(texts, c.f.Details.Text(detail.GPUName), c.f.Text)
		}
	}
	for _, t := range texts {
		if strings.Contains(t, "Radeon Pro") || strings.Contains(t, "Instinct") {
			continue
		}
		if m := consumerRe.FindString(t); m != "" {
			return strings.TrimRight(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(m), ",;()")), " ")
		}
	}
	return ""
}

// peerLost is the root-cause finding of a NCCL connection that the remote
// end closed or reset (a socket, an InfiniBand completion error, NCCL's
// ncclRemoteError), if the verdict rests on one.
func (s *stepCtx) peerLost() *cf {
	for _, c := range s.ev {
		d := c.f.Details
		switch d.Text(detail.Signature) {
		case "nccl-peer-connection-lost", "nccl-net-failure":
			return c
		case "nccl-result-error":
			// A line of the net transport merged into the error it caused.
			if d.Text("nccl_result") == "ncclRemoteError" || d.Text(detail.Peer) != "" || d.Text("ib_status") != "" {
				return c
			}
		}
	}
	return nil
}

// kernelAPILevel is the level the kernel-API log given already has (0 when
// none): a step that only asks for that much logging again is dropped.
func (x *facts) kernelAPILevel() int {
	l := 0
	if x.in.KernelAPI != nil {
		l = x.in.KernelAPI.Level
	}
	if x.in.Run != nil && x.in.Run.Level > l && x.in.KernelAPI != nil {
		l = x.in.Run.Level
	}
	return l
}

// anyFailure: something failed that kcrash can see (an exit status that is
// not success, a finding of a failure). A log with none gets no "so that the
// next crash..." advice.
func (x *facts) anyFailure() bool {
	if x.exitCf != nil && x.exitCf.kind != evidence.CleanExit {
		return true
	}
	for _, c := range x.all {
		if !c.synth && !c.hidden {
			return true
		}
	}
	return x.in.KernelAPI != nil && (x.in.KernelAPI.UnfinishedCall != nil || len(x.in.KernelAPI.Exceptions) > 0)
}

// modelsVendor is the one vendor smi's product names show, "" when none or both.
func modelsVendor(models []string) string {
	amd, nv := false, false
	for _, m := range models {
		nv = nv || strings.Contains(m, "NVIDIA") || strings.Contains(m, "GeForce") || strings.Contains(m, "Tesla")
		amd = amd || strings.Contains(m, "AMD") || strings.Contains(m, "Radeon") || strings.Contains(m, "Instinct")
	}
	switch {
	case nv && !amd:
		return "nvidia"
	case amd && !nv:
		return "amd"
	}
	return ""
}
