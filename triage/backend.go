package triage

import (
	"strings"
)

// BackendSetting is one setting that chooses which kernels a run uses: the
// aiter switch of SGLang or vLLM, an attention or MoE backend. The seed's
// step 2 asks for it first: a fault in an aiter kernel is only a lead when
// aiter was on.
type BackendSetting struct {
	Name  string `json:"name"`  // SGLANG_USE_AITER, --attention-backend
	Value string `json:"value"` // "1", "aiter"
	From  string `json:"from"`  // "environment" or "command line"
}

// backendEnvVars are the environment variables that switch kernel backends.
var backendEnvVars = map[string]bool{
	"SGLANG_USE_AITER": true, "SGLANG_AITER_MOE": true, "SGLANG_USE_AITER_AR": true,
	"VLLM_ROCM_USE_AITER": true, "VLLM_ROCM_USE_AITER_MOE": true, "VLLM_ROCM_USE_AITER_MHA": true,
	"VLLM_ROCM_USE_AITER_LINEAR": true, "VLLM_ROCM_USE_AITER_RMSNORM": true, "VLLM_ROCM_USE_AITER_PAGED_ATTN": true,
	"VLLM_ATTENTION_BACKEND": true, "VLLM_USE_TRITON_FLASH_ATTN": true, "VLLM_ROCM_USE_AITER_MLA": true,
	"SGLANG_ATTENTION_BACKEND": true,
}

// backendFlags are the command-line flags of SGLang and vLLM that choose one.
var backendFlags = map[string]bool{
	"--attention-backend": true, "--prefill-attention-backend": true, "--decode-attention-backend": true,
	"--moe-runner-backend": true, "--moe-a2a-backend": true, "--sampling-backend": true, "--mm-attention-backend": true,
	"--fp8-gemm-backend": true,
}

// Backends reads the backend settings of a run from its environment (K=V)
// and its command line, environment first, each in the order given.
func Backends(env, argv []string) []BackendSetting {
	var out []BackendSetting
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && backendEnvVars[k] {
			out = append(out, BackendSetting{Name: k, Value: v, From: "environment"})
		}
	}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		name, val, eq := strings.Cut(a, "=")
		if !backendFlags[name] {
			continue
		}
		if !eq {
			if i+1 >= len(argv) {
				break
			}
			i++
			val = argv[i]
		}
		out = append(out, BackendSetting{Name: name, Value: val, From: "command line"})
	}
	return out
}

// backendAiter says whether the run's settings turn aiter on, and whether
// they say anything about it at all.
func (x *facts) backendAiter() (on, known bool) {
	for _, b := range x.backend {
		v := strings.ToLower(b.Value)
		switch {
		case strings.Contains(b.Name, "AITER"):
			known = true
			on = on || v == "1" || v == "true" || v == "yes" || v == "on"
		case strings.Contains(v, "aiter"):
			known, on = true, true
		}
	}
	return on, known
}

// backendText is the settings as one line, for summary.md's table, with
// what they mean for aiter when they say.
func backendText(bs []BackendSetting) string {
	var parts []string
	for _, b := range bs {
		if b.From == "environment" {
			parts = append(parts, mdCode(b.Name+"="+b.Value)+" (environment)")
		} else {
			parts = append(parts, mdCode(b.Name+" "+b.Value)+" (command line)")
		}
	}
	s := strings.Join(parts, ", ")
	if on, known := (&facts{backend: bs}).backendAiter(); known {
		if on {
			s += "; aiter on"
		} else {
			s += "; aiter off"
		}
	}
	return s
}
