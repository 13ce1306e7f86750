package triage

import (
	"fmt"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// glooTimeoutSig is configs/signatures.yaml's rule for Gloo's transport
// timeout. Gloo is not NCCL: the headline and first step must not send the
// reader to NCCL WARN lines and NCCL_P2P_DISABLE, which a Gloo send or
// receive (a CPU tensor over TCP) never involves.
const glooTimeoutSig = "gloo-transport-timeout"

// glooTimeoutHeadline is the headline of a Gloo send/recv timeout, "" when
// d is not one.
func glooTimeoutHeadline(d evidence.Details) string {
	if d.Text(detail.Signature) != glooTimeoutSig {
		return ""
	}
	at := ""
	if src := d.Text("source"); src != "" {
		at = " (" + src + ")"
	}
	return fmt.Sprintf("Gloo timed out waiting %s ms for a peer's %s%s; usually the symptom of a rank that failed or stalled first", d.Text(detail.TimeoutMs), d.Text("operation"), at)
}

// glooTimeoutStep is the first step for a Gloo send/recv timeout among ev,
// "" when none is.
func glooTimeoutStep(ev []*cf) string {
	for _, c := range ev {
		if c.f.Details.Text(detail.Signature) == glooTimeoutSig {
			return "Gloo waited the process group's whole timeout for a peer's send or receive: that peer most likely failed, hung or never reached the same call (a rank that skipped a collective, one still compiling or capturing graphs); collect every rank's bundle and run `kcrash merge DIR` to find it, and check that the hosts reach each other on GLOO_SOCKET_IFNAME's interface."
		}
	}
	return ""
}
