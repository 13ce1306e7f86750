package main

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/triage"
)

// maxFullKernelAPI bounds the kernel-API logs analysed whole at collection
// (about 2 s at the analyser's speed); beyond it the bundle's tail is analysed.
const maxFullKernelAPI = 512 << 20

// analyze triages a staged bundle: the collectors' findings (kernel messages,
// cgroup, smi, core dump), the output's signatures and the kernel-API logs.
func analyze(env *collectors.Env, dir string, ex exitInfo, hang bool, args []string) triageResult {
	findings := env.Findings()
	checked := []string{"exit status"}
	if f, err := os.Open(filepath.Join(dir, "output.log")); err == nil {
		lf, _ := triage.ScanLog(f, "output.log")
		f.Close()
		findings = append(findings, lf...)
		checked = append(checked, "output.log")
	}
	if _, err := os.Stat(filepath.Join(dir, "kmsg.log")); err == nil {
		checked = append(checked, "kmsg.log")
	}
	var kapi *triage.KernelAPIReport
	files := collectors.KernelAPIFiles(env.KernelAPILogs)
	if len(files) > 0 {
		var total int64
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				total += fi.Size()
			}
		}
		if total > maxFullKernelAPI {
			files = []string{filepath.Join(dir, "kernel-api.log")}
		}
		opts := triage.KernelAPIOptions{End: ex.end}
		if env.WorkDir != "" {
			// level-10 dumps left at inputs_saved name the call that never returned
			roots, _ := filepath.Glob(filepath.Join(env.WorkDir, "*_dumps*"))
			opts.DumpRoots = roots
		}
		if r, err := opts.Analyze(files); err == nil {
			kapi = r
			checked = append(checked, "kernel-API log")
		}
	}
	for _, name := range []string{"memory.json", "gpu.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			checked = append(checked, name)
		}
	}
	res := triage.Decide(triage.Input{ExitCode: ex.code, Signal: ex.signal, CoreDumped: ex.coreDumped,
		Findings: findings, KernelAPI: kapi, HangDetected: hang, Checked: checked, Command: args})
	if ex.stoppedBy != "" {
		// The user stopped the run: what the interrupt left in the log (a
		// KeyboardInterrupt traceback) is its consequence, not a cause.
		res.Verdict = triage.Verdict{Kind: evidence.Killed, Confidence: triage.High,
			Summary: "stopped by the user (" + ex.stoppedBy + "); not a crash"}
		for i := range res.Findings {
			if res.Findings[i].Details != nil && res.Findings[i].Details["verdict_role"] == triage.RoleRootCause {
				res.Findings[i].Details["verdict_role"] = triage.RoleExplained
			}
		}
		res.NextSteps = []string{}
	}
	b, err := json.Marshal(res)
	if err != nil {
		b = []byte(`null`)
	}
	return triageResult{json: b, summary: func(m summaryMeta) string {
		out, _, _ := collectors.TailFile(m.outputFile, 64<<10)
		host, _ := os.Hostname()
		return triage.Summary(res, triage.SummaryMeta{Command: m.args, ExitText: exitText(m.ex),
			Duration: m.ex.end.Sub(m.start), LastLines: lastLines(out, 30), Host: host, BundleName: m.name})
	}}
}
