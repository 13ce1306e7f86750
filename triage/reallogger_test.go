package triage

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/kernelapi"
)

// Logs written by FlashInfer's own logger (testdata/reallogger: gen.py ran
// the upstream api_logging.py unchanged; SOURCE says which commit), not by
// kcrash's stand-in of it.

type realLoggerRun struct {
	Crashed struct{ Pid, Returncode int } `json:"crashed"`
	Normal  struct{ Pid, Returncode int } `json:"normal"`
}

func loadRealLoggerLevel1(t *testing.T) (*kernelapi.Report, realLoggerRun) {
	t.Helper()
	dir := filepath.Join("testdata", "reallogger", "level1")
	var run realLoggerRun
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "flashinfer_*.log"))
	sort.Strings(files)
	if len(files) != 2 || run.Crashed.Returncode != -11 || run.Normal.Returncode != 0 {
		t.Fatalf("fixture: %v %+v", files, run)
	}
	rep, err := kernelapi.Options{SkipDumpCheck: true}.Analyze(files)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Level != 1 || rep.LastCall == nil {
		t.Fatalf("level %d, last call %+v", rep.Level, rep.LastCall)
	}
	return rep, run
}

// crashedWorker is what kcrash's process tree reports of the worker that
// died (collectors' processes collector), with the pid the parent's waitpid saw.
func crashedWorker(pid int) evidence.Finding {
	return evidence.Finding{Kind: evidence.NativeCrash, Source: evidence.SourceExit, File: "processes.json",
		Text: fmt.Sprintf("python3 (pid %d, child of 1) died of SIGSEGV", pid), Pid: pid, Attribution: "pid-in-tree",
		Details: map[string]any{"signal": "SIGSEGV", "process": "python3"}}
}

func suspectOf(r Result) *evidence.Finding {
	for i, f := range r.Findings {
		if f.Details.Text(detail.VerdictRole) == RoleSuspect {
			return &r.Findings[i]
		}
	}
	return nil
}

// With per-pid logs at level 1, the suspect is the crashed process's last
// call, not the newest line over all files (a worker that went on and ended
// normally), and kernel_api.last_call says the same.
func TestRealLoggerSuspectIsTheCrashedProcesss(t *testing.T) {
	rep, run := loadRealLoggerLevel1(t)
	if rep.LastCall.Pid != run.Normal.Pid {
		t.Fatalf("fixture: the newest call should be the normal worker's (pid %d), is %+v", run.Normal.Pid, rep.LastCall)
	}
	for name, f := range map[string]evidence.Finding{
		"process tree": crashedWorker(run.Crashed.Pid),
		"core dump": {Kind: evidence.NativeCrash, Source: evidence.SourceExit, Pid: run.Crashed.Pid,
			Text: "SIGSEGV, core dumped", Details: map[string]any{"signal": "SIGSEGV"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := Decide(Input{Signal: "SIGSEGV", Findings: []evidence.Finding{f}, KernelAPI: rep})
			s := suspectOf(r)
			if s == nil || s.Pid != run.Crashed.Pid || s.Details.Text(detail.API) != "mm_fp8" {
				t.Fatalf("suspect %+v, want mm_fp8 of pid %d", s, run.Crashed.Pid)
			}
			if lc := r.KernelAPI.LastCall; lc == nil || lc.Pid != run.Crashed.Pid || lc.API != "mm_fp8" {
				t.Errorf("kernel_api.last_call %+v, want the crashed pid %d's mm_fp8", lc, run.Crashed.Pid)
			}
			if rep.LastCall.Pid != run.Normal.Pid {
				t.Errorf("Decide changed its input's report")
			}
			sum := Summary(r, SummaryMeta{})
			if !strings.Contains(sum, fmt.Sprintf("pid %d", run.Crashed.Pid)) || strings.Contains(sum, "`apply`") {
				t.Errorf("summary names the wrong call:\n%s", sum)
			}
			if got := SuspectAPI(r); got != "mm_fp8" {
				t.Errorf("SuspectAPI %q", got)
			}
		})
	}
}

