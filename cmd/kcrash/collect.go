package main

import (
	"context"
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	slurmEpilog      bool
	epilogTimeout    time.Duration
	failStates       []string
}

func init() {
	register(func(s *streams) *cobra.Command {
		o := &collectOptions{budget: bundle.DefaultBudget}
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
user could redirect. slurm.conf:

  Epilog=/usr/local/bin/kcrash-epilog.sh

with /usr/local/bin/kcrash-epilog.sh (slurmd gives epilogs no PATH):

  #!/bin/sh
  exec /usr/local/bin/kcrash collect --slurm-epilog --out /var/log/kcrash`,
			Args: func(c *cobra.Command, args []string) error {
				if len(args) > 0 && !epilogMode(o) {
					return usagef("collect: takes no arguments")
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				if epilogMode(o) {
					return runEpilog(s, o)
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
	fmt.Fprintf(s.Err, "kcrash: collected the last %s of this host; bundle %s (%s)\n", o.since, displayPath(path), human.Bytes(size))
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

// defaultEpilogOut is where an epilog's bundles go without --out, KCRASH_OUT
// or a config file (an epilog runs as root in slurmd's directory).
const defaultEpilogOut = "/var/log/kcrash"

// runEpilog is `kcrash collect --slurm-epilog`. It never fails: whatever goes
// wrong is logged and kcrash exits 0, since a failing epilog drains the node.
// Its time budget is split: each scontrol and sacct call (at most four) gets
// an eighth, the collectors a third, the rest is for writing; a watchdog
// exits 0 at the budget whatever is still running.
func runEpilog(s *streams, o *collectOptions) (err error) {
	begin := time.Now()
	budget := o.epilogTimeout
	if budget <= 0 {
		budget = 30 * time.Second
	}
	if os.Getenv("PATH") == "" {
		// slurmd runs epilogs with no PATH; scontrol, sacct and the collectors' tools need one.
		os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	cfg, cerr := loadConfig(o.config)
	if cerr != nil {
		cfg = &userConfig{}
	}
	out := o.out
	for _, v := range []string{os.Getenv("KCRASH_OUT"), cfg.Out, defaultEpilogOut} {
		if out == "" {
			out = v
		}
	}
	id := os.Getenv("SLURM_JOB_ID")
	if id == "" {
		id = os.Getenv("SLURM_JOBID")
	}
	// Bundles hold the job's output, and the epilog runs as root for every
	// user's jobs: the directory is created 0750, reached through no
	// directory a user could change, and the log is written only once it is.
	logDir := ""
	logf := func(format string, a ...any) {
		msg := fmt.Sprintf("kcrash: epilog job %s: %s", orDash(id), fmt.Sprintf(format, a...))
		fmt.Fprintln(s.Err, msg)
		if logDir == "" {
			return
		}
		if f, err := os.OpenFile(filepath.Join(logDir, "kcrash-epilog.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o640); err == nil {
			fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), msg)
			f.Close()
		}
	}
	if dir, err := secureOutDir(out); err == nil {
		out, logDir = dir, dir
	} else if dir, derr := secureOutDir(defaultEpilogOut); out != defaultEpilogOut && derr == nil {
		logDir = dir
		logf("%v; writing into %s instead", err, dir)
		out = dir
	} else {
		logf("%v; nothing collected", err)
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			logf("internal error: %v", r)
		}
		err = nil
	}()
	watchdog := time.AfterFunc(budget, func() {
		logf("over the %s budget: exiting 0 with collection unfinished", budget)
		os.Exit(0)
	})
	defer watchdog.Stop()
	if cerr != nil {
		logf("%v (carrying on without the config file)", cerr)
	}
	if id == "" {
		logf("no SLURM_JOB_ID: not run as a Slurm epilog; nothing collected")
		return nil
	}
	states, serr := checkStates(o.failStates)
	if serr != nil {
		logf("%v; using %s", serr, strings.Join(cluster.DefaultFailStates, ","))
		states = cluster.DefaultFailStates
	}
	ctx := context.Background()
	sl := &cluster.Slurm{Timeout: budget / 8}
	job, raw, jerr := sl.ShowJob(ctx, id)
	acct, aerr := sl.Accounting(ctx, id)
	oc := cluster.NewOutcome(id, job, raw, acct, os.Getenv("SLURM_JOB_EXIT_CODE2"))
	if jerr != nil {
		oc.JobErr = jerr.Error()
	}
	if aerr != nil {
		oc.AcctErr = aerr.Error()
	}
	if !oc.Failed(states) {
		if jerr != nil {
			logf("%v; no bundle (state %s)", jerr, orDash(oc.State))
		}
		return nil
	}
	if job != nil {
		var err error
		if oc.Script, err = sl.BatchScript(ctx, id); err != nil {
			oc.ScriptErr = err.Error()
		}
	}
	left := budget - time.Since(begin)
	ct := o.collectorTimeout
	if ct <= 0 || ct > budget/3 {
		ct = budget / 3
	}
	if ct > left/2 {
		ct = left / 2
	}
	var notes []string
	if jerr != nil {
		notes = append(notes, "scontrol: "+jerr.Error())
	}
	path, size, berr := writeSlurmBundle(s, slurmBundleSpec{
		outcome: oc, mode: "collect", out: out, budget: o.budget, collectorTimeout: ct, tailTimeout: ct / 2,
		only: splitList(o.collectors), skip: splitList(o.skipCollectors), onNode: true, notes: notes,
	})
	if berr != nil {
		logf("job ended %s: no bundle written: %v", oc.State, berr)
		return nil
	}
	logf("job ended %s, ExitCode %s: bundle %s (%s) in %s", oc.State, orDash(oc.Exit.Raw), path, human.Bytes(size), human.Duration(time.Since(begin)))
	return nil
}
