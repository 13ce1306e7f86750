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
	f, err := out.Create("output.log")
	if err != nil {
		return err
	}
	if _, err := env.Output(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
