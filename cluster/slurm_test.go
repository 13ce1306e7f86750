package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/evidence"
)

// The fixtures in testdata/slurm are real output of Slurm 22.05 (Debian 12)
// on a one-node cluster (scripts/slurm-test-cluster.sh), except
// scontrol-timeout.txt and scontrol-node-fail.txt, edited from
// scontrol-exit3.txt to the fields reference/test-infra.md §1 lists.

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "slurm", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func oneJob(t *testing.T, name string) *SlurmJob {
	t.Helper()
	jobs := ParseScontrolJobs(fixture(t, name))
	if len(jobs) != 1 {
		t.Fatalf("%s: %d records, want 1", name, len(jobs))
	}
	return jobs[0]
}

func TestParseScontrolJob(t *testing.T) {
	for _, tc := range []struct {
		file                  string
		id, state, reason     string
		exit                  ExitStatus
		base                  string
		inferred              bool
		stdout, workdir, node string
	}{
		{"scontrol-exit3.txt", "1", "FAILED", "NonZeroExitCode", ExitStatus{"3:0", 3, 0}, "FAILED", false, "/tmp/sl/o1.out", "/tmp/sl", "vm"},
		{"scontrol-child-segv.txt", "2", "FAILED", "NonZeroExitCode", ExitStatus{"139:0", 139, 0}, "FAILED", false, "/tmp/sl/o2.out", "/tmp/sl", "vm"},
		{"scontrol-oom.txt", "3", "OUT_OF_MEMORY", "OutOfMemory", ExitStatus{"0:125", 0, 125}, "OUT_OF_MEMORY", false, "/tmp/sl/o3.out", "/tmp/sl", "vm"},
		{"scontrol-cancelled.txt", "4", "CANCELLED", "None", ExitStatus{"0:15", 0, 15}, "CANCELLED", false, "/tmp/sl/o4.out", "/tmp/sl", "vm"},
		{"scontrol-batch-segv.txt", "5", "FAILED", "JobLaunchFailure", ExitStatus{"0:11", 0, 11}, "FAILED", false, "/tmp/sl/o5.out", "/tmp/sl", "vm"},
		{"scontrol-completed.txt", "6", "COMPLETED", "None", ExitStatus{"0:0", 0, 0}, "COMPLETED", false, "/tmp/sl/o6.out", "/tmp/sl", "vm"},
		{"scontrol-timeout.txt", "10", "TIMEOUT", "TimeLimit", ExitStatus{"0:15", 0, 15}, "TIMEOUT", false, "/tmp/sl/o10.out", "/tmp/sl", "vm"},
		{"scontrol-node-fail.txt", "11", "NODE_FAIL", "NodeDown", ExitStatus{"0:0", 0, 0}, "NODE_FAIL", false, "/tmp/sl/o11.out", "/tmp/sl", "gpu01"},
		// What an epilog sees: COMPLETING until every epilog has finished.
		{"scontrol-epilog-oom.txt", "3", "COMPLETING", "OutOfMemory", ExitStatus{"0:125", 0, 125}, "OUT_OF_MEMORY", true, "/tmp/sl/o3.out", "/tmp/sl", "vm"},
		{"scontrol-epilog-cancelled.txt", "4", "COMPLETING", "None", ExitStatus{"0:15", 0, 15}, "CANCELLED", true, "/tmp/sl/o4.out", "/tmp/sl", "vm"},
		{"scontrol-epilog-child-segv.txt", "2", "COMPLETING", "NonZeroExitCode", ExitStatus{"139:0", 139, 0}, "FAILED", true, "/tmp/sl/o2.out", "/tmp/sl", "vm"},
		// Values with spaces: Command (script path, then its arguments), WorkDir, StdOut, JobName.
		{"scontrol-spaces.txt", "7", "COMPLETED", "None", ExitStatus{"0:0", 0, 0}, "COMPLETED", false, "/tmp/sl/dir with space/out 7.txt", "/tmp/sl/dir with space", "vm"},
		{"scontrol-multiline.txt", "7", "COMPLETED", "None", ExitStatus{"0:0", 0, 0}, "COMPLETED", false, "/tmp/sl/dir with space/out 7.txt", "/tmp/sl/dir with space", "vm"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			j := oneJob(t, tc.file)
			if j.ID != tc.id || j.State != tc.state || j.Reason != tc.reason || j.Exit != tc.exit {
				t.Errorf("got id %q state %q reason %q exit %+v; want %q %q %q %+v", j.ID, j.State, j.Reason, j.Exit, tc.id, tc.state, tc.reason, tc.exit)
			}
			if st, inf := j.BaseState(); st != tc.base || inf != tc.inferred {
				t.Errorf("BaseState = %s, %v; want %s, %v", st, inf, tc.base, tc.inferred)
			}
			if j.StdOut != tc.stdout || j.StdErr != tc.stdout || j.WorkDir != tc.workdir || j.BatchHost != tc.node {
				t.Errorf("stdout %q stderr %q workdir %q batchhost %q", j.StdOut, j.StdErr, j.WorkDir, j.BatchHost)
			}
			if j.Fields["StdIn"] != "/dev/null" || j.Fields["Power"] != "" || j.Fields["Partition"] != "debug" {
				t.Errorf("StdIn %q Power %q Partition %q", j.Fields["StdIn"], j.Fields["Power"], j.Fields["Partition"])
			}
			if j.StartTime.IsZero() || j.EndTime.IsZero() || j.EndTime.Before(j.StartTime) {
				t.Errorf("start %v end %v", j.StartTime, j.EndTime)
			}
			if len(j.Keys) < 60 {
				t.Errorf("only %d fields: %v", len(j.Keys), j.Keys)
			}
		})
	}
}

