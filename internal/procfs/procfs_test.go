package procfs

import (
	"reflect"
	"testing"
)

func TestSplitNUL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\x00", nil},
		{"python3\x00-m\x00sglang.launch_server\x00", []string{"python3", "-m", "sglang.launch_server"}},
		{"A=1\x00CUDA_VISIBLE_DEVICES=0,1\x00\x00", []string{"A=1", "CUDA_VISIBLE_DEVICES=0,1"}},
		{"sglang::scheduler_TP0\x00\x00\x00\x00", []string{"sglang::scheduler_TP0"}}, // setproctitle padding
		{"no-terminator", []string{"no-terminator"}},
	} {
		if got := SplitNUL([]byte(tc.in)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitNUL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
