package main

import (
	"os"
	"os/exec"
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
	// PYTHONPATH changes what runs: re-applied with --trust-env only
	r = runKcrash(t, 60*time.Second, nil, "repro", "--dry-run", "--trust-env", b.Path)
	if r.code != 0 {
		t.Fatalf("repro --dry-run: exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "KCRASH_PYSTACKS_DIR") || strings.Contains(r.stdout, "kcrash-py-") {
		t.Fatalf("the dry run re-applies the old run's hook:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "--env PYTHONPATH=/opt/mine ") {
		t.Fatalf("the dry run lost the user's --env PYTHONPATH:\n%s", r.stdout)
	}
}

// A bundle may come from anyone: the variables its env.set holds that change
// what runs (LD_PRELOAD, PATH, BASH_ENV, PYTHONPATH, NODE_OPTIONS...) are not
// re-applied to the re-run unless --trust-env says so, and the dry run names
// them first. The others still are.
func TestReproWithholdsVariablesThatChangeWhatRuns(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	evil := filepath.Join(dir, "evil.sh")
	ran := filepath.Join(dir, "evil-ran")
	if err := os.WriteFile(evil, []byte("echo ran >> "+ran+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "b")
	withheld := []string{"BASH_ENV=" + evil, "LD_PRELOAD=" + filepath.Join(dir, "evil.so"), "PATH=" + dir + "/evilbin:/usr/bin:/bin",
		"PYTHONPATH=" + dir + "/evilpy", "NODE_OPTIONS=--require=" + dir + "/x.js", "PERL5LIB=" + dir, "LD_AUDIT=" + dir + "/a.so"}
	args := []string{"run", "-q", "--out", out, "--skip-collectors", "kmsg"}
	for _, kv := range append(withheld, "MY_SETTING=keep-me") {
		args = append(args, "--env", kv)
	}
	r := runKcrash(t, 60*time.Second, nil, append(args, "--", "bash", "-c", "echo child ran; exit 3")...)
	if r.code != 3 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	os.Remove(ran) // the original run read BASH_ENV: it was asked to
	b := oneBundle(t, out)

	r = runKcrash(t, 60*time.Second, nil, "repro", "--dry-run", b.Path)
	if r.code != 0 {
		t.Fatalf("repro --dry-run: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 2 || !strings.Contains(lines[1], "not re-applied") || !strings.Contains(lines[1], "--trust-env") {
		t.Errorf("the dry run does not say first what it withholds:\n%s", r.stdout)
	}
	for _, kv := range withheld {
		k, _, _ := strings.Cut(kv, "=")
		if strings.Contains(r.stdout, "--env "+k+"=") || strings.Contains(r.stdout, "    "+k+"="+kv[len(k)+1:]+"\n") && strings.Index(r.stdout, "    "+k+"=") > strings.Index(r.stdout, "variables set") {
			t.Errorf("the dry run re-applies %s:\n%s", k, r.stdout)
		}
		if i := strings.Index(r.stdout, k); i < 0 || i > strings.Index(r.stdout, "would run") {
			t.Errorf("the dry run does not name %s before the rest:\n%s", k, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "--env MY_SETTING=keep-me") {
		t.Errorf("the dry run lost MY_SETTING:\n%s", r.stdout)
	}

	// the re-run itself: BASH_ENV is not read, the child runs
	reproOut := filepath.Join(dir, "repro")
	r = runKcrash(t, 120*time.Second, nil, "repro", "--out", reproOut, b.Path)
	if !strings.Contains(r.stdout+r.stderr, "child ran") {
		t.Fatalf("repro: exit %d, the child did not run: %s %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the re-run read the bundle's BASH_ENV")
	}
	if !strings.Contains(r.stderr, "not re-applied") {
		t.Errorf("repro does not say what it withholds: %s", r.stderr)
	}
	// --trust-env re-applies them
	r = runKcrash(t, 120*time.Second, nil, "repro", "--trust-env", "--out", reproOut+"-trusted", b.Path)
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("--trust-env: BASH_ENV was not re-applied: exit %d %s", r.code, r.stderr)
	}
}
