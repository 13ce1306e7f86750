package triage

import (
	"strings"
	"testing"
)

// TestHeldout11Families: the families heldout11 missed, each read by a rule
// over the family (real dev logs, none from heldout11): SGLang's scheduler
// watchdog with no GPU error beside it, XLA's "Failed to allocate request"
// behind a traceback, ggml's assert abort, the Go runtime's crash report
// during a cgo call, and IPython's traceback header.
func TestHeldout11Families(t *testing.T) {
	for _, c := range []struct{ name, kind string }{
		{"sglang-offline-dp2-flashinfer-jit-cascade-then-watchdog-timeout-300-batch-dump.txt", "hang"},
		{"mesh-transformer-jax-gtx1080-pjrt-execution-failed-resource-exhausted-128mib-then-traceback.txt", "gpu_oom"},
		{"llamacpp-cli-llama4-scout-ctx-10m-kv-cache-ggml-assert-view-src-failed.txt", "native_crash"},
		{"ollama-deepseek-v2-k-shift-unsupported-then-go-sigsegv-during-cgo-llama-decode.txt", "native_crash"},
		{"mrnet-jupyter-ipython-input-valueerror-traceback-header-invalid-literal-int.txt", "python_exception"},
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

// TestIPythonHeaderAlone: a notebook paste cut after IPython's header and
// the cell's source lines (no message line) still names the exception: the
// same real log cut before its last line.
func TestIPythonHeaderAlone(t *testing.T) {
	text := unseenSampleText(t, "dev", "mrnet-jupyter-ipython-input-valueerror-traceback-header-invalid-literal-int.txt")
	i := strings.Index(text, "ValueError: invalid literal")
	if i < 0 {
		t.Fatal("sample lacks its exception line")
	}
	fs, err := ScanEvidenceText(strings.NewReader(text[:i]), "ipython-header", 2025)
	if err != nil {
		t.Fatal(err)
	}
	r := Decide(Input{Findings: fs})
	if r.Verdict.Kind != "python_exception" || !strings.Contains(r.Verdict.Summary, "ValueError") {
		t.Errorf("verdict %s, want python_exception naming ValueError: %s", r.Verdict.Kind, r.Verdict.Summary)
	}
}
