package main

import (
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"os"
	"strings"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/capture"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/collectors"
	"github.com/spf13/cobra"
)

type collectOptions struct {
	IO               *streams
	since            time.Duration
	out              string
	collectorTimeout time.Duration
	collectors       string
	skipCollectors   string
	budget           byteSize
	config           string
	slurmEpilog      bool
	epilogTimeout    time.Duration
	failStates       []string
}

func init() { register(func(s *streams) *cobra.Command { return newCollectCmd(s, nil) }) }

func newCollectCmd(s *streams, runF func(*collectOptions) error) *cobra.Command {
	o := &collectOptions{IO: s, budget: bundle.DefaultBudget}
	c := &cobra.Command{
		Use:   "collect",
		Short: "Write a bundle now from the host alone (a node found dead, a hung job, a scheduler epilog)",
		Long: `Write a bundle from the host alone, with no supervised command: kernel messages
of the last --since, GPU and host memory snapshots, recent OOM kills and GPU
faults, triaged. For a node found dead after the fact or a hung job.

With --slurm-epilog it is slurm.conf's Epilog (run by slurmd as root on each
node of a job when the job ends): it reads the job from the epilog's
environment (SLURM_JOB_ID) and ` + "`scontrol show job`" + `, writes a bundle only when the job
failed (--fail-states), stays within --epilog-timeout, and always exits 0 (an
epilog that fails drains the node); errors go to stderr and to
<out>/kcrash-epilog.log. It reads the job's StdOut/StdErr with the job user's
rights (a symlink, FIFO or file that user may not read is left out, and the
notes say why), writes bundles 0640, and creates <out> 0750, refusing one a
user could redirect. The .deb and .rpm install an epilog script that never
fails (see docs/install.md); slurm.conf:

  Epilog=/usr/libexec/kcrash/kcrash-epilog.sh

Without the package, a script of your own (slurmd gives epilogs no PATH):

  #!/bin/sh
  /usr/local/bin/kcrash collect --slurm-epilog --out /var/log/kcrash
  exit 0`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 && !epilogMode(o) {
				return usagef("collect: takes no arguments")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if epilogMode(o) {
				if runF != nil {
					return runF(o)
				}
				return runEpilog(o)
			}
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
			if runF != nil {
				return runF(o)
			}
			return runCollect(o)
		},
	}
	f := c.Flags()
	f.DurationVar(&o.since, "since", 10*time.Minute, "how far back kernel messages are kept")
	f.StringVar(&o.out, "out", "", "bundle `DIR` (default $KCRASH_OUT, else ./kcrash-bundles)")
	f.DurationVar(&o.collectorTimeout, "collector-timeout", 10*time.Second, "deadline for each collector")
	f.StringVar(&o.collectors, "collectors", "", "only these collectors: `NAMES`, comma-separated")
	f.StringVar(&o.skipCollectors, "skip-collectors", "", "collectors to leave out: `NAMES`, comma-separated")
	f.Var(&o.budget, "max-bundle-size", "compressed size budget of a bundle")
	f.BoolVar(&o.slurmEpilog, "slurm-epilog", false, "run as slurm.conf's Epilog: bundle the ended job (SLURM_JOB_ID) when it failed; always exit 0")
	f.DurationVar(&o.epilogTimeout, "epilog-timeout", 30*time.Second, "with --slurm-epilog: the time budget of the whole epilog")
	f.StringSliceVar(&o.failStates, "fail-states", cluster.DefaultFailStates, "with --slurm-epilog: the job states that get a bundle")
	configFlag(c, &o.config)
	// An epilog that exits non-zero drains the node: a bad command line in
	// epilog mode is logged, and kcrash exits 0.
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if epilogMode(o) {
			fmt.Fprintf(s.Err, "kcrash: collect --slurm-epilog: %v; nothing collected\n", err)
			return nil
		}
		return &usageError{fmt.Errorf("%v (see `%s --help`)", err, c.CommandPath())}
	})
	return c
}

func runCollect(o *collectOptions) error {
	s := o.IO
	chosen, err := collectors.Select(splitList(o.collectors), splitList(o.skipCollectors))
	if err != nil {
		return usagef("%v", err)
	}
	recoverStages(s, captureConfig(nil, o.out, o.collectorTimeout, o.budget), true)
	now := time.Now()
	env := collectors.NewEnv()
	env.Start, env.Since = now.Add(-o.since), now.Add(-o.since)
	env.Cwd, _ = os.Getwd()
	p := &capture.Session{IO: s, Config: captureConfig(nil, o.out, o.collectorTimeout, o.budget),
		Env: env, Chosen: chosen, Cwd: env.Cwd, Job: cluster.Identity(os.Getenv)}
	path, size, err := p.Bundle(capture.Exit{End: now, Reason: "kcrash collect: nothing supervised"}, false, "collect")
	if err != nil {
		return fmt.Errorf("no bundle written: %v", err)
	}
	fmt.Fprintf(s.Err, "kcrash: collected the last %s of this host; bundle %s (%s)\n", o.since, capture.DisplayPath(path), human.Bytes(size))
	return nil
}

// epilogMode says whether collect runs as a Slurm epilog: --slurm-epilog was
// parsed, or is on a command line that failed to parse.
func epilogMode(o *collectOptions) bool {
	return o.slurmEpilog || hasArg("--slurm-epilog")
}

func hasArg(a string) bool {
	for _, x := range os.Args[1:] {
		if x == a || strings.HasPrefix(x, a+"=") {
			return true
		}
	}
	return false
}

// runEpilog is `kcrash collect --slurm-epilog` (capture.Epilog). It never
// fails: a failing epilog drains the node.
func runEpilog(o *collectOptions) error {
	s := o.IO
	cfg, cerr := loadConfig(o.config)
	if cerr != nil {
		cfg = &userConfig{}
	}
	out := o.out
	for _, v := range []string{os.Getenv("KCRASH_OUT"), cfg.Out} {
		if out == "" {
			out = v
		}
	}
	capture.Epilog(s, capture.EpilogJob{Out: out, ConfigErr: cerr, Timeout: o.epilogTimeout,
		CollectorTimeout: o.collectorTimeout, Budget: int64(o.budget), FailStates: o.failStates,
		Only: splitList(o.collectors), Skip: splitList(o.skipCollectors), Version: version})
	return nil
}
