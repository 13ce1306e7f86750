package collectors

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kcrash/kcrash/evidence"
)

func init() {
	Register(Info{Name: "processes", Description: "the child's process tree, exited descendants included, as processes.json", Default: true},
		func() Collector { return processesCollector{} })
}

type processesCollector struct{}

// crashSignals are the deaths that are a process's own crash; SIGKILL and
// SIGTERM of a worker are most often the parent's teardown (an OOM kill has
// its own kernel record).
var crashSignals = map[string]bool{"SIGSEGV": true, "SIGABRT": true, "SIGBUS": true, "SIGFPE": true, "SIGILL": true, "SIGSYS": true}

func (processesCollector) Collect(_ context.Context, env *Env, out *Output) error {
	if env.Tree == nil {
		return Skip("no supervised process tree")
	}
	procs := env.Tree.Processes()
	for _, p := range procs {
		// The root's own death is the exit status; a descendant's crash is
		// evidence nobody else reports (no one waited for it).
		if int(p.Pid) == env.RootPid || !crashSignals[p.ExitSignal] {
			continue
		}
		text := fmt.Sprintf("%s (pid %d, child of %d) died of %s", p.Name, p.Pid, p.PPid, p.ExitSignal)
		if p.CoreDumped {
			text += " (core dumped)"
		}
		f := evidence.Finding{Kind: evidence.NativeCrash, Source: evidence.SourceExit, File: "processes.json", Text: text,
			Pid: int(p.Pid), Attribution: "pid-in-tree",
			Details: map[string]any{"signal": p.ExitSignal, "process": p.Name, "cmdline": strings.Join(p.Cmdline, " ")}}
		if !p.LastSeen.IsZero() {
			t := p.LastSeen.UTC()
			f.Time = &t
		}
		env.AddFinding(f)
	}
	b, err := json.MarshalIndent(map[string]any{"root_pid": env.RootPid, "processes": procs}, "", "  ")
	if err != nil {
		return err
	}
	return out.WriteFile("processes.json", append(b, '\n'))
}
