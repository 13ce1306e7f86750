package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/capture"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/triage"
)

// Tests of `kcrash attach --slurm-job` and `kcrash collect --slurm-epilog`.
// TestSlurmReal* need a running Slurm (scripts/slurm-test-cluster.sh up, which
// .ci/run calls as root): they skip, saying why, without one, and fail under
// CI=true. The others fake scontrol/sacct with the fixtures in
// cluster/testdata/slurm and run anywhere.

// skipInTests are collectors the Slurm tests leave out: kernel messages,
// because other packages' tests inject fake GPU errors into /dev/kmsg
// meanwhile (they would rightly outrank the scheduler's word), and stacks.
const skipInTests = "kmsg,stacks"

// kcrashBin is the test binary installed as "kcrash" in PATH by TestMain.
func kcrashBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatalf("kcrash not in PATH (TestMain installs it): %v", err)
	}
	return p
}

type kcrashRun struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runKcrash runs the kcrash binary with env added to the environment (a
// "PATH=" entry replaces PATH).
func runKcrash(t *testing.T, timeout time.Duration, env []string, args ...string) kcrashRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcrashBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	begin := time.Now()
	err := cmd.Run()
	r := kcrashRun{stdout: out.String(), stderr: errb.String(), took: time.Since(begin), code: exitStatus(cmd)}
	if ctx.Err() != nil {
		t.Fatalf("kcrash %s: still running after %s; stderr:\n%s", strings.Join(args, " "), timeout, r.stderr)
	}
	if err != nil && r.code < 0 {
		t.Fatalf("kcrash %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// openBundles reads every bundle in dir.
func openBundles(t *testing.T, dir string) []*bundle.Bundle {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "kcrash-*.tar.gz"))
	var out []*bundle.Bundle
	for _, p := range m {
		b, err := bundle.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func oneBundle(t *testing.T, dir string) *bundle.Bundle {
	t.Helper()
	bs := openBundles(t, dir)
	if len(bs) != 1 {
		t.Fatalf("%s: %d bundles, want 1", dir, len(bs))
	}
	return bs[0]
}

type triageJSON struct {
	Verdict struct {
		Kind string `json:"kind"`
	} `json:"verdict"`
	Findings  []evidence.Finding `json:"findings"`
	NextSteps []string           `json:"next_steps"`
}

// checkBundle checks what every Slurm bundle holds, and returns its triage.
func checkBundle(t *testing.T, b *bundle.Bundle, id, mode string) triageJSON {
	t.Helper()
	m := b.Manifest
	if m.Mode != mode || m.Job == nil || m.Job.Scheduler != "slurm" || m.Job.JobID != id || m.Job.Node == "" {
		t.Errorf("manifest mode %q job %+v", m.Mode, m.Job)
	}
	for _, f := range []string{"raw/slurm-job.txt", "raw/sacct.txt", "raw/slurm.json", "summary.md"} {
		if _, ok := b.File(f); !ok {
			t.Errorf("no %s in %v", f, b.Names())
		}
	}
	if j, _ := b.File("raw/slurm-job.txt"); !bytes.Contains(j, []byte("JobId="+id+" ")) {
		t.Errorf("raw/slurm-job.txt: %q", j)
	}
	var slurmCollector bool
	for _, c := range m.Collectors {
		if c.Name == "slurm" {
			slurmCollector = c.Status == bundle.StatusOK
		}
	}
	if !slurmCollector {
		t.Errorf("slurm collector not ok: %+v", m.Collectors)
	}
	var tri triageJSON
	if err := json.Unmarshal(m.Triage, &tri); err != nil {
		t.Fatalf("triage: %v", err)
	}
	return tri
}

func schedulerFinding(tri triageJSON, kind evidence.Kind) *evidence.Finding {
	for i, f := range tri.Findings {
		if f.Source == evidence.SourceScheduler && f.Kind == kind {
			return &tri.Findings[i]
		}
	}
	return nil
}

// wantVerdict checks the bundle's verdict.
func wantVerdict(t *testing.T, tri triageJSON, kind evidence.Kind) {
	t.Helper()
	if tri.Verdict.Kind != string(kind) {
		t.Errorf("verdict %s, want %s", tri.Verdict.Kind, kind)
	}
}

func wantExit(t *testing.T, m bundle.Manifest, code *int, signal string) {
	t.Helper()
	gotSig := ""
	if m.Exit.Signal != nil {
		gotSig = *m.Exit.Signal
	}
	if (m.Exit.Code == nil) != (code == nil) || code != nil && *m.Exit.Code != *code || gotSig != signal {
		t.Errorf("exit code %v signal %q, want %v %q (%s)", deref(m.Exit.Code), gotSig, deref(code), signal, m.Exit.Reason)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func intp(n int) *int { return &n }

// TestSlurmVerdicts: the scheduler's findings and exit, as the outcome gives
// them, lead triage to the scheduler's word.
func TestSlurmVerdicts(t *testing.T) {
	dir := filepath.Join("..", "..", "cluster", "testdata", "slurm")
	for _, tc := range []struct {
		file string
		want evidence.Kind
	}{
		{"scontrol-oom.txt", evidence.HostOOM},
		{"scontrol-epilog-oom.txt", evidence.HostOOM},
		{"scontrol-timeout.txt", evidence.Hang},
		{"scontrol-cancelled.txt", evidence.Killed},
		{"scontrol-node-fail.txt", evidence.Killed},
		{"scontrol-child-segv.txt", evidence.NativeCrash},
		{"scontrol-batch-segv.txt", evidence.NativeCrash},
		{"scontrol-exit3.txt", evidence.Unknown},
	} {
		b, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		j := cluster.ParseScontrolJobs(b)[0]
		oc := cluster.NewOutcome(j.ID, j, b, nil, "")
		code, sig, _ := oc.BundleExit()
		in := triage.Input{ExitCode: code, Findings: oc.Findings()}
		if sig > 0 {
			in.Signal = capture.SignalName(syscall.Signal(sig))
		}
		if got := triage.Decide(in).Verdict.Kind; got != tc.want {
			t.Errorf("%s: verdict %s, want %s", tc.file, got, tc.want)
		}
	}
}

// fakeSlurm puts scontrol and sacct scripts printing fixtures into a new
// directory and returns the PATH that finds them first.
func fakeSlurm(t *testing.T, scontrol, sacct string) string {
	t.Helper()
	bin := t.TempDir()
	for name, body := range map[string]string{"scontrol": scontrol, "sacct": sacct} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + bin + ":" + os.Getenv("PATH")
}

func fixturePath(name string) string {
	p, _ := filepath.Abs(filepath.Join("..", "..", "cluster", "testdata", "slurm", name))
	return p
}

// TestSlurmEpilogFake runs the epilog against a faked scontrol: a failed job
// gets a bundle; a completed one, a missing SLURM_JOB_ID, a bad flag and a
// hung scontrol all end with exit 0 within the budget.
func TestSlurmEpilogFake(t *testing.T) {
	noAcct := `echo "Slurm accounting storage is disabled" >&2; exit 1`
	epilogEnv := func(path, id string) []string {
		return []string{path, "SLURM_JOB_ID=" + id, "SLURM_SCRIPT_CONTEXT=epilog_slurmd", "SLURMD_NODENAME=vm", "KCRASH_OUT="}
	}
	t.Run("oom", func(t *testing.T) {
		out := t.TempDir()
		path := fakeSlurm(t, "cat "+fixturePath("scontrol-epilog-oom.txt"), "cat "+fixturePath("sacct-3.txt"))
		r := runKcrash(t, 60*time.Second, append(epilogEnv(path, "3"), "SLURM_JOB_EXIT_CODE2=0:125"),
			"collect", "--slurm-epilog", "--out", out, "--epilog-timeout", "20s", "--skip-collectors", skipInTests)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		b := oneBundle(t, out)
		tri := checkBundle(t, b, "3", "collect")
		if schedulerFinding(tri, evidence.HostOOM) == nil {
			t.Errorf("no scheduler host_oom finding: %+v", tri.Findings)
		}
		wantVerdict(t, tri, evidence.HostOOM)
		wantExit(t, b.Manifest, nil, "SIGKILL")
		if b.Manifest.Job.Node != "vm" {
			t.Errorf("node %q", b.Manifest.Job.Node)
		}
		if log, _ := os.ReadFile(filepath.Join(out, "kcrash-epilog.log")); !bytes.Contains(log, []byte("job ended OUT_OF_MEMORY")) {
			t.Errorf("kcrash-epilog.log: %q", log)
		}
	})
	t.Run("completed", func(t *testing.T) {
		out := t.TempDir()
		path := fakeSlurm(t, "cat "+fixturePath("scontrol-completed.txt"), noAcct)
		r := runKcrash(t, 60*time.Second, epilogEnv(path, "6"), "collect", "--slurm-epilog", "--out", out)
		if r.code != 0 || len(openBundles(t, out)) != 0 {
			t.Fatalf("exit %d, %d bundles: %s", r.code, len(openBundles(t, out)), r.stderr)
		}
	})
	t.Run("no job id", func(t *testing.T) {
		out := t.TempDir()
		r := runKcrash(t, 60*time.Second, []string{"SLURM_JOB_ID=", "SLURM_JOBID="}, "collect", "--slurm-epilog", "--out", out)
		if r.code != 0 || !strings.Contains(r.stderr, "no SLURM_JOB_ID") {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	})
	t.Run("bad flag", func(t *testing.T) {
		for _, args := range [][]string{{"collect", "--slurm-epilog", "--no-such-flag"}, {"collect", "--epilog-timeout", "x", "--slurm-epilog"}} {
			r := runKcrash(t, 60*time.Second, epilogEnv("PATH="+os.Getenv("PATH"), "3"), args...)
			if r.code != 0 || !strings.Contains(r.stderr, "nothing collected") {
				t.Errorf("%v: exit %d: %s", args, r.code, r.stderr)
			}
		}
		// Outside an epilog the same mistake is a usage error.
		if r := runKcrash(t, 60*time.Second, []string{"SLURM_SCRIPT_CONTEXT="}, "collect", "--no-such-flag"); r.code != 2 {
			t.Errorf("collect --no-such-flag: exit %d", r.code)
		}
	})
	t.Run("hung scontrol", func(t *testing.T) {
		out := t.TempDir()
		path := fakeSlurm(t, "sleep 60", "sleep 60")
		r := runKcrash(t, 60*time.Second, append(epilogEnv(path, "3"), "SLURM_JOB_EXIT_CODE2=3:0"),
			"collect", "--slurm-epilog", "--out", out, "--epilog-timeout", "4s", "--skip-collectors", skipInTests)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if r.took > 6*time.Second {
			t.Errorf("took %s with a 4s budget", r.took)
		}
		// scontrol and sacct timed out; the epilog's environment still says the job failed.
		b := oneBundle(t, out)
		wantExit(t, b.Manifest, intp(3), "")
		if j, _ := b.File("raw/slurm-job.txt"); !bytes.Contains(j, []byte("timed out")) {
			t.Errorf("raw/slurm-job.txt: %q", j)
		}
	})
	t.Run("no PATH", func(t *testing.T) {
		// slurmd gives epilogs no PATH: kcrash finds scontrol in /usr/bin and friends.
		r := runKcrash(t, 60*time.Second, epilogEnv("PATH=", "3"), "collect", "--slurm-epilog", "--out", t.TempDir(), "--epilog-timeout", "10s", "--skip-collectors", skipInTests)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	})
}

// TestSlurmAttachFake follows a job through a faked scontrol that says
// RUNNING twice, then OUT_OF_MEMORY, with the job's output on disk.
func TestSlurmAttachFake(t *testing.T) {
	dir := t.TempDir()
	rec, err := os.ReadFile(fixturePath("scontrol-oom.txt"))
	if err != nil {
		t.Fatal(err)
	}
	stdout := filepath.Join(dir, "o3.out")
	final := strings.ReplaceAll(string(rec), "/tmp/sl/o3.out", stdout)
	running := strings.Replace(final, "JobState=OUT_OF_MEMORY Reason=OutOfMemory", "JobState=RUNNING Reason=None", 1)
	os.WriteFile(filepath.Join(dir, "final.txt"), []byte(final), 0o644)
	os.WriteFile(filepath.Join(dir, "running.txt"), []byte(running), 0o644)
	os.WriteFile(stdout, []byte("loading\nslurmstepd-vm: error: Detected 1 oom-kill event(s) in StepId=3.batch. Some of your processes may have been killed by the cgroup out-of-memory handler.\n"), 0o644)
	n := filepath.Join(dir, "n")
	os.WriteFile(filepath.Join(dir, "script"), []byte("#!/bin/sh\n# This script was created by sbatch --wrap.\n\npython3 big.py\n"), 0o644)
	path := fakeSlurm(t, fmt.Sprintf(`[ "$1" = write ] && exec cat %s/script; echo x >> %s; if [ $(wc -l < %s) -le 2 ]; then cat %s/running.txt; else cat %s/final.txt; fi`, dir, n, n, dir, dir),
		"cat "+fixturePath("sacct-3.txt"))
	out := filepath.Join(dir, "out")
	r := runKcrash(t, 60*time.Second, []string{path}, "attach", "--slurm-job", "3", "--poll", "100ms", "--out", out, "--collectors", "host,output")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"following slurm job 3 (wrap, RUNNING on vm)", "slurm job 3 ended OUT_OF_MEMORY, ExitCode 0:125", "; bundle "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	b := oneBundle(t, out)
	tri := checkBundle(t, b, "3", "attach")
	if f := schedulerFinding(tri, evidence.HostOOM); f == nil || f.Details["max_rss_bytes"] == nil {
		t.Errorf("scheduler host_oom finding with max_rss_bytes: %+v", tri.Findings)
	}
	wantVerdict(t, tri, evidence.HostOOM)
	if o, _ := b.File("raw/slurm-stdout.log"); !bytes.Contains(o, []byte("oom-kill event")) {
		t.Errorf("raw/slurm-stdout.log: %q", o)
	}
	if o, _ := b.File("output.log"); !bytes.Contains(o, []byte("loading")) {
		t.Errorf("output.log: %q", o)
	}
	if c := b.Manifest.Command; strings.Join(c, " ") != "sh -c python3 big.py" {
		t.Errorf("command %q", c)
	}
	if sc, _ := b.File("raw/slurm-batch-script.sh"); !bytes.Contains(sc, []byte("python3 big.py")) {
		t.Errorf("raw/slurm-batch-script.sh: %q", sc)
	}
	if s, _ := b.File("raw/sacct.txt"); !bytes.Contains(s, []byte("3.batch|OUT_OF_MEMORY")) {
		t.Errorf("raw/sacct.txt: %q", s)
	}

	// The job is forgotten by scontrol between two looks: sacct says how it ended.
	n2 := filepath.Join(dir, "n2")
	purged := fakeSlurm(t, fmt.Sprintf(`[ "$1" = write ] && exit 0; echo x >> %s; if [ $(wc -l < %s) -le 1 ]; then sed 's/^JobId=3 /JobId=1 /' %s/running.txt; else echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; fi`, n2, n2, dir),
		"cat "+fixturePath("sacct-1.txt"))
	out2 := filepath.Join(dir, "out2")
	r = runKcrash(t, 60*time.Second, []string{purged}, "attach", "--slurm-job", "1", "--poll", "100ms", "--out", out2, "--collectors", "output")
	if r.code != 0 || !strings.Contains(r.stderr, "slurm job 1 ended FAILED, ExitCode 3:0") {
		t.Fatalf("purged job: exit %d: %s", r.code, r.stderr)
	}
	b = oneBundle(t, out2)
	wantExit(t, b.Manifest, intp(3), "")
	if j, _ := b.File("raw/slurm-job.txt"); !bytes.Contains(j, []byte("Invalid job id")) {
		t.Errorf("raw/slurm-job.txt: %q", j)
	}
	// ... and when sacct does not answer either, nothing can be said.
	n3 := filepath.Join(dir, "n3")
	gone2 := fakeSlurm(t, fmt.Sprintf(`echo x >> %s; if [ $(wc -l < %s) -le 1 ]; then cat %s/running.txt; else echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; fi`, n3, n3, dir),
		`echo "Slurm accounting storage is disabled" >&2; exit 1`)
	r = runKcrash(t, 60*time.Second, []string{gone2}, "attach", "--slurm-job", "3", "--poll", "100ms", "--out", out2)
	if r.code != 1 || !strings.Contains(r.stderr, "was RUNNING, then scontrol forgot it") {
		t.Errorf("purged job, no accounting: exit %d: %s", r.code, r.stderr)
	}

	// Off the job's node (NODE_FAIL on gpu[01-02]): no node collectors, said so in the notes.
	nf := fakeSlurm(t, `[ "$1" = write ] && exit 0; cat `+fixturePath("scontrol-node-fail.txt"), "exit 1")
	out3 := filepath.Join(dir, "out3")
	r = runKcrash(t, 60*time.Second, []string{nf}, "attach", "--slurm-job", "11", "--out", out3)
	if r.code != 0 || !strings.Contains(r.stderr, "ended NODE_FAIL") {
		t.Fatalf("node fail: exit %d: %s", r.code, r.stderr)
	}
	b = oneBundle(t, out3)
	var names []string
	for _, c := range b.Manifest.Collectors {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "output,slurm" || !strings.Contains(strings.Join(b.Manifest.Notes, "\n"), "not on the job's node (gpu01)") {
		t.Errorf("collectors %v notes %q", names, b.Manifest.Notes)
	}
	tri = checkBundle(t, b, "11", "attach")
	if f := schedulerFinding(tri, evidence.Killed); f == nil || f.Details["node_fail"] != true {
		t.Errorf("NODE_FAIL finding: %+v", tri.Findings)
	}

	// Usage errors.
	for _, args := range [][]string{{"attach"}, {"attach", "--slurm-job", "3", "--pid", "1"}, {"attach", "--slurm-job", "3", "--fail-states", "RUNNING"}} {
		if r := runKcrash(t, 30*time.Second, nil, args...); r.code != 2 {
			t.Errorf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	// A job nobody knows.
	gone := fakeSlurm(t, `echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1`, `exit 0`)
	if r := runKcrash(t, 30*time.Second, []string{gone}, "attach", "--slurm-job", "424242", "--out", out); r.code != 1 || !strings.Contains(r.stderr, "does not know") {
		t.Errorf("unknown job: exit %d: %s", r.code, r.stderr)
	}
}

var slurmUp struct {
	once sync.Once
	why  string // "" when a cluster answers
}

// realSlurm skips (or under CI=true fails) unless a Slurm cluster answers.
// sinfo takes seconds to give up on a controller that is down: it is asked once.
func realSlurm(t *testing.T) {
	t.Helper()
	slurmUp.once.Do(func() {
		if _, err := exec.LookPath("sbatch"); err != nil {
			slurmUp.why = "no sbatch in PATH"
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "sinfo", "-h", "-N", "-o", "%T").CombinedOutput()
		st := strings.TrimSpace(string(out))
		if err != nil || !(strings.HasPrefix(st, "idle") || strings.HasPrefix(st, "mix") || strings.HasPrefix(st, "alloc")) {
			slurmUp.why = fmt.Sprintf("no Slurm node up (sinfo: %v %q)", err, st)
		}
	})
	why := slurmUp.why
	if why == "" {
		return
	}
	testenv.Skip(t, "%s; start one with `scripts/slurm-test-cluster.sh up` (as root)", why)
}

// sbatch submits a job and cancels it when the test ends.
func sbatch(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("sbatch", append([]string{"--parsable"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %v: %v: %s", args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	t.Cleanup(func() { exec.Command("scancel", id).Run() })
	return id
}

func jobState(id string) string {
	out, _ := exec.Command("scontrol", "show", "job", "-o", id).Output()
	if j := cluster.PickJob(cluster.ParseScontrolJobs(out), id); j != nil {
		return j.State
	}
	return ""
}

func waitState(t *testing.T, id string, d time.Duration, ok func(string) bool) string {
	t.Helper()
	var st string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st = jobState(id); ok(st) {
			return st
		}
	}
	t.Fatalf("job %s: state %q after %s", id, st, d)
	return ""
}

func cgroupSlurm() bool {
	b, _ := os.ReadFile("/etc/slurm/cgroup.conf")
	return bytes.Contains(b, []byte("ConstrainRAMSpace=yes"))
}

// TestSlurmRealAttach follows real jobs with `kcrash attach --slurm-job`:
// exit 3, a program killed by SIGSEGV under the batch shell (139:0), the batch
// shell itself killed by SIGSEGV (0:11), a job over --mem (OUT_OF_MEMORY), a
// cancelled job, and a job that succeeds.
func TestSlurmRealAttach(t *testing.T) {
	realSlurm(t)
	work := t.TempDir()
	os.Chmod(work, 0o755)
	type scenario struct {
		name, wrap string
		sbatch     []string
		state      string
		bundle     bool
		code       *int
		signal     string
		finding    evidence.Kind // a scheduler finding of this kind
		verdict    evidence.Kind
		output     string // in raw/slurm-stdout.log
	}
	oomState, oomFinding, oomVerdict, oomSig := "OUT_OF_MEMORY", evidence.HostOOM, evidence.HostOOM, "SIGKILL"
	if !cgroupSlurm() {
		// task/none + OverMemoryKill: slurmstepd kills the job, which ends FAILED 0:9.
		oomState, oomFinding, oomVerdict, oomSig = "FAILED", "", evidence.Killed, "SIGKILL"
	}
	scenarios := []scenario{
		{name: "exit3", wrap: "echo starting; exit 3", state: "FAILED", bundle: true, code: intp(3), verdict: evidence.Unknown, output: "starting"},
		{name: "child-segv", wrap: `echo before; python3 -c "import ctypes; ctypes.string_at(0)"`, state: "FAILED", bundle: true, code: intp(139), signal: "SIGSEGV", verdict: evidence.NativeCrash, output: "before"},
		{name: "batch-segv", wrap: "echo dying; kill -SEGV $$", state: "FAILED", bundle: true, signal: "SIGSEGV", verdict: evidence.NativeCrash, output: "dying"},
		{name: "oom", wrap: `python3 -c "x = bytearray(400 << 20); import time; time.sleep(5)"`, sbatch: []string{"--mem=50M"},
			state: oomState, bundle: true, signal: oomSig, finding: oomFinding, verdict: oomVerdict, output: "oom-kill"},
		{name: "cancelled", wrap: "echo waiting; sleep 300", state: "CANCELLED", bundle: true, signal: "SIGTERM", finding: evidence.Killed, verdict: evidence.Killed, output: "CANCELLED"},
		{name: "ok", wrap: "echo fine", state: "COMPLETED"},
	}
	if !cgroupSlurm() {
		scenarios[3].output = "exceeded memory limit"
	}
	if os.Getenv("KCRASH_SLURM_SLOW") == "1" {
		// Time limits are whole minutes, checked every 30 s: this one takes 60 to 75 s.
		scenarios = append(scenarios, scenario{name: "timeout", wrap: "echo long; sleep 600", sbatch: []string{"--time=1"}, state: "TIMEOUT",
			bundle: true, signal: "SIGTERM", finding: evidence.Hang, verdict: evidence.Hang, output: "DUE TO TIME LIMIT"})
	} else {
		t.Log("KCRASH_SLURM_SLOW=1 adds a job that runs into its time limit (TIMEOUT; over a minute)")
	}
	var mu sync.Mutex
	seen := map[string]string{}
	t.Cleanup(func() { // after the parallel subtests
		t.Logf("states seen (scontrol JobState Reason ExitCode | sacct rows):")
		for _, sc := range scenarios {
			t.Logf("  %-10s %s", sc.name, seen[sc.name])
		}
	})
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			id := sbatch(t, append([]string{"-J", "kcrash-" + sc.name, "-o", filepath.Join(work, sc.name+"-%j.out"), "--wrap", sc.wrap}, sc.sbatch...)...)
			if sc.name == "cancelled" {
				go func() { // not the test's goroutine: no t.Fatal here
					for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && jobState(id) != "RUNNING"; {
						time.Sleep(200 * time.Millisecond)
					}
					time.Sleep(time.Second)
					exec.Command("scancel", id).Run()
				}()
			}
			out := filepath.Join(work, "out-"+sc.name)
			r := runKcrash(t, 180*time.Second, nil, "attach", "--slurm-job", id, "--poll", "300ms", "--out", out, "--skip-collectors", skipInTests)
			rec, _ := exec.Command("scontrol", "show", "job", "-o", id).Output()
			acct, _ := exec.Command("sacct", "-j", id, "-P", "-n", "--format=JobID,State,ExitCode,DerivedExitCode,MaxRSS").Output()
			j := cluster.PickJob(cluster.ParseScontrolJobs(rec), id)
			mu.Lock()
			if j != nil {
				seen[sc.name] = fmt.Sprintf("%s %s %s | %s", j.State, j.Reason, j.Exit.Raw, strings.ReplaceAll(strings.TrimSpace(string(acct)), "\n", " "))
			}
			mu.Unlock()
			if r.code != 0 {
				t.Fatalf("exit %d:\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "slurm job "+id+" ended "+sc.state) {
				t.Errorf("stderr lacks the end state %s:\n%s", sc.state, r.stderr)
			}
			bs := openBundles(t, out)
			if !sc.bundle {
				if len(bs) != 0 || !strings.Contains(r.stderr, "no bundle") {
					t.Errorf("%d bundles for a %s job:\n%s", len(bs), sc.state, r.stderr)
				}
				return
			}
			b := oneBundle(t, out)
			tri := checkBundle(t, b, id, "attach")
			wantExit(t, b.Manifest, sc.code, sc.signal)
			if c := b.Manifest.Command; len(c) != 3 || c[2] != sc.wrap {
				t.Errorf("command %q, want sh -c %q", c, sc.wrap)
			}
			if sc.finding != "" && schedulerFinding(tri, sc.finding) == nil {
				t.Errorf("no scheduler %s finding: %+v", sc.finding, tri.Findings)
			}
			wantVerdict(t, tri, sc.verdict)
			if o, _ := b.File("raw/slurm-stdout.log"); !bytes.Contains(o, []byte(sc.output)) {
				t.Errorf("raw/slurm-stdout.log lacks %q: %q", sc.output, o)
			}
			// This test runs on the job's node: the node collectors ran.
			var memory bool
			for _, c := range b.Manifest.Collectors {
				memory = memory || c.Name == "memory"
			}
			if !memory {
				t.Errorf("node collectors did not run: %+v", b.Manifest.Collectors)
			}
		})
	}
}

// epilogHooks is where scripts/slurm-test-cluster.sh's Epilog runs the tests' hooks.
const epilogHooks = "/run/kcrash-slurm-test/epilog.d"

// installEpilogHook makes script one of the cluster's epilog hooks until the
// test ends. Every hook runs for every job: a test looks only at its own jobs.
func installEpilogHook(t *testing.T, script string) {
	t.Helper()
	if err := os.MkdirAll(epilogHooks, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(epilogHooks, fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), os.Getpid()))
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
}

// epilogHook is a hook that runs `kcrash collect --slurm-epilog` for the
// test's own jobs, those named with prefix: every hook runs for every job of
// the cluster, and tests run in parallel. One that outlives its test (dir is
// gone) does nothing, so that it never recreates a test's directory.
func epilogHook(t *testing.T, dir, prefix, out string) string {
	return fmt.Sprintf("#!/bin/sh\n[ -d %s ] || exit 0\n"+
		"scontrol show job \"$SLURM_JOB_ID\" -o 2>/dev/null | grep -q ' JobName=%s' || exit 0\n"+
		"exec %s collect --slurm-epilog --out %s --epilog-timeout 20s --skip-collectors %s 2>>%s/epilog.err\n",
		dir, prefix, kcrashBin(t), out, skipInTests, dir)
}

// TestSlurmRealEpilog runs `kcrash collect --slurm-epilog` as the cluster's
// epilog: a failing job gets a bundle, a succeeding one none, and the node is
// not drained (the epilog exited 0).
func TestSlurmRealEpilog(t *testing.T) {
	realSlurm(t)
	cfg, _ := exec.Command("scontrol", "show", "config").Output()
	if !bytes.Contains(cfg, []byte("kcrash-test-epilog.sh")) {
		testenv.Skip(t, "the cluster's Epilog is not scripts/slurm-test-cluster.sh's hook")
	}
	work := t.TempDir()
	os.Chmod(work, 0o755)
	out := filepath.Join(work, "bundles")
	hook := epilogHook(t, work, "kcrash-epilog-", out)
	installEpilogHook(t, hook)

	bad := sbatch(t, "-J", "kcrash-epilog-bad", "-o", filepath.Join(work, "bad-%j.out"), "--wrap", "echo failing; exit 3")
	oom := ""
	if cgroupSlurm() {
		oom = sbatch(t, "-J", "kcrash-epilog-oom", "--mem=50M", "-o", filepath.Join(work, "oom-%j.out"), "--wrap", `python3 -c "x = bytearray(400 << 20)"`)
	}
	good := sbatch(t, "-J", "kcrash-epilog-good", "-o", filepath.Join(work, "good-%j.out"), "--wrap", "echo fine")
	for _, id := range []string{bad, oom, good} {
		if id != "" {
			// The state leaves COMPLETING once the epilog has finished.
			waitState(t, id, 90*time.Second, cluster.Terminal)
		}
	}
	byJob := map[string][]*bundle.Bundle{}
	for _, b := range openBundles(t, out) {
		if b.Manifest.Job != nil {
			byJob[b.Manifest.Job.JobID] = append(byJob[b.Manifest.Job.JobID], b)
		}
	}
	errs, _ := os.ReadFile(filepath.Join(work, "epilog.err"))
	t.Logf("epilog stderr:\n%s", errs)
	if len(byJob[bad]) != 1 {
		t.Fatalf("%d bundles for failed job %s (bundles for %v)", len(byJob[bad]), bad, keys(byJob))
	}
	b := byJob[bad][0]
	checkBundle(t, b, bad, "collect")
	wantExit(t, b.Manifest, intp(3), "")
	if o, _ := b.File("raw/slurm-stdout.log"); !bytes.Contains(o, []byte("failing")) {
		t.Errorf("raw/slurm-stdout.log: %q", o)
	}
	if j, _ := b.File("raw/slurm-job.txt"); !bytes.Contains(j, []byte("JobState=COMPLETING")) {
		t.Logf("raw/slurm-job.txt (the epilog normally sees COMPLETING): %s", j)
	}
	if oom != "" {
		if len(byJob[oom]) != 1 {
			t.Errorf("%d bundles for OOM job %s", len(byJob[oom]), oom)
		} else {
			tri := checkBundle(t, byJob[oom][0], oom, "collect")
			if schedulerFinding(tri, evidence.HostOOM) == nil {
				t.Errorf("no scheduler host_oom finding: %+v", tri.Findings)
			}
			wantVerdict(t, tri, evidence.HostOOM)
		}
	}
	if len(byJob[good]) != 0 {
		t.Errorf("a bundle for completed job %s", good)
	}
	if st, _ := exec.Command("sinfo", "-h", "-N", "-o", "%T").Output(); strings.Contains(string(st), "drain") {
		t.Errorf("the node is drained after the epilog: %s", st)
	}
}

func keys(m map[string][]*bundle.Bundle) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The unprivileged users scripts/slurm-test-cluster.sh adds: jobUser runs the
// jobs, otherUser owns a file jobUser may not read.
const jobUser, otherUser = "kcrash-job", "kcrash-other"

// lookupUser returns uid and gid of name, or skips (fails under CI).
func lookupUser(t *testing.T, name string) (int, int) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		testenv.Skip(t, "no user %s (scripts/slurm-test-cluster.sh up adds it): %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

// TestSlurmRealEpilogJobUserFiles: the epilog runs as root, but reads a
// job's StdOut/StdErr with the job user's rights. An unprivileged user's jobs
// that end by turning their output file into a symlink to a root-only file,
// by turning it into a FIFO, or that name another user's 0600 file as StdErr
// get a bundle without that content, quickly, with a note saying why; a job
// whose output sits in a directory only its user can enter still gets its
// output. A root `attach --slurm-job` of the same jobs reads the same way.
// The bundles are 0640 in a 0750 directory.
func TestSlurmRealEpilogJobUserFiles(t *testing.T) {
	realSlurm(t)
	testenv.NeedRoot(t, "the epilog reads as root on behalf of an unprivileged job")
	cfg, _ := exec.Command("scontrol", "show", "config").Output()
	if !bytes.Contains(cfg, []byte("kcrash-test-epilog.sh")) {
		testenv.Skip(t, "the cluster's Epilog is not scripts/slurm-test-cluster.sh's hook")
	}
	juid, jgid := lookupUser(t, jobUser)
	ouid, ogid := lookupUser(t, otherUser)

	root := t.TempDir()
	os.Chmod(filepath.Dir(root), 0o755) // t.TempDir's parent is 0700: the job user must reach its directory
	os.Chmod(root, 0o755)
	secret := fmt.Sprintf("KCRASH-TEST-ROOT-SECRET-%d", time.Now().UnixNano())
	secretFile := filepath.Join(root, "root-only.txt")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	otherSecret := fmt.Sprintf("KCRASH-TEST-OTHER-SECRET-%d", time.Now().UnixNano())
	otherDir := filepath.Join(root, "other")
	os.Mkdir(otherDir, 0o755)
	otherFile := filepath.Join(otherDir, "private.log")
	os.WriteFile(otherFile, []byte(otherSecret+"\n"), 0o600)
	os.Chown(otherFile, ouid, ogid)
	jobDir := filepath.Join(root, "job")
	os.Mkdir(jobDir, 0o700) // only the job's user may enter it
	os.Chown(jobDir, juid, jgid)

	out := filepath.Join(root, "bundles")
	hook := epilogHook(t, root, "kcrash-userfiles-", out)
	installEpilogHook(t, hook)

	// The jobs: submitted by the job user, as a user would.
	submit := func(name string, args ...string) string {
		t.Helper()
		a := append([]string{"-u", jobUser, "--", "sbatch", "--parsable", "-J", "kcrash-userfiles-" + name, "-D", jobDir}, args...)
		b, err := exec.Command("runuser", a...).CombinedOutput()
		if err != nil {
			t.Fatalf("sbatch as %s: %v: %s", jobUser, err, b)
		}
		id, _, _ := strings.Cut(strings.TrimSpace(string(b)), ";")
		t.Cleanup(func() { exec.Command("scancel", id).Run() })
		return id
	}
	type jobCase struct {
		name, id string
		absent   string // content that must not be in the bundle
		note     string // what the manifest's notes must say
		present  string // content that must be in the bundle
	}
	link := filepath.Join(jobDir, "symlink.out")
	fifo := filepath.Join(jobDir, "fifo.out")
	cases := []*jobCase{
		{name: "symlink", absent: secret, note: "raw/slurm-stdout.log (" + link + ") not read: refused: it is a symlink",
			id: submit("symlink", "-o", link, "--wrap", fmt.Sprintf("echo job-line; rm -f %s; ln -s %s %s; exit 1", link, secretFile, link))},
		{name: "fifo", note: "raw/slurm-stdout.log (" + fifo + ") not read: refused: it is a FIFO",
			id: submit("fifo", "-o", fifo, "--wrap", fmt.Sprintf("echo job-line; rm -f %s; mkfifo %s; exit 1", fifo, fifo))},
		{name: "other-user", absent: otherSecret, note: "raw/slurm-stderr.log (" + otherFile + ") not read: refused: the job's user " + jobUser,
			id: submit("other", "-o", filepath.Join(jobDir, "other.out"), "-e", otherFile, "--wrap", "echo job-line; exit 1")},
		{name: "own", present: "own-job-line",
			id: submit("own", "-o", filepath.Join(jobDir, "own.out"), "--wrap", "echo own-job-line; exit 1")},
	}
	for _, c := range cases {
		// The state leaves COMPLETING once the epilog has finished.
		waitState(t, c.id, 90*time.Second, cluster.Terminal)
	}
	errs, _ := os.ReadFile(filepath.Join(root, "epilog.err"))
	t.Logf("epilog stderr:\n%s", errs)
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("bundle directory: %v %v, want 0750", fi.Mode(), err)
	}
	byJob := map[string]string{}
	m, _ := filepath.Glob(filepath.Join(out, "kcrash-*.tar.gz"))
	for _, p := range m {
		b, err := bundle.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if b.Manifest.Job != nil {
			byJob[b.Manifest.Job.JobID] = p
		}
	}
	check := func(t *testing.T, c *jobCase, path, mode string) {
		t.Helper()
		if path == "" {
			t.Fatalf("no bundle for job %s (have %v)", c.id, byJob)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != capture.PrivateBundleMode {
			t.Errorf("bundle mode %v %v, want %v (never world-readable)", fi.Mode(), err, os.FileMode(capture.PrivateBundleMode))
		}
		b, err := bundle.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		checkBundle(t, b, c.id, mode)
		notes := strings.Join(b.Manifest.Notes, "\n")
		if c.note != "" && !strings.Contains(notes, c.note) {
			t.Errorf("notes lack %q:\n%s", c.note, notes)
		}
		var all []byte
		for _, n := range b.Names() {
			f, _ := b.File(n)
			all = append(all, f...)
		}
		mj, _ := json.Marshal(b.Manifest)
		all = append(all, mj...)
		if c.absent != "" && bytes.Contains(all, []byte(c.absent)) {
			t.Errorf("the bundle holds a file the job's user may not read (%s)", c.absent)
		}
		if c.present != "" {
			if o, _ := b.File("raw/slurm-stdout.log"); !bytes.Contains(o, []byte(c.present)) {
				t.Errorf("raw/slurm-stdout.log lacks the job's own output %q: %q (notes %s)", c.present, o, notes)
			}
		}
	}
	for _, c := range cases {
		t.Run("epilog/"+c.name, func(t *testing.T) { check(t, c, byJob[c.id], "collect") })
	}
	// Each epilog logged how long it took: refusing must not wait for the tail timeout.
	log, _ := os.ReadFile(filepath.Join(out, "kcrash-epilog.log"))
	for _, c := range cases {
		for _, l := range strings.Split(string(log), "\n") {
			if !strings.Contains(l, "epilog job "+c.id+": job ended") {
				continue
			}
			i := strings.LastIndex(l, " in ")
			if d, err := time.ParseDuration(l[i+4:]); i < 0 || err != nil || d > 3*time.Second {
				t.Errorf("job %s (%s): epilog took %q (budget 20s; a refused file must not wait out the tail timeout)", c.id, c.name, l)
			}
		}
	}
	// A root operator's attach of the same (ended) jobs reads the same way.
	for _, c := range cases {
		t.Run("attach/"+c.name, func(t *testing.T) {
			aout := filepath.Join(root, "attach-"+c.name)
			r := runKcrash(t, 60*time.Second, nil, "attach", "--slurm-job", c.id, "--out", aout, "--skip-collectors", skipInTests)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			m, _ := filepath.Glob(filepath.Join(aout, "kcrash-*.tar.gz"))
			if len(m) != 1 {
				t.Fatalf("%d bundles: %s", len(m), r.stderr)
			}
			check(t, c, m[0], "attach")
		})
	}
}
