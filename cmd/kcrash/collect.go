package main

import (
	"fmt"
	"os"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/spf13/cobra"
)

type collectOptions struct {
	since            time.Duration
	out              string
	collectorTimeout time.Duration
	collectors       string
	skipCollectors   string
	budget           byteSize
	config           string
}

func init() {
	register(func(s *streams) *cobra.Command {
		o := &collectOptions{budget: bundle.DefaultBudget}
		c := &cobra.Command{
			Use:   "collect",
			Short: "Write a bundle now from the host alone (a node found dead, a hung job, a scheduler epilog)",
			Long: `Write a bundle from the host alone, with no supervised command: kernel messages
of the last --since, GPU and host memory snapshots, recent OOM kills and GPU
faults, triaged. For a node found dead after the fact or a hung job.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, err := loadConfig(o.config)
				if err != nil {
					return err
				}
				if o.out == "" {
					o.out = cfg.Out
				}
				if o.out == "" {
					o.out = os.Getenv("KCRASH_OUT")
				}
				if o.out == "" {
					o.out = "kcrash-bundles"
				}
				return runCollect(s, o)
			},
		}
		f := c.Flags()
		f.DurationVar(&o.since, "since", 10*time.Minute, "how far back kernel messages are kept")
		f.StringVar(&o.out, "out", "", "bundle directory (default $KCRASH_OUT, else ./kcrash-bundles)")
		f.DurationVar(&o.collectorTimeout, "collector-timeout", 10*time.Second, "deadline for each collector")
		f.StringVar(&o.collectors, "collectors", "", "only these collectors, comma-separated")
		f.StringVar(&o.skipCollectors, "skip-collectors", "", "collectors to leave out, comma-separated")
		f.Var(&o.budget, "max-bundle-size", "compressed size budget of a bundle")
		configFlag(c, &o.config)
		return c
	})
}

func runCollect(s *streams, o *collectOptions) error {
	chosen, err := collectors.Select(splitList(o.collectors), splitList(o.skipCollectors))
	if err != nil {
		return usagef("%v", err)
	}
	now := time.Now()
	env := collectors.NewEnv()
	env.Start, env.Since = now.Add(-o.since), now.Add(-o.since)
	env.Cwd, _ = os.Getwd()
	p := &pipeline{s: s, o: &runOptions{out: o.out, collectorTimeout: o.collectorTimeout, budget: o.budget},
		cfg: &userConfig{}, env: env, chosen: chosen, cwd: env.Cwd, job: cluster.Identity(os.Getenv),
		resolved: &configs.Resolved{Set: map[string]string{}, Kept: map[string]string{}}}
	path, size, err := p.bundle(exitInfo{end: now, reason: "kcrash collect: nothing supervised"}, false, "collect")
	if err != nil {
		return fmt.Errorf("no bundle written: %v", err)
	}
	fmt.Fprintf(s.Err, "kcrash: collected the last %s of this host; bundle %s (%s)\n", o.since, displayPath(path), shortBytes(size))
	return nil
}
