package collectors

import (
	"context"
	"encoding/json"
)

func init() {
	Register(Info{Name: "processes", Description: "the child's process tree, exited descendants included, as processes.json", Default: true},
		func() Collector { return processesCollector{} })
}

type processesCollector struct{}

func (processesCollector) Collect(_ context.Context, env *Env, out *Output) error {
	if env.Tree == nil {
		return Skip("no supervised process tree")
	}
	b, err := json.MarshalIndent(map[string]any{"root_pid": env.RootPid, "processes": env.Tree.Processes()}, "", "  ")
	if err != nil {
		return err
	}
	return out.WriteFile("processes.json", append(b, '\n'))
}
