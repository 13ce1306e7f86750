package main

import (
	"context"
	"errors"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/capture"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/collectors"
	"github.com/spf13/cobra"
)

// attachOptions are `kcrash attach`'s flags: --pid goes to
// capture.AttachPid, --slurm-job to capture.AttachSlurm.
type attachOptions struct {
	IO               *streams
	pid              int
	slurmJob         string
	logs             []string
	out              string
	collectorTimeout time.Duration
	failStates       []string
	poll             time.Duration
	budget           byteSize
	config           string
	collectors       string
	skipCollectors   string
	noPtrace         bool
	quiet            bool
}

func init() { register(func(s *streams) *cobra.Command { return newAttachCmd(s, nil) }) }

func newAttachCmd(s *streams, runF func(*attachOptions) error) *cobra.Command {
	o := &attachOptions{IO: s, budget: bundle.DefaultBudget}
	c := &cobra.Command{
		Use:   "attach (--pid PID | --slurm-job ID) [flags]",
		Short: "Watch a process or a Slurm job that is already running; bundle the evidence when it fails",
		Long: `Watch something kcrash did not start, and write a bundle when it fails.

--pid PID follows a running process (and its --log files).

--slurm-job ID follows a Slurm job with ` + "`scontrol show job -o`" + ` (and ` + "`sacct`" + ` once it
ended, when accounting answers) until it ends. When it ends in one of
--fail-states, kcrash writes a bundle with the job record (raw/slurm-job.txt,
raw/sacct.txt, raw/slurm.json), its exit code and signal, MaxRSS, the tails of
its StdOut/StdErr files (raw/slurm-stdout.log, raw/slurm-stderr.log, and
output.log for triage), and, when kcrash runs on the job's node, the node's
collectors (kernel messages since the job started, GPU and host memory).
The verdict takes the scheduler's word: OUT_OF_MEMORY is host_oom, TIMEOUT is
hang, NODE_FAIL and CANCELLED are killed.

Run as root, kcrash reads the files a job or process chose (StdOut, StdErr,
--log files of a Slurm job; the kernel-API logs named in a process's
environment) with that job's user's rights, never a symlink at the end of
the path, and only regular files; what it refuses is said in the bundle's
notes. The libraries a process maps and the Python packages on its path are
read with that process's user's rights too. Its bundles of other users' jobs are 0640.`,
		Example: `  kcrash attach --slurm-job 4242 --out /shared/kcrash
  kcrash attach --slurm-job 4242 --fail-states FAILED,OUT_OF_MEMORY
  kcrash attach --pid 12345 --log /var/log/sglang/server.log`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if (o.pid != 0) == (o.slurmJob != "") {
				return usagef("attach: give one of --pid PID or --slurm-job ID")
			}
			cfg, err := loadConfig(o.config)
			if err != nil {
				return err
			}
			if err := applyDefaults(c.Flags(), cfg); err != nil {
				return err
			}
			if o.out == "" {
				o.out = "kcrash-bundles"
			}
			if runF != nil {
				return runF(o)
			}
			if o.pid != 0 {
				return runAttachPid(o)
			}
			return runAttachSlurm(c.Context(), o)
		},
	}
	f := c.Flags()
	f.IntVar(&o.pid, "pid", 0, "follow the running process `PID`")
	f.StringVar(&o.slurmJob, "slurm-job", "", "follow the Slurm job `ID` until it ends")
	f.BoolVar(&o.noPtrace, "no-ptrace", false, "with --pid: do not trace the process; its exit status is then unknown")
	f.StringArrayVar(&o.logs, "log", nil, "a log `FILE` of the process or job whose tail goes into the bundle (repeatable)")
	f.StringVar(&o.out, "out", "", "bundle `DIR` (default $KCRASH_OUT, else ./kcrash-bundles)")
	f.DurationVar(&o.collectorTimeout, "collector-timeout", 10*time.Second, "deadline for each collector")
	f.StringSliceVar(&o.failStates, "fail-states", cluster.DefaultFailStates, "with --slurm-job: the job states that get a bundle")
	f.DurationVar(&o.poll, "poll", 5*time.Second, "how often the process or job is looked at")
	f.StringVar(&o.collectors, "collectors", "", "only these collectors: `NAMES`, comma-separated (see kcrash collectors)")
	f.StringVar(&o.skipCollectors, "skip-collectors", "", "collectors to leave out: `NAMES`, comma-separated")
	f.Var(&o.budget, "max-bundle-size", "compressed size budget of a bundle")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no start line")
	configFlag(c, &o.config)
	return c
}

// checkStates validates --fail-states against Slurm's terminal states.
func checkStates(states []string) ([]string, error) {
	out, err := capture.FailStates(states)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return out, nil
}

func runAttachSlurm(ctx context.Context, o *attachOptions) error {
	states, err := checkStates(o.failStates)
	if err != nil {
		return err
	}
	recoverStages(o.IO, captureConfig(nil, o.out, o.collectorTimeout, o.budget), true)
	return exitOnStop(capture.AttachSlurm(ctx, o.IO, capture.SlurmWatch{
		JobID: o.slurmJob, FailStates: states, Poll: o.poll, Logs: o.logs, Quiet: o.quiet,
		Only: splitList(o.collectors), Skip: splitList(o.skipCollectors),
		Config: captureConfig(nil, o.out, o.collectorTimeout, o.budget),
	}))
}

// runAttachPid is `kcrash attach --pid`.
func runAttachPid(o *attachOptions) error {
	chosen, err := collectors.Select(splitList(o.collectors), splitList(o.skipCollectors))
	if err != nil {
		return usagef("%v", err)
	}
	recoverStages(o.IO, captureConfig(nil, o.out, o.collectorTimeout, o.budget), true)
	noPtrace := ""
	if o.noPtrace {
		noPtrace = "--no-ptrace was given"
	}
	return exitOnStop(capture.AttachPid(o.IO, capture.ProcessWatch{
		Pid: o.pid, Logs: o.logs, NoPtrace: noPtrace, Poll: o.poll, Quiet: o.quiet, Chosen: chosen,
		Config: captureConfig(nil, o.out, o.collectorTimeout, o.budget),
	}))
}

// exitOnStop is 130 for a watch given up on a signal (what happened is
// already said).
func exitOnStop(err error) error {
	if errors.Is(err, capture.ErrStopped) {
		return &exitError{code: 130}
	}
	return err
}
