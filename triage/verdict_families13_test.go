package triage

import (
	"strings"
	"testing"
)

// TestHeldout13Families: the families heldout13 missed, each read by a rule
// over the family (real dev logs, and heldout13's own misses since it was
// scored): a traceback that is its stream's last words without its exception
// line (cut after its frames or right after its header, also behind a prefix
// no rule strips: pdsh's host, DeepSpeed's `worker-5: [rank22]:`), and, as a
// negative control, torchelastic's launcher sending a signal to its own
// workers (the generic fallback read it as a kill).
func TestHeldout13Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "vllm-v1-vllmworker-rank1-compile-or-warm-up-capture-model-frames-cut.txt", "python_exception", []string{"without its exception line", "decorate_context (_contextlib.py:116)"}, nil, nil},
		{"dev", "gpt-neox-multinode-no-hostfile-init-process-group-rendezvous-frames-cut.txt", "python_exception", []string{"without its exception line", "init_process_group"}, nil, nil},
		{"dev", "llamafactory-deepspeed-hostfile-gpu003-prefixed-traceback-main-process-first-frames-cut.txt", "python_exception", []string{"__enter__ (contextlib.py:135)"}, nil, nil},
		{"heldout13", "deepspeed-llama2-70b-h100-host-prefixed-traceback-engine-step-get-global-norm-cut.txt", "python_exception", []string{"wrapped_fn (nvtx.py:15)"}, nil, nil},
		{"heldout13", "deepspeed-multinode-worker-5-rank22-prefixed-traceback-initialize-module-to-device-cut.txt", "python_exception", []string{"_configure_distributed_model"}, nil, nil},
		{"heldout13", "sglang-b200-tp2-scheduler-hit-an-exception-cuda-graph-capture-traceback-head.txt", "python_exception", []string{"without its exception line"}, nil, nil},
		{"heldout13", "sglang-npu-received-sigquit-from-child-then-tp3-scheduler-exception-init-model-runner.txt", "python_exception", []string{"_init_model_runner"}, nil, nil},
		{"heldout13", "vllm-0120-gh200-tp4-pp2-enginecore-dp0-frames-capture-cudagraphs-dummy-run-cut.txt", "python_exception", nil, nil, nil},
		{"heldout13", "vllm-0130-glm46-h20-traceback-frames-glm4-moe-dynamo-fx-graph-module-cut.txt", "python_exception", nil, nil, nil},
		{"heldout13", "vllm-053-vllmworkerprocess-pynccl-init-frames-nccl-check-cut.txt", "python_exception", []string{"NCCL_CHECK"}, nil, nil},
		{"heldout13", "vllm-0641-engine-py-135-error-prefixed-traceback-frames-llama-forward-mlp.txt", "python_exception", nil, nil, nil},
		{"heldout13", "vllm-echo-max-tokens-0-starlette-fastapi-frames-run-endpoint-function-cut.txt", "python_exception", []string{"run_endpoint_function"}, nil, nil},
		{"heldout13", "vllm-ramalama-launcher-routes-then-error-traceback-header-only.txt", "python_exception", []string{"cut right after its header"}, nil, nil},
		{"heldout13", "vllm-rayworkerwrapper-ip-prefixed-worker-base-620-frames-deepseek-v2-layer.txt", "python_exception", nil, nil, nil},

		{"dev", "neuronx-lightning-torchelastic-bracketed-warning-sending-process-closing-signal-sigterm-ten-workers.txt", "unknown", nil, nil, nil},
		{"dev", "firefly-torchrun-multi-gpu-sending-process-closing-signal-sighup-four-workers.txt", "unknown", nil, nil, nil},
		{"dev", "pytorch-deit-torchrun-sending-process-closing-signal-sigterm-seven-workers-padded.txt", "unknown", nil, nil, nil},
		{"heldout13", "pytorch-torchrun-quoted-eval-bar-100-percent-glued-sending-closing-signal-sigterm.txt", "unknown", nil, nil, nil},
	})
}

// TestCutTracebackNeedsTheEnd: a traceback without its exception line is
// read only when nothing but its frames follows it to the end of its stream.
// The same real tracebacks followed by real progress lines of the same
// stream (a logged and handled exception, a paste that goes on) are not read
// (the generic fallback, off here, may still read a traceback's header as
// an exception's generic wording).
func TestCutTracebackNeedsTheEnd(t *testing.T) {
	cut := unseenSampleText(t, "dev", "vllm-v1-vllmworker-rank1-compile-or-warm-up-capture-model-frames-cut.txt")
	host := unseenSampleText(t, "dev", "llamafactory-deepspeed-hostfile-gpu003-prefixed-traceback-main-process-first-frames-cut.txt")
	header := unseenSampleText(t, "heldout13", "vllm-ramalama-launcher-routes-then-error-traceback-header-only.txt")
	routes := header[:strings.Index(header, "WARNING")]
	// The same host's own log line, from the same real log.
	hostLine := strings.SplitAfter(host, "\n")[0]
	for _, c := range []struct{ name, text string }{
		{"frames then the server's routes", cut + strings.ReplaceAll(routes, "INFO", "(VllmWorker rank=1 pid=12231) INFO")},
		{"host-prefixed frames then the host's log line", host + hostLine},
		{"header then routes", header + routes},
	} {
		fs, err := ScanEvidenceText(strings.NewReader(c.text), c.name, 2025)
		if err != nil {
			t.Fatal(err)
		}
		if r := decideWithFallback(false, Input{Findings: fs}); r.Verdict.Kind == "python_exception" {
			t.Errorf("%s: verdict python_exception, want none: %s", c.name, r.Verdict.Summary)
		}
	}
}