// A run that exited 0 has no suspect, however many calls it logged.
func TestRealLoggerCleanExitHasNoSuspect(t *testing.T) {
	rep, _ := loadRealLoggerLevel1(t)
	r := Decide(Input{ExitCode: vdInt(0), KernelAPI: rep})
	if r.Verdict.Kind != evidence.CleanExit {
		t.Fatalf("verdict %+v", r.Verdict)
	}
	if s := suspectOf(r); s != nil {
		t.Errorf("suspect on a clean exit: %+v", s)
	}
	if sum := Summary(r, SummaryMeta{}); strings.Contains(sum, "Suspect kernel-API call") {
		t.Errorf("summary has a suspect section:\n%s", sum)
	}
}

func loadRealLoggerLevel5(t *testing.T) *kernelapi.Report {
	t.Helper()
	rep, err := kernelapi.Options{SkipDumpCheck: true}.Analyze([]string{filepath.Join("testdata", "reallogger", "level5", "flashinfer.log")})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A return value that is the first non-finite tensor was produced by that
// call, not by the one before it.
func TestRealLoggerNonfiniteReturn(t *testing.T) {
	rep := loadRealLoggerLevel5(t)
	nf := rep.FirstNonfinite
	if nf == nil || nf.Arg.Name != "return" || nf.Call.API != "rmsnorm" {
		t.Fatalf("first non-finite %+v", nf)
	}
	r := Decide(Input{KernelAPI: rep})
	if r.Verdict.Kind != evidence.NumericalNonfinite {
		t.Fatalf("verdict %+v", r.Verdict)
	}
	steps := strings.Join(r.NextSteps, "\n")
	if strings.Contains(steps, "the call before it produced it") || !strings.Contains(steps, "rmsnorm produced it") {
		t.Errorf("steps:\n%s", steps)
	}
}

type callList []kernelapi.Call

func (l *callList) Call(_ int64, c kernelapi.Call)        { *l = append(*l, c) }
func (l *callList) Return(int64, []kernelapi.Arg, string) {}

// An argument whose value is an object's repr (`<pkg.Linear object at
// 0x…>`) stays inside its table cell and code spans in summary.md.
func TestRealLoggerObjectArgMarkdown(t *testing.T) {
	var calls callList
	_, err := kernelapi.Options{SkipDumpCheck: true, Calls: &calls}.Analyze([]string{filepath.Join("testdata", "reallogger", "level5", "flashinfer.log")})
	if err != nil || len(calls) == 0 || calls[0].API != "apply" || len(calls[0].Args) == 0 || !strings.Contains(calls[0].Args[0].Value, "Linear object at 0x") {
		t.Fatalf("calls %+v, %v", calls, err)
	}
	// The call with the object argument, as the suspect of a crash.
	r := Decide(Input{Signal: "SIGABRT", KernelAPI: &kernelapi.Report{Level: 5, LastCall: &calls[0]},
		Findings: []evidence.Finding{{Kind: evidence.GPUIllegalMemoryAccess, Source: evidence.SourceLog, File: "output.log", Line: 1,
			Text: "RuntimeError: CUDA error: an illegal memory access was encountered"}}})
	sum := Summary(r, SummaryMeta{})
	repr := calls[0].Args[0].Value
	if !strings.Contains(sum, "| `"+repr+"` |") || !strings.Contains(sum, "`(arg[0]=value("+repr+"`") {
		t.Errorf("the object's repr is not one code span in the table and the steps:\n%s", sum)
	}
	for _, l := range strings.Split(sum, "\n") {
		if !strings.HasSuffix(l, "```") && strings.Count(l, "`")%2 != 0 {
			t.Errorf("unbalanced backticks in %q", l)
		}
	}
}
