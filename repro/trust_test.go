package repro

import "testing"

func TestChangesWhatRuns(t *testing.T) {
	for name, want := range map[string]bool{
		"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true, "PATH": true, "BASH_ENV": true, "ENV": true,
		"PYTHONPATH": true, "PYTHONSTARTUP": true, "PYTHONHOME": true, "PYTHONUSERBASE": true, "PYTHONWARNINGS": true,
		"PERL5LIB": true, "PERL5OPT": true, "NODE_OPTIONS": true, "BASH_FUNC_ls%%": true, "HOME": true, "GIT_SSH_COMMAND": true,
		"PYTHONUNBUFFERED": false, "PYTHONHASHSEED": false, "CUDA_VISIBLE_DEVICES": false, "NCCL_DEBUG": false,
		"SGLANG_KERNEL_API_LOGLEVEL": false, "MY_SETTING": false, "OLD_PATH": false,
	} {
		if got := ChangesWhatRuns(name); got != want {
			t.Errorf("ChangesWhatRuns(%s) = %v, want %v", name, got, want)
		}
	}
}
