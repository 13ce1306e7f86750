package triage

import (
	"strings"

	"github.com/kcrash/kcrash/evidence"
)

// A log often names its framework and its GPU vendor only in lines that are
// no evidence: a banner, a warning about the compiler, a path in an
// assert's file name, the author's own sentence above a paste. The scanner
// counts those names over the whole log, and every finding it returns
// carries the one the log names most (log_framework, log_vendor), so that
// next steps can fit the log when the evidence lines themselves are silent.

const (
	detailLogFramework = "log_framework"
	detailLogVendor    = "log_vendor"
)

// The spellings of each name. A framework's name counts as a whole word
// (VLLM_USE_V1 and /vllm/ count, "myvllmfork" does not); a vendor's
// spellings are ones only that vendor's stack prints. PyTorch on ROCm keeps
// "cuda" in its names (torch.cuda; native/cuda is hipified to native/hip), so
// plain "cuda" counts for neither.
var (
	vllmNames   = lsNameSet("vllm", "VLLM", "vLLM", "Vllm")
	sglangNames = lsNameSet("sglang", "SGLang", "SGLANG", "Sglang")
	nvidiaNames = lsNameSet("NVIDIA", "nvidia-smi", "NVRM", "NVCC", "nvcc", "GPUDirect", "libcuda.so", "native/cuda/", `native\cuda\`, "cuDNN", "cudnn", "CUDA Version", "cudaSuccess", "GeForce", "GTX", "RTX", "Quadro", "Tesla ")
	amdNames    = lsNameSet("ROCm", "rocm", "ROCM_", "amdgpu", "AMD Instinct", "Radeon", "RCCL", "rccl", "hipcc", "native/hip/", "MIOpen", "HSA_", "gfx9", "gfx10", "gfx11", "gfx12", "HIP_VISIBLE_DEVICES")
)

// lsNames is a set of spellings, each with its least common byte pair so
// that a line's pair table rules most of them out without a search.
type lsNames struct {
	words   []string
	bigrams []uint16
}

func lsNameSet(words ...string) lsNames {
	n := lsNames{words: words}
	for _, w := range words {
		n.bigrams = append(n.bigrams, lsRareBigram(w))
	}
	return n
}

// in says whether line holds one of the spellings; whole says it must stand
// as a word. bg is the line's pair table.
func (n lsNames) in(line string, bg *lsBigrams, whole bool) bool {
	for i, w := range n.words {
		if !bg.has(n.bigrams[i]) {
			continue
		}
		for off := 0; off < len(line); {
			j := strings.Index(line[off:], w)
			if j < 0 {
				break
			}
			j += off
			if !whole || (!lsAlnum(line, j-1) && !lsAlnum(line, j+len(w))) {
				return true
			}
			off = j + 1
		}
	}
	return false
}

func lsAlnum(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// logNames counts, per name, the lines that name it.
type logNames struct {
	vllm, sglang, nvidia, amd int
}

// note counts the names in line, whose pair table bg holds.
func (n *logNames) note(line string, bg *lsBigrams) {
	if vllmNames.in(line, bg, true) {
		n.vllm++
	}
	if sglangNames.in(line, bg, true) {
		n.sglang++
	}
	if nvidiaNames.in(line, bg, false) {
		n.nvidia++
	}
	if amdNames.in(line, bg, false) {
		n.amd++
	}
}

// stamp puts the log's framework and vendor, where one side outnumbers the
// other, on every finding.
func (n *logNames) stamp(fs []evidence.Finding) {
	fw, vendor := "", ""
	switch {
	case n.vllm > n.sglang:
		fw = "vllm"
	case n.sglang > n.vllm:
		fw = "sglang"
	}
	switch {
	case n.nvidia > n.amd:
		vendor = "nvidia"
	case n.amd > n.nvidia:
		vendor = "amd"
	}
	if fw == "" && vendor == "" {
		return
	}
	for i := range fs {
		if fs[i].Details == nil {
			fs[i].Details = map[string]any{}
		}
		if fw != "" {
			fs[i].Details[detailLogFramework] = fw
		}
		if vendor != "" {
			fs[i].Details[detailLogVendor] = vendor
		}
	}
}

// loggedFramework and loggedVendor are what the findings' log names say.
func (x *facts) loggedFramework() string { return x.loggedName(detailLogFramework) }
func (x *facts) loggedVendor() string    { return x.loggedName(detailLogVendor) }

func (x *facts) loggedName(key string) string {
	for _, c := range x.all {
		if c.hidden {
			continue
		}
		if v, _ := c.f.Details[key].(string); v != "" {
			return v
		}
	}
	return ""
}
