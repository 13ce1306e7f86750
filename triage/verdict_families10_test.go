package triage

import (
	"strings"
	"testing"
)

// TestHeldout10Families: the families heldout10 missed, each read by a rule
// over the family (real dev logs, none from heldout10): vLLM's API server
// waiting for an engine core that never starts, and the glog/THC wording of
// an uncorrectable ECC error pasted behind a Markdown backtick.
func TestHeldout10Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "hami-core-vllm-tp2-apiserver-waiting-for-1-local-core-engine-proc-repeated.txt", "hang", nil, nil, nil},
		{"dev", "paddle-glog-check-failed-0-vs-39-cuda-error-uncorrectable-ecc-backtick.txt", "gpu_hardware_error", nil, nil, nil},
	})
	// One or two start-wait lines are an ordinary start, not a stall: the
	// same real log cut to its first two lines reads as nothing.
	text := unseenSampleText(t, "dev", "hami-core-vllm-tp2-apiserver-waiting-for-1-local-core-engine-proc-repeated.txt")
	lines := strings.SplitAfter(text, "\n")
	fs, err := ScanEvidenceText(strings.NewReader(strings.Join(lines[:2], "")), "two-waits", 2025)
	if err != nil {
		t.Fatal(err)
	}
	if k := Decide(Input{Findings: fs}).Verdict.Kind; k == "hang" {
		t.Errorf("two start-wait lines: verdict %s, want no hang", k)
	}
}
