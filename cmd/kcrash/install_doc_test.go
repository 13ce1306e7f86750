package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/internal/testenv"
)

// installDoc is the user's install guide: its Slurm recipe is run here as
// written, on the real one-node Slurm.
const installDoc = "../../docs/install.md"

// docSbatchScript returns docs/install.md's sbatch script.
func docSbatchScript(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	var scripts []string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(#!/bin/bash\n#SBATCH .*?)^```").FindAllStringSubmatch(string(data), -1) {
		scripts = append(scripts, m[1])
	}
	if len(scripts) != 1 {
		t.Fatalf("%s: %d sbatch scripts, want the Slurm recipe's one", installDoc, len(scripts))
	}
	return scripts[0]
}

// TestSlurmRealInstallRecipe submits docs/install.md's sbatch script with
// three changes, each of a line that must be in it as written: no GPU
// request (the test node has none), the shared file system under the test's
// directory, and a program that crashes (SIGABRT) in place of the server.
// The job fails as its task did, and the task's bundle is where the doc says
// ($KCRASH_OUT = .../kcrash/<jobid>), named with its rank, its path in the
// job's output.
func TestSlurmRealInstallRecipe(t *testing.T) {
	realSlurm(t)
	work := t.TempDir()
	script := docSbatchScript(t)
	for _, r := range []struct{ old, new string }{
		{"#SBATCH --gpus=8\n", ""},
		{"export KCRASH_OUT=/shared/", "export KCRASH_OUT=" + work + "/shared/"},
		{"srun kcrash run -- python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 8\n",
			"srun kcrash run -- python3 -c 'print(\"loading\", flush=True); import os; os.abort()'\n"},
	} {
		if strings.Count(script, r.old) != 1 {
			t.Fatalf("docs/install.md's sbatch script has %d lines %q, want 1:\n%s", strings.Count(script, r.old), r.old, script)
		}
		script = strings.Replace(script, r.old, r.new, 1)
	}
	path := filepath.Join(work, "qwen-serve.sbatch")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The job's environment is the test's (sbatch exports it): kcrash in
	// PATH is this test binary, and a config leaves out the collectors that
	// other tests' injected kernel records would disturb.
	cfg := filepath.Join(work, "config.yaml")
	os.WriteFile(cfg, []byte("skip_collectors: [kmsg, stacks]\n"), 0o644)
	t.Setenv("KCRASH_CONFIG", cfg)
	// A login shell's USER, which the script's path uses (this test's
	// environment may have none).
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("USER", me.Username)
	id := sbatch(t, "-D", work, path)
	if st := waitState(t, id, 90*time.Second, cluster.Terminal); st != "FAILED" {
		t.Errorf("job %s: state %s, want FAILED (kcrash exits as its task did)", id, st)
	}

	out := filepath.Join(work, "shared", me.Username, "kcrash", id)
	b := oneBundle(t, out)
	m := b.Manifest
	if m.Mode != "run" || m.Job == nil || m.Job.Scheduler != "slurm" || m.Job.JobID != id {
		t.Errorf("manifest mode %q job %+v", m.Mode, m.Job)
	}
	wantExit(t, m, nil, "SIGABRT")
	if name := filepath.Base(b.Path); !strings.HasSuffix(name, "-r0.tar.gz") {
		t.Errorf("bundle %s: no rank in its name", name)
	}
	log, err := os.ReadFile(filepath.Join(work, "qwen-serve-"+id+".out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the job's output:\n%s", log)
	if !strings.Contains(string(log), "loading") || !strings.Contains(string(log), filepath.Base(b.Path)) {
		t.Errorf("the job's output does not name the bundle %s:\n%s", filepath.Base(b.Path), log)
	}
}

// TestSlurmRealInstallEpilog runs the epilog script the packages install
// (configs/slurm/kcrash-epilog.sh) the way docs/install.md says for a site
// that already has an epilog: called at the end of that one (here the test
// cluster's own Epilog, through its hook directory), with
// /etc/kcrash/config.yaml's `out:` (here named by KCRASH_CONFIG) saying
// where bundles go. A failing job gets a bundle there, a succeeding one
// none, and the node is not drained.
func TestSlurmRealInstallEpilog(t *testing.T) {
	realSlurm(t)
	cfgOut, _ := exec.Command("scontrol", "show", "config").Output()
	if !bytes.Contains(cfgOut, []byte("kcrash-test-epilog.sh")) {
		testenv.Skip(t, "the cluster's Epilog is not scripts/slurm-test-cluster.sh's hook")
	}
	script, err := filepath.Abs("../../configs/slurm/kcrash-epilog.sh")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	const docCfg = "```yaml\nout: /shared/kcrash-epilog\n```"
	if !bytes.Contains(data, []byte(docCfg)) {
		t.Fatalf("%s: no %q", installDoc, docCfg)
	}
	work := t.TempDir()
	out := filepath.Join(work, "shared", "kcrash-epilog")
	cfg := filepath.Join(work, "config.yaml")
	os.WriteFile(cfg, []byte("out: "+out+"\nskip_collectors: [kmsg, stacks]\n"), 0o644)
	// Only this test's jobs: every hook runs for every job of the cluster.
	installEpilogHook(t, fmt.Sprintf("#!/bin/sh\n[ -d %s ] || exit 0\n"+
		"scontrol show job \"$SLURM_JOB_ID\" -o 2>/dev/null | grep -q ' JobName=kcrash-install-' || exit 0\n"+
		"KCRASH_BIN=%s KCRASH_CONFIG=%s %s 2>>%s/epilog.err\n", work, kcrashBin(t), cfg, script, work))

	bad := sbatch(t, "-J", "kcrash-install-bad", "-o", filepath.Join(work, "bad-%j.out"), "--wrap", "echo failing; exit 3")
	good := sbatch(t, "-J", "kcrash-install-good", "-o", filepath.Join(work, "good-%j.out"), "--wrap", "echo fine")
	for _, id := range []string{bad, good} {
		waitState(t, id, 90*time.Second, cluster.Terminal)
	}
	errs, _ := os.ReadFile(filepath.Join(work, "epilog.err"))
	t.Logf("epilog stderr:\n%s", errs)
	byJob := map[string]int{}
	for _, b := range openBundles(t, out) {
		if b.Manifest.Job != nil {
			byJob[b.Manifest.Job.JobID]++
			if b.Manifest.Job.JobID == bad {
				checkBundle(t, b, bad, "collect")
				wantExit(t, b.Manifest, intp(3), "")
			}
		}
	}
	if byJob[bad] != 1 || byJob[good] != 0 {
		t.Errorf("bundles per job in %s: %v, want 1 for failed job %s and none for %s", out, byJob, bad, good)
	}
	if st, _ := exec.Command("sinfo", "-h", "-N", "-o", "%T").Output(); strings.Contains(string(st), "drain") {
		t.Errorf("the node is drained after the epilog: %s", st)
	}
}
