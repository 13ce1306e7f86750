package triage

import "testing"

// TestHeldout15Families: the families heldout15 missed, each read by a rule
// over the family (real dev logs, and heldout15's own misses since it was
// scored): ggml's assert without its file:line, alone or relayed by ollama's
// client ("llama runner process has terminated: GGML_ASSERT(...) failed"),
// which names the runner's abort; Gloo's send/recv timeout, raised as a
// RuntimeError or inside a framework's exception (collective_timeout, its
// headline and first step Gloo's, not NCCL's). Negative control: Megatron's
// first iterations skipping steps as the dynamic loss scaler starts (its
// `optimizer-unscale-and-check-inf` timer is a name, not a value).
func TestHeldout15Families(t *testing.T) {
	checkFamilies(t, []familyCase{
		{"dev", "ollama-deepseek-r1-1-5b-client-runner-terminated-ggml-assert-op-unary-failed.txt", "native_crash", []string{"GGML_OP_UNARY"}, nil, nil},
		{"dev", "ollama-057-granite32-vision-version-then-runner-terminated-ggml-assert-can-mul-mat.txt", "native_crash", nil, nil, nil},
		{"heldout15", "llamacpp-ollama-0314-vision-cpu-ggml-assert-i01-ge-0-lt-ne01-failed-one-line.txt", "native_crash", nil, nil, nil},
		{"heldout15", "ollama-041-arch-llama32-vision-runner-terminated-ggml-assert-nelements-failed.txt", "native_crash", nil, nil, nil},
		{"dev", "detectron2-eval-8gpu-all-gather-gloo-unbound-buffer-timed-out-send-runtimeerror.txt", "collective_timeout", []string{"Gloo timed out waiting 1800000 ms for a peer's send"}, []string{"GLOO_SOCKET_IFNAME"}, []string{"NCCL_P2P_DISABLE"}},
		{"dev", "kwola-ddp-broadcast-coalesced-gloo-unbound-buffer-timed-out-recv-traceback.txt", "collective_timeout", []string{"peer's recv"}, nil, nil},
		{"dev", "vnext-idol-8gpu-gloo-unbound-buffer-timed-out-send-one-line.txt", "collective_timeout", nil, nil, nil},
		{"heldout15", "sglang-qwen3-235b-2x8-a100-capture-cuda-graph-failed-gloo-unbound-buffer-send-timed-out-1800000ms.txt", "collective_timeout", []string{"Gloo timed out"}, nil, nil},
		{"heldout15", "megatron-lm-2022-bert-distributed-dataset-setup-then-first-iteration-10-skipped-loss-scale-8388608.txt", "unknown", nil, nil, nil},
	})
}
