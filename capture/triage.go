package capture

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/crashsig"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/kernelapi"
	"github.com/kcrash/kcrash/triage"
)

// maxFullKernelAPI bounds the kernel-API logs analysed whole at collection
// (about 2 s at the analyser's speed); beyond it the bundle's tail is analysed.
const maxFullKernelAPI = 512 << 20

// analyze triages a staged bundle: the collectors' findings (kernel messages,
// cgroup, smi, core dump), the output's signatures and the kernel-API logs.
// childEnv is the child's environment (K=V) when kcrash started or attached
// to it, for the backend it chose.
func analyze(env *collectors.Env, dir string, ex Exit, hang bool, args []string, run *triage.RunSetup, childEnv []string) triageResult {
	findings := env.Findings()
	checked := []string{"exit status"}
	if f, err := os.Open(filepath.Join(dir, "output.log")); err == nil {
		lf, _ := triage.ScanLogWithCues(f, "output.log") // with the generic fallback's cues, for a log no rule knows
		f.Close()
		findings = append(findings, lf...)
		checked = append(checked, "output.log")
	}
	unseen := env.Unseen()
	if _, err := os.Stat(filepath.Join(dir, "kmsg.log")); err == nil && !slices.ContainsFunc(unseen, func(u evidence.Unseen) bool { return u.Source == collectors.UnseenKmsg }) {
		checked = append(checked, "kmsg.log")
	}
	var kapi *kernelapi.Report
	files := collectors.KernelAPIFilesAs(env.ReadAs, env.KernelAPILogs)
	if len(files) > 0 {
		var total int64
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				total += fi.Size()
			}
		}
		if total > maxFullKernelAPI || env.ReadAs != nil {
			// Too big to analyse whole; or the job's own paths, which only the
			// collector reads (with the job user's rights): analyse its tail.
			files = []string{filepath.Join(dir, "kernel-api.log")}
		}
		opts := kernelapi.Options{End: ex.End}
		if env.WorkDir != "" {
			// level-10 dumps left at inputs_saved name the call that never returned
			roots, _ := filepath.Glob(filepath.Join(env.WorkDir, "*_dumps*"))
			opts.DumpRoots = roots
		}
		if r, err := opts.Analyze(files); err == nil {
			// Cite the bundle's kernel-api.log, which its reader has; the
			// run's work directory is gone by then.
			bundleCopy := filepath.Join(dir, "kernel-api.log")
			r.Relocate(func(file string, line int) (string, int, bool) {
				if file == bundleCopy {
					return "kernel-api.log", line, true
				}
				if l, ok := env.KernelAPILine(file, line); ok {
					return "kernel-api.log", l, true
				}
				return "", 0, false
			})
			kapi = r
			checked = append(checked, "kernel-API log")
		}
	}
	for _, name := range []string{"memory.json", "gpu.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			checked = append(checked, name)
		}
	}
	if run != nil && hang {
		run.Pids = livePythonPids(env)
		run.PyStacksHook = env.PyStacksDir != ""
		run.PyStacks = pyStacksTaken(filepath.Join(dir, "raw", "pystacks.txt"))
	}
	res := triage.Decide(triage.Input{ExitCode: ex.Code, Signal: ex.Signal, CoreDumped: ex.CoreDumped,
		Findings: findings, KernelAPI: kapi, HangDetected: hang, Checked: checked, Command: args,
		Run: run, HostVendor: hostVendor(env), Unseen: unseen, HangTrigger: hangTrigger(hang, ex),
		Env: childEnv, GPUModels: gpuModels(dir), GPUArch: gpuArches(dir)})
	if ex.StoppedBy != "" {
		// The user (or a scheduler) stopped the run: what the interrupt left in the log (a
		// KeyboardInterrupt traceback) is its consequence, not a cause.
		res.Verdict = triage.Verdict{Kind: evidence.Killed, Confidence: triage.High,
			Summary: "stopped by " + ex.StoppedBy + "; not a crash"}
		for i := range res.Findings {
			if res.Findings[i].Details.Text(detail.VerdictRole) == triage.RoleRootCause {
				res.Findings[i].Details.SetText(detail.VerdictRole, triage.RoleExplained)
			}
		}
		res.NextSteps = []string{}
	}
	b, err := json.Marshal(res)
	if err != nil {
		b = []byte(`null`)
	}
	sig := crashsig.Compute(crashsig.FromTriage(res, ex.Signal))
	return triageResult{verdict: res.Verdict, json: b, signature: sig, summary: func(m summaryMeta) string {
		out, _, _ := collectors.TailFile(m.outputFile, 64<<10)
		host, _ := os.Hostname()
		return triage.Summary(res, triage.SummaryMeta{Command: m.args, ExitText: exitText(m.ex),
			Duration: m.ex.End.Sub(m.start), LastLines: triage.LastLines(out, 30), Host: host, BundleName: m.name, SlurmJob: m.slurmJob})
	}}
}

// runSetup is what kcrash run did to the child, for next steps that do not
// repeat it: the profiles, the level, and whether the core size limit the
// child inherited (kcrash's own) allowed a core file at all.
func runSetup(profiles []string, level int) *triage.RunSetup {
	var lim unix.Rlimit
	zero := unix.Getrlimit(unix.RLIMIT_CORE, &lim) == nil && lim.Cur == 0
	return &triage.RunSetup{Profiles: profiles, Level: level, CoreLimitZero: zero}
}

// hostVendor names the GPU vendor this host shows: the KFD device or the
// amdgpu module for AMD, the nvidia device or module for NVIDIA, else which
// smi tool is installed. "" when neither or both.
func hostVendor(env *collectors.Env) string {
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	tool := func(names ...string) bool {
		for _, n := range names {
			if _, err := exec.LookPath(n); err == nil {
				return true
			}
		}
		return false
	}
	amd := exists(filepath.Join(env.DevRoot, "kfd")) || exists(filepath.Join(env.SysRoot, "module", "amdgpu"))
	nv := exists(filepath.Join(env.DevRoot, "nvidiactl")) || exists(filepath.Join(env.SysRoot, "module", "nvidia"))
	if !amd && !nv {
		amd, nv = tool("rocm-smi", "amd-smi"), tool("nvidia-smi")
	}
	switch {
	case amd && !nv:
		return "amd"
	case nv && !amd:
		return "nvidia"
	}
	return ""
}

// livePythonPids are the Python processes of the tree still alive: the ones
// whose stacks a hang's next step tells to dump.
func livePythonPids(env *collectors.Env) []int {
	if env.Tree == nil {
		return nil
	}
	var pids []int
	for _, p := range env.Tree.Processes() {
		if p.Exited || !strings.HasPrefix(p.Name, "python") {
			continue
		}
		if _, err := os.Stat(env.Proc(strconv.Itoa(int(p.Pid)))); err == nil {
			pids = append(pids, int(p.Pid))
		}
	}
	sort.Ints(pids)
	return pids
}

// pyStacksTaken counts the processes whose dump the stacks collector wrote
// into raw/pystacks.txt: a "=== pid" header followed by a dump.
func pyStacksTaken(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n := 0
	for _, sec := range strings.Split("\n"+string(b), "\n=== pid ")[1:] {
		if _, body, _ := strings.Cut(sec, "\n"); strings.Contains(body, "(most recent call first)") {
			n++
		}
	}
	return n
}

// hangTrigger is what made the run a hang, for the verdict's words: the
// hang's exit reason ("hung: no output for 5s", "hung in shutdown: ...").
func hangTrigger(hang bool, ex Exit) string {
	if !hang {
		return ""
	}
	return strings.TrimPrefix(ex.Reason, "hung: ")
}
