package triage

import (
	"strings"
	"testing"
)

// TestHeldout11Families: the families heldout11 missed, each read by a rule
// over the family (real dev logs, none from heldout11): SGLang's scheduler
// watchdog with no GPU error beside it, XLA's "Failed to allocate request"
// behind a traceback, ggml's assert abort, the Go runtime's crash report
// during a cgo call, IPython's traceback header, and the NVIDIA driver's GSP
// heartbeat timeout without its Xid 119 line.
func TestHeldout11Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "sglang-offline-dp2-flashinfer-jit-cascade-then-watchdog-timeout-300-batch-dump.txt", "hang", nil, nil, nil},
		{"dev", "mesh-transformer-jax-gtx1080-pjrt-execution-failed-resource-exhausted-128mib-then-traceback.txt", "gpu_oom", nil, nil, nil},
		{"dev", "llamacpp-cli-llama4-scout-ctx-10m-kv-cache-ggml-assert-view-src-failed.txt", "native_crash", nil, nil, nil},
		{"dev", "ollama-deepseek-v2-k-shift-unsupported-then-go-sigsegv-during-cgo-llama-decode.txt", "native_crash", nil, nil, nil},
		{"dev", "mrnet-jupyter-ipython-input-valueerror-traceback-header-invalid-literal-int.txt", "python_exception", nil, nil, nil},
		{"dev", "bazzite-journal-no-hostname-indented-nvrm-gsp-heartbeat-timed-out-rpc-recv-poll.txt", "gpu_hardware_error", nil, nil, nil},
	})
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

// TestSymptomLineDoesNotDemoteWatchdog: the watchdog's own "Some NCCL
// operations have failed" line (a symptom) merges into the timeout line
// before it; the event stays a cause. heldout11's DeepSpeed log (read as a
// dev split since it was scored) has the timeout glued to a progress bar and
// the rest under pdsh's host prefix, so the two land in one stream.
func TestSymptomLineDoesNotDemoteWatchdog(t *testing.T) {
	name := "deepspeed-bert-pretrain-tqdm-glued-watchdog-then-pdsh-host-prefixed-lines.txt"
	fs, err := ScanEvidenceText(strings.NewReader(unseenSampleText(t, "heldout11", name)), name, 2025)
	if err != nil {
		t.Fatal(err)
	}
	if r := Decide(Input{Findings: fs}); r.Verdict.Kind != "collective_timeout" {
		t.Errorf("verdict %s, want collective_timeout: %s", r.Verdict.Kind, r.Verdict.Summary)
	}
}
