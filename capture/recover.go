package capture

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/report"
)

// RecoverStages turns what killed kcrash processes left staged in dir (a
// SIGKILL while they collected) into bundles, marked incomplete, redacted
// as a bundle of this kcrash's would be (its environment and c.Secrets, and
// the writer's own secrets by their prints), with the verdict of what they
// hold; one stderr line for each. Every command that writes or reads
// bundles in a directory calls it first.
func RecoverStages(io *iostreams.IOStreams, dir string, c Config) []bundle.Recovered {
	if dir == "" {
		return nil
	}
	got, err := bundle.Recover(dir, bundle.RecoverOptions{Secrets: c.Secrets, Budget: c.Budget,
		Report: report.StagePage, Triage: triageStage, Warn: io.Err})
	if err != nil {
		return nil // a directory that cannot be read has nothing to recover here
	}
	for _, r := range got {
		fmt.Fprintf(io.Err, "kcrash: recovered the bundle of a kcrash killed while collecting (pid %d): %s (incomplete)\n",
			r.Writer.Pid, DisplayPath(r.Path))
	}
	return got
}

// triageStage judges a dead writer's stage from what is on disk: how the
// child ended (as the writer knew when it began collecting), output.log,
// kernel-api.log and the kernel findings with their attribution to the run
// (raw/kmsg-findings.json). What other collectors found went only to the
// writer's memory (cgroup, smi) and is lost with it.
func triageStage(dir string, w *bundle.Writer) (json.RawMessage, string) {
	env := &collectors.Env{Start: w.StartTime, ProcRoot: "/proc", SysRoot: "/sys", DevRoot: "/dev", FSRoot: "/",
		Logger: slog.New(slog.DiscardHandler)}
	if b, err := os.ReadFile(filepath.Join(dir, "raw", "kmsg-findings.json")); err == nil {
		var rep struct {
			Findings []evidence.Finding `json:"findings"`
		}
		if json.Unmarshal(b, &rep) == nil { // one cut short by the kill says nothing
			env.AddFinding(rep.Findings...)
		}
	}
	kapi := filepath.Join(dir, "kernel-api.log")
	if _, err := os.Stat(kapi); err == nil {
		env.KernelAPILogs = []string{kapi}
	}
	ex := Exit{Code: w.Exit.Code, CoreDumped: w.Exit.CoreDumped, Reason: w.Exit.Reason, End: w.EndTime}
	if w.Exit.Signal != nil {
		ex.Signal = *w.Exit.Signal
	}
	tri := analyze(env, dir, ex, w.Hang, w.Command, nil, nil)
	sum := tri.summary(summaryMeta{name: w.Name, args: w.Command, ex: ex, start: w.StartTime, outputFile: filepath.Join(dir, "output.log")})
	return tri.json, visible.String(sum)
}