func TestParseScontrolSpaces(t *testing.T) {
	j := oneJob(t, "scontrol-spaces.txt")
	if j.Name != "my job name" {
		t.Errorf("JobName %q", j.Name)
	}
	// FOO=bar is an argument of the script, not a field: it is no known key.
	if j.Command != "/tmp/sl/dir with space/my job.sh arg1 FOO=bar --x=1" {
		t.Errorf("Command %q", j.Command)
	}
	if _, ok := j.Fields["FOO"]; ok {
		t.Errorf("FOO parsed as a field")
	}
	m := oneJob(t, "scontrol-multiline.txt")
	if !reflect.DeepEqual(j.Fields, m.Fields) {
		t.Errorf("-o and multi-line forms differ:\n%v\n%v", j.Fields, m.Fields)
	}
	if j.MinMemory != "1G" || j.UserID != "root(0)" || j.Command == "" {
		t.Errorf("MinMemory %q UserID %q", j.MinMemory, j.UserID)
	}
	// A --wrap job's Command is (null).
	if c := oneJob(t, "scontrol-exit3.txt").Command; c != "" {
		t.Errorf("wrap Command %q", c)
	}
}

func TestParseScontrolArray(t *testing.T) {
	jobs := ParseScontrolJobs(fixture(t, "scontrol-array.txt"))
	if len(jobs) != 2 {
		t.Fatalf("%d records", len(jobs))
	}
	if j := PickJob(jobs, "8_1"); j == nil || j.ID != "9" || j.ArrayTaskID != "1" {
		t.Errorf("8_1 -> %+v", j)
	}
	if j := PickJob(jobs, "9"); j == nil || j.ID != "9" {
		t.Errorf("9 -> %+v", j)
	}
	if PickJob(nil, "1") != nil {
		t.Error("no records gives a job")
	}
}

