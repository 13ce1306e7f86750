package collectors

import "context"

func init() {
	Register(Info{Name: "output", Description: "the child's last output (the ring buffer) as output.log", Default: true},
		func() Collector { return outputCollector{} })
}

type outputCollector struct{}

func (outputCollector) Collect(_ context.Context, env *Env, out *Output) error {
	if env.Output == nil {
		return Skip("no supervised output")
	}
	return out.WriteFile("output.log", env.Output())
}
