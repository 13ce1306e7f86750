package triage

import (
	"strings"

	"github.com/kcrash/kcrash/evidence/detail"
)

// ggml (llama.cpp, ollama, whisper.cpp) places whole layers and its KV cache
// on the GPU up front: its memory knobs are the number of offloaded layers,
// the context and the quantisation, not a serving framework's fraction.

const ggmlHeadroomStep = "Leave more headroom: offload fewer layers to the GPU (`-ngl`/`--n-gpu-layers`; ollama's `num_gpu`), use a smaller context (`-c`) or a quantised KV cache (`--cache-type-k q8_0 --cache-type-v q8_0`), a smaller quantisation of the model, or spread it over several GPUs (`--tensor-split`)."

// ggml: the verdict's evidence was written by ggml.
func (s *stepCtx) ggml() bool {
	for _, c := range s.ev {
		if c.f.Details.Text(detail.Framework) == "ggml" || strings.Contains(c.f.Text, "ggml_") || strings.Contains(c.f.Text, "llama_") {
			return true
		}
	}
	return false
}