func TestParseScontrolDerived(t *testing.T) {
	j := oneJob(t, "scontrol-step-oom-d.txt")
	if j.DerivedExit == nil || j.DerivedExit.Signal != SigOOM || j.Exit.Code != 1 {
		t.Fatalf("exit %+v derived %+v", j.Exit, j.DerivedExit)
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		in      string
		ok      bool
		sig     int
		implied bool
	}{
		{"3:0", true, 0, false},
		{"139:0", true, 11, true},
		{"137:0", true, 9, true},
		{"0:11", true, 11, false},
		{"0:15", true, 15, false},
		{"0:125", true, 0, false}, // Slurm's OOM marker, not a signal
		{"0:0", true, 0, false},
		{"128:0", true, 0, false},
		{"255:0", true, 0, false},
		{"7", true, 0, false},
		{"", false, 0, false},
		{"x:1", false, 0, false},
		{"1:-1", false, 0, false},
	} {
		e, ok := ParseExitStatus(tc.in)
		if ok != tc.ok {
			t.Errorf("%q: ok %v", tc.in, ok)
			continue
		}
		if s, imp := e.DeathSignal(); s != tc.sig || imp != tc.implied {
			t.Errorf("%q: DeathSignal %d %v, want %d %v", tc.in, s, imp, tc.sig, tc.implied)
		}
	}
}

