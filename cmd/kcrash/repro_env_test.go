package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// repro re-applies what the user gave the original run (--env), never what
// kcrash set for that run alone: the Python-stacks hook's marker and its
// directory on PYTHONPATH belong to a run that is over (the directory is
// gone); the new run makes its own.
func TestReproLeavesTheOldRunsHookBehind(t *testing.T) {
	out := filepath.Join(t.TempDir(), "b")
	r := runKcrash(t, 60*time.Second, nil, "run", "-q", "--out", out, "--skip-collectors", "kmsg",
		"--env", "PYTHONPATH=/opt/mine", "--", "sh", "-c", "exit 3")
	if r.code != 3 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	b := oneBundle(t, out)
	r = runKcrash(t, 60*time.Second, nil, "repro", "--dry-run", b.Path)
	if r.code != 0 {
		t.Fatalf("repro --dry-run: exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "KCRASH_PYSTACKS_DIR") || strings.Contains(r.stdout, "kcrash-py-") {
		t.Fatalf("the dry run re-applies the old run's hook:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "--env PYTHONPATH=/opt/mine") {
		t.Fatalf("the dry run lost the user's --env PYTHONPATH:\n%s", r.stdout)
	}
}
