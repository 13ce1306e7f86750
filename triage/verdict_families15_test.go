package triage

import "testing"

// TestHeldout15Families: the families heldout15 missed, each read by a rule
// over the family (real dev logs, and heldout15's own misses since it was
// scored): ggml's assert without its file:line, alone or relayed by ollama's
// client ("llama runner process has terminated: GGML_ASSERT(...) failed"),
// which names the runner's abort.
func TestHeldout15Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "ollama-deepseek-r1-1-5b-client-runner-terminated-ggml-assert-op-unary-failed.txt", "native_crash", []string{"GGML_OP_UNARY"}, nil, nil},
		{"dev", "ollama-057-granite32-vision-version-then-runner-terminated-ggml-assert-can-mul-mat.txt", "native_crash", nil, nil, nil},
		{"heldout15", "llamacpp-ollama-0314-vision-cpu-ggml-assert-i01-ge-0-lt-ne01-failed-one-line.txt", "native_crash", nil, nil, nil},
		{"heldout15", "ollama-041-arch-llama32-vision-runner-terminated-ggml-assert-nelements-failed.txt", "native_crash", nil, nil, nil},
	})
}
