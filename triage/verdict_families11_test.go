package triage

import (
	"strings"
	"testing"
)

// TestHeldout11Families: the families heldout11 missed, each read by a rule
// over the family (real dev logs, none from heldout11): SGLang's scheduler
// watchdog with no GPU error beside it, XLA's "Failed to allocate request"
// behind a traceback, ggml's assert abort, and the Go runtime's crash report
// during a cgo call.
func TestHeldout11Families(t *testing.T) {
	for _, c := range []struct{ name, kind string }{
		{"sglang-offline-dp2-flashinfer-jit-cascade-then-watchdog-timeout-300-batch-dump.txt", "hang"},
		{"mesh-transformer-jax-gtx1080-pjrt-execution-failed-resource-exhausted-128mib-then-traceback.txt", "gpu_oom"},
		{"llamacpp-cli-llama4-scout-ctx-10m-kv-cache-ggml-assert-view-src-failed.txt", "native_crash"},
		{"ollama-deepseek-v2-k-shift-unsupported-then-go-sigsegv-during-cgo-llama-decode.txt", "native_crash"},
	} {
		text := unseenSampleText(t, "dev", c.name)
		fs, err := ScanEvidenceText(strings.NewReader(text), c.name, 2025)
		if err != nil {
			t.Fatal(err)
		}
		r := Decide(Input{Findings: fs})
		if string(r.Verdict.Kind) != c.kind {
			t.Errorf("%s: verdict %s, want %s: %s", c.name, r.Verdict.Kind, c.kind, r.Verdict.Summary)
		}
	}
}