func TestParseMemSize(t *testing.T) {
	for in, want := range map[string]int64{"211776K": 211776 << 10, "224K": 224 << 10, "50M": 50 << 20, "1.50G": 3 << 29,
		"2T": 2 << 40, "0": 0, "4096": 4096} {
		if got, ok := ParseMemSize(in); !ok || got != want {
			t.Errorf("%q = %d %v, want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "K", "abc", "-1M"} {
		if _, ok := ParseMemSize(in); ok {
			t.Errorf("%q parsed", in)
		}
	}
}

func TestParseSacct(t *testing.T) {
	rows := ParseSacct(fixture(t, "sacct-maxrss.txt"), SacctFields)
	if len(rows) != 2 || rows[1].JobID != "11.batch" || rows[1].MaxRSS != 211776<<10 || rows[0].MaxRSS != -1 {
		t.Fatalf("%+v", rows)
	}
	a := &Accounting{JobID: "11", Rows: rows}
	if rss, step, ok := a.MaxRSS(); !ok || rss != 211776<<10 || step != "11.batch" {
		t.Errorf("MaxRSS %d %s %v", rss, step, ok)
	}
	if a.Job() == nil || a.Job().JobID != "11" || a.Job().Fields["ReqMem"] != "1G" || a.Job().Fields["JobName"] != "wrap" {
		t.Errorf("Job %+v", a.Job())
	}
	// A header line (no -n) is skipped; a name holding '|' stays in the last column.
	rows = ParseSacct([]byte("JobID|State|ExitCode\n12|FAILED|3:0|extra\n"), []string{"JobID", "State", "ExitCode"})
	if len(rows) != 1 || rows[0].Fields["ExitCode"] != "3:0|extra" {
		t.Errorf("%+v", rows)
	}
	step := &Accounting{JobID: "10", Rows: ParseSacct(fixture(t, "sacct-step-oom.txt"), SacctFields)}
	if got := step.OOMSteps(); !reflect.DeepEqual(got, []string{"10.0"}) {
		t.Errorf("OOMSteps %v", got)
	}
	if st := NormState(ParseSacct(fixture(t, "sacct-4.txt"), SacctFields)[0].State); st != StateCancelled {
		t.Errorf("CANCELLED by 0 -> %q", st)
	}
}

func TestExpandHostlist(t *testing.T) {
	for in, want := range map[string][]string{
		"vm":                       {"vm"},
		"gpu[01-03,07],cpu5":       {"gpu01", "gpu02", "gpu03", "gpu07", "cpu5"},
		"n[8-10]":                  {"n8", "n9", "n10"},
		"a[1-2]-ib":                {"a1-ib", "a2-ib"},
		"rack[1-2]-node[1-2]":      {"rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"},
		"bad[3-1]":                 {"bad[3-1]"},
		"":                         nil,
		"x[1-2],y,z[05]":           {"x1", "x2", "y", "z05"},
		"node-a.example.com,other": {"node-a.example.com", "other"},
	} {
		if got := ExpandHostlist(in); !reflect.DeepEqual(got, want) {
			t.Errorf("%q = %v, want %v", in, got, want)
		}
	}
	j := oneJob(t, "scontrol-node-fail.txt")
	if !j.OnNode("gpu02") || !j.OnNode("gpu01.cluster.local") || j.OnNode("gpu03") {
		t.Error("OnNode")
	}
}

func TestOutcome(t *testing.T) {
	acct := func(id, file string, completion bool) *Accounting {
		return &Accounting{JobID: id, Rows: ParseSacct(fixture(t, file), SacctFields), Completion: completion}
	}
	intp := func(n int) *int { return &n }
	for _, tc := range []struct {
		name     string
		job      string
		acct     *Accounting
		envExit  string
		state    string
		failed   bool
		code     *int
		sig      int
		kinds    []evidence.Kind
		inReason string
	}{
		{"exit 3", "scontrol-exit3.txt", acct("1", "sacct-1.txt", false), "", "FAILED", true, intp(3), 0, nil, "ExitCode 3:0 (scontrol)"},
		{"child segfault 139:0", "scontrol-child-segv.txt", acct("2", "sacct-2.txt", false), "", "FAILED", true, intp(139), 11, nil, "128+11, a program it ran died of SIGSEGV"},
		{"batch shell segfault 0:11", "scontrol-batch-segv.txt", acct("5", "sacct-5.txt", false), "", "FAILED", true, nil, 11, nil, "0:11"},
		{"oom", "scontrol-oom.txt", acct("3", "sacct-3.txt", false), "", "OUT_OF_MEMORY", true, nil, 9, []evidence.Kind{evidence.HostOOM}, "OOM killer"},
		{"cancelled", "scontrol-cancelled.txt", acct("4", "sacct-4.txt", false), "", "CANCELLED", true, nil, 15, []evidence.Kind{evidence.Killed}, "0:15"},
		{"timeout", "scontrol-timeout.txt", nil, "", "TIMEOUT", true, nil, 15, []evidence.Kind{evidence.Hang}, "TIMEOUT"},
		{"node fail", "scontrol-node-fail.txt", nil, "", "NODE_FAIL", true, nil, 0, []evidence.Kind{evidence.Killed}, "NODE_FAIL"},
		{"completed", "scontrol-completed.txt", acct("6", "sacct-6.txt", false), "", "COMPLETED", false, intp(0), 0, nil, "COMPLETED"},
		{"step oom, job failed", "scontrol-step-oom-d.txt", acct("10", "sacct-step-oom.txt", false), "", "FAILED", true, intp(1), 0, []evidence.Kind{evidence.HostOOM}, "1:0"},
		// The epilog: scontrol says COMPLETING.
		{"epilog oom", "scontrol-epilog-oom.txt", nil, "0:125", "OUT_OF_MEMORY", true, nil, 9, []evidence.Kind{evidence.HostOOM}, "OOM"},
		{"epilog cancelled, no accounting", "scontrol-epilog-cancelled.txt", nil, "0:0", "CANCELLED", true, nil, 15, []evidence.Kind{evidence.Killed}, "0:15"},
		{"epilog cancelled, sacct knows", "scontrol-epilog-cancelled.txt", acct("4", "sacct-4.txt", false), "0:0", "CANCELLED", true, nil, 15, []evidence.Kind{evidence.Killed}, "0:15"},
		// scontrol forgot the job: sacct alone. slurmdbd shows 139 as 11:0 (no signal implied); sacct -c as 139:0.
		{"sacct only, dbd", "", acct("2", "sacct-2.txt", false), "", "FAILED", true, intp(11), 0, nil, "may be a death by signal"},
		{"sacct -c only", "", acct("2", "sacct-c-2.txt", true), "", "FAILED", true, intp(139), 11, nil, "128+11"},
		{"sacct -c cancelled 0:0", "", acct("4", "sacct-c-4.txt", true), "", "CANCELLED", true, nil, 0, []evidence.Kind{evidence.Killed}, "0:0"},
		// Nothing but the epilog's environment.
		{"env only", "", nil, "3:0", "FAILED", true, intp(3), 0, nil, "SLURM_JOB_EXIT_CODE2"},
		{"env only, ok", "", nil, "0:0", "COMPLETED", false, intp(0), 0, nil, "COMPLETED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j *SlurmJob
			var raw []byte
			id := ""
			if tc.job != "" {
				j, raw = oneJob(t, tc.job), fixture(t, tc.job)
				id = j.ID
			} else if tc.acct != nil {
				id = tc.acct.JobID
			} else {
				id = "99"
			}
			o := NewOutcome(id, j, raw, tc.acct, tc.envExit)
			if o.State != tc.state || o.Failed(nil) != tc.failed {
				t.Errorf("state %s (%s) failed %v", o.State, o.StateFrom, o.Failed(nil))
			}
			code, sig, reason := o.BundleExit()
			if (code == nil) != (tc.code == nil) || code != nil && *code != *tc.code || sig != tc.sig {
				t.Errorf("BundleExit code %v sig %d, want %v %d (%s)", deref(code), sig, deref(tc.code), tc.sig, reason)
			}
			if !strings.Contains(reason, tc.inReason) {
				t.Errorf("reason %q lacks %q", reason, tc.inReason)
			}
			var kinds []evidence.Kind
			for _, f := range o.Findings() {
				kinds = append(kinds, f.Kind)
				if f.Source != evidence.SourceScheduler || f.Details["job_id"] != id || !strings.Contains(f.Text, "slurm job "+id) {
					t.Errorf("finding %+v", f)
				}
			}
			if !reflect.DeepEqual(kinds, tc.kinds) {
				t.Errorf("finding kinds %v, want %v", kinds, tc.kinds)
			}
			if s := o.Summary(); s["state"] != tc.state {
				t.Errorf("summary %v", s)
			}
		})
	}
}

func TestOutcomeOOMDetails(t *testing.T) {
	o := NewOutcome("3", oneJob(t, "scontrol-oom.txt"), nil, &Accounting{JobID: "3", Rows: ParseSacct(fixture(t, "sacct-3.txt"), SacctFields)}, "")
	f := o.Findings()
	if len(f) != 1 || f[0].Text != "slurm job 3 state OUT_OF_MEMORY (Reason=OutOfMemory ExitCode=0:125): the job went over its memory limit (50M)" {
		t.Fatalf("%+v", f)
	}
	if f[0].Details["max_rss_bytes"] != int64(0) || f[0].Details["min_memory"] != "50M" || f[0].Time == nil {
		t.Errorf("details %v time %v", f[0].Details, f[0].Time)
	}
	if !o.Failed([]string{"out_of_memory"}) || o.Failed([]string{"FAILED"}) {
		t.Error("Failed with explicit states")
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// fakeTool writes an executable shell script into dir.
func fakeTool(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSlurmCommands(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs(filepath.Join("testdata", "slurm"))
	args := filepath.Join(dir, "args")
	s := &Slurm{
		Scontrol: fakeTool(t, dir, "scontrol", `echo "$@" >> `+args+`; cat `+abs+`/scontrol-oom.txt`),
		Sacct:    fakeTool(t, dir, "sacct", `echo "$@" >> `+args+`; cat `+abs+`/sacct-3.txt`),
	}
	ctx := context.Background()
	j, raw, err := s.ShowJob(ctx, "3")
	if err != nil || j.State != StateOutOfMemory || len(raw) == 0 {
		t.Fatalf("ShowJob: %v %+v", err, j)
	}
	a, err := s.Accounting(ctx, "3")
	if err != nil || a.Completion || len(a.Rows) != 2 || a.Job().State != StateOutOfMemory {
		t.Fatalf("Accounting: %v %+v", err, a)
	}
	b, _ := os.ReadFile(args)
	want := "show job -o 3\n-j 3 -P -n --format=" + strings.Join(SacctFields, ",") + "\n"
	if string(b) != want {
		t.Errorf("command lines:\n%s\nwant\n%s", b, want)
	}

	// Accounting off: sacct fails, then `sacct -c` (the jobcomp log) answers.
	os.Remove(args)
	s.Sacct = fakeTool(t, dir, "sacct2", `echo "$@" >> `+args+`; case "$1" in -c) cat `+abs+`/sacct-c-2.txt;; *) echo "Slurm accounting storage is disabled" >&2; exit 1;; esac`)
	a, err = s.Accounting(ctx, "2")
	if err != nil || !a.Completion || a.Job().Exit.Code != 139 || a.Command[1] != "-c" {
		t.Fatalf("sacct -c: %v %+v", err, a)
	}
	// Neither answers.
	s.Sacct = fakeTool(t, dir, "sacct3", `echo "Slurm accounting storage is disabled" >&2; exit 1`)
	if _, err := s.Accounting(ctx, "2"); err == nil || !strings.Contains(err.Error(), "accounting storage is disabled") {
		t.Errorf("no accounting: %v", err)
	}
	// A job scontrol forgot.
	s.Scontrol = fakeTool(t, dir, "scontrol2", `echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1`)
	if _, _, err := s.ShowJob(ctx, "77"); !errors.Is(err, ErrJobNotFound) {
		t.Errorf("forgotten job: %v", err)
	}
	// Any other failure is not ErrJobNotFound.
	s.Scontrol = fakeTool(t, dir, "scontrol3", `echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1`)
	if _, _, err := s.ShowJob(ctx, "77"); err == nil || errors.Is(err, ErrJobNotFound) || !strings.Contains(err.Error(), "Unable to contact") {
		t.Errorf("controller down: %v", err)
	}
	// A hung scontrol (and what it forked) is killed at the deadline.
	s.Scontrol = fakeTool(t, dir, "scontrol4", `sleep 30 & sleep 30`)
	s.Timeout = 300 * time.Millisecond
	begin := time.Now()
	if _, _, err := s.ShowJob(ctx, "77"); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("hung scontrol: %v", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("hung scontrol took %s", d)
	}
}

func TestBatchScript(t *testing.T) {
	dir := t.TempDir()
	wrap := "#!/bin/sh\n# This script was created by sbatch --wrap.\n\npython3 -c \"import ctypes; ctypes.string_at(0)\"\n"
	os.WriteFile(filepath.Join(dir, "script"), []byte(wrap), 0o644)
	s := &Slurm{Scontrol: fakeTool(t, dir, "scontrol", `[ "$1 $2 $4" = "write batch_script -" ] && cat `+dir+`/script`)}
	b, err := s.BatchScript(context.Background(), "5")
	if err != nil || string(b) != wrap {
		t.Fatalf("%q %v", b, err)
	}
	if w := WrappedCommand(b); w != `python3 -c "import ctypes; ctypes.string_at(0)"` {
		t.Errorf("WrappedCommand %q", w)
	}
	o := &Outcome{JobID: "5", Script: b}
	if c := o.Command(); !reflect.DeepEqual(c, []string{"sh", "-c", `python3 -c "import ctypes; ctypes.string_at(0)"`}) {
		t.Errorf("Command %q", c)
	}
	o.Job = oneJob(t, "scontrol-spaces.txt")
	if c := o.Command(); c[len(c)-1] != "--x=1" {
		t.Errorf("Command %q", c)
	}
	if c := (&Outcome{JobID: "5"}).Command(); !reflect.DeepEqual(c, []string{"slurm-job:5"}) {
		t.Errorf("Command %q", c)
	}
	// Slurm 22.05 exits 0 when the job is gone.
	s.Scontrol = fakeTool(t, dir, "scontrol2", `echo "job script retrieval failed: Invalid job id specified" >&2`)
	if _, err := s.BatchScript(context.Background(), "5"); err == nil || !strings.Contains(err.Error(), "Invalid job id") {
		t.Errorf("gone: %v", err)
	}
}

func TestResolveWithoutPath(t *testing.T) {
	t.Setenv("PATH", "")
	if p := resolve("sh"); p != "/usr/bin/sh" && p != "/bin/sh" {
		t.Errorf("resolve(sh) with no PATH = %q", p)
	}
	if p := resolve("./x/scontrol"); p != "./x/scontrol" {
		t.Errorf("a path is kept: %q", p)
	}
}
