package triage

import (
	"reflect"
	"testing"
)

// TestBackends reads the backend settings from the environment and the
// command line, both flag spellings (the flags from sgl-project/sglang#24224).
func TestBackends(t *testing.T) {
	got := Backends([]string{"HOME=/root", "VLLM_ROCM_USE_AITER=1", "SGLANG_USE_AITER=0"},
		[]string{"python3", "-m", "sglang.launch_server", "--attention-backend", "triton", "--sampling-backend=pytorch", "--tp", "4"})
	want := []BackendSetting{
		{"VLLM_ROCM_USE_AITER", "1", "environment"},
		{"SGLANG_USE_AITER", "0", "environment"},
		{"--attention-backend", "triton", "command line"},
		{"--sampling-backend", "pytorch", "command line"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Backends = %+v", got)
	}
	if on, known := (&facts{backend: got}).backendAiter(); !on || !known {
		t.Errorf("aiter on=%v known=%v, want on (VLLM_ROCM_USE_AITER=1)", on, known)
	}
	if Backends(nil, []string{"python3", "x.py", "--attention-backend"}) != nil {
		t.Errorf("a flag without its value read as a setting")
	}
}
