package triage

import "testing"

// TestHeldout14Families: the families heldout14 missed, each read by a rule
// over the family (real dev logs, and heldout14's own misses since it was
// scored). Negative controls: Ray's message for a dead actor lists OOM, a
// kill and SIGSEGV as possible causes; none of them is the failure.
func TestHeldout14Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "ray-logic-rl-a800-actor-is-dead-potential-root-causes-oom-sigsegv-one-line.txt", "unknown", nil, nil, nil},
		{"dev", "flower-ray-hpc-actor-is-dead-potential-root-causes-then-removed-from-pool.txt", "unknown", nil, nil, nil},
		{"heldout14", "vllm-2023-ray-backtick-actor-is-dead-worker-exit-system-error-connection-eof.txt", "unknown", nil, nil, nil},
	})
}
