package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/spf13/cobra"
)

// attachOptions are `kcrash attach`'s flags. --pid is handled by
// runAttachPid (attach_pid.go), --slurm-job here.
type attachOptions struct {
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

func init() {
	register(func(s *streams) *cobra.Command {
		o := &attachOptions{budget: bundle.DefaultBudget}
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
notes. Its bundles of other users' jobs are 0640.`,
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
				if o.pid != 0 {
					return runAttachPid(s, o)
				}
				return runAttachSlurm(c.Context(), s, o)
			},
		}
		f := c.Flags()
		f.IntVar(&o.pid, "pid", 0, "follow the running process `PID`")
		f.StringVar(&o.slurmJob, "slurm-job", "", "follow the Slurm job `ID` until it ends")
		f.BoolVar(&o.noPtrace, "no-ptrace", false, "with --pid: do not trace the process; its exit status is then unknown")
		f.StringArrayVar(&o.logs, "log", nil, "a log `FILE` of the process or job whose tail goes into the bundle (repeatable)")
		f.StringVar(&o.out, "out", "", "bundle directory (default $KCRASH_OUT, else ./kcrash-bundles)")
		f.DurationVar(&o.collectorTimeout, "collector-timeout", 10*time.Second, "deadline for each collector")
		f.StringSliceVar(&o.failStates, "fail-states", cluster.DefaultFailStates, "with --slurm-job: the job states that get a bundle")
		f.DurationVar(&o.poll, "poll", 5*time.Second, "how often the process or job is looked at")
		f.StringVar(&o.collectors, "collectors", "", "only these collectors, comma-separated (see `kcrash collectors`)")
		f.StringVar(&o.skipCollectors, "skip-collectors", "", "collectors to leave out, comma-separated")
		f.Var(&o.budget, "max-bundle-size", "compressed size budget of a bundle")
		f.BoolVarP(&o.quiet, "quiet", "q", false, "no start line")
		configFlag(c, &o.config)
		return c
	})
}

// checkStates validates --fail-states against Slurm's terminal states.
func checkStates(states []string) ([]string, error) {
	var out []string
	for _, s := range states {
		n := cluster.NormState(s)
		if n == "" {
			continue
		}
		if !cluster.Terminal(n) {
			return nil, usagef("--fail-states: %q is not a state a Slurm job ends in (BOOT_FAIL, CANCELLED, COMPLETED, DEADLINE, FAILED, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, TIMEOUT)", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func runAttachSlurm(ctx context.Context, s *streams, o *attachOptions) error {
	states, err := checkStates(o.failStates)
	if err != nil {
		return err
	}
	if o.poll < 100*time.Millisecond {
		o.poll = 100 * time.Millisecond
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	sl := &cluster.Slurm{}
	id := o.slurmJob

	job, raw, lastState, err := followSlurmJob(ctx, s, sl, id, o.poll, states, o.quiet)
	if ctx.Err() != nil {
		fmt.Fprintf(s.Err, "kcrash: stopped following slurm job %s (last seen %s); no bundle\n", id, orDash(lastState))
		return &exitError{code: 130}
	}
	jobErr := ""
	if err != nil {
		if !errors.Is(err, cluster.ErrJobNotFound) {
			return err
		}
		// Never known, or forgotten (purged) between two looks: sacct has to say how it ended.
		jobErr, job, raw = err.Error(), nil, nil
	}
	acct, acctErr := slurmAccounting(ctx, sl, id, 5)
	if job == nil && acct.Job() == nil {
		if acctErr == nil {
			acctErr = fmt.Errorf("no row for the job")
		}
		if lastState == "" {
			return fmt.Errorf("slurm job %s: scontrol does not know it, and sacct does not answer (%v)", id, acctErr)
		}
		return fmt.Errorf("slurm job %s was %s, then scontrol forgot it, and sacct does not answer (%v): how it ended is unknown; no bundle", id, lastState, acctErr)
	}
	out := cluster.NewOutcome(id, job, raw, acct, "")
	out.JobErr = jobErr
	if job != nil && out.Failed(states) {
		if out.Script, err = sl.BatchScript(ctx, id); err != nil {
			out.ScriptErr = err.Error()
		}
	}
	if acctErr != nil {
		out.AcctErr = acctErr.Error()
	}
	start, end := out.StartEnd()
	took := ""
	if !start.IsZero() && !end.IsZero() && !end.Before(start) {
		took = " after " + human.Duration(end.Sub(start))
	}
	line := fmt.Sprintf("kcrash: slurm job %s ended %s", id, orDash(out.State))
	if out.ExitFrom != "" {
		line += ", ExitCode " + out.Exit.Raw
	}
	line += took
	if !out.Failed(states) {
		fmt.Fprintln(s.Err, line+"; no bundle")
		return nil
	}
	path, size, err := writeSlurmBundle(s, slurmBundleSpec{
		outcome: out, mode: "attach", out: o.out, budget: o.budget, collectorTimeout: o.collectorTimeout,
		only: splitList(o.collectors), skip: splitList(o.skipCollectors), logs: o.logs,
	})
	if err != nil {
		fmt.Fprintln(s.Err, line)
		return fmt.Errorf("no bundle written: %v", err)
	}
	fmt.Fprintf(s.Err, "%s; bundle %s (%s)\n", line, displayPath(path), human.Bytes(size))
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// followSlurmJob polls scontrol until the job is in a terminal state, and
// returns its last record. When scontrol forgets the job on the way (it was
// purged), the error wraps cluster.ErrJobNotFound and lastState is the last
// state seen. Transient scontrol failures (a restarting controller) are
// reported once and polled through.
func followSlurmJob(ctx context.Context, s *streams, sl *cluster.Slurm, id string, poll time.Duration, states []string, quiet bool) (job *cluster.SlurmJob, raw []byte, lastState string, err error) {
	lastErr := ""
	for {
		j, r, e := sl.ShowJob(ctx, id)
		switch {
		case e == nil:
			job, raw, lastErr = j, r, ""
			st := cluster.NormState(j.State)
			if st != lastState {
				where := ""
				if j.NodeList != "" && st != cluster.StatePending {
					where = " on " + j.NodeList
				}
				if lastState == "" {
					if !quiet {
						fmt.Fprintf(s.Err, "kcrash: following slurm job %s (%s, %s%s); a bundle when it ends %s\n", id, j.Name, st, where, strings.Join(states, ", "))
					}
				} else if !cluster.Terminal(st) {
					fmt.Fprintf(s.Err, "kcrash: slurm job %s is %s%s\n", id, st, where)
				}
				lastState = st
			}
			if cluster.Terminal(st) {
				return job, raw, lastState, nil
			}
		case errors.Is(e, cluster.ErrJobNotFound):
			return job, raw, lastState, e
		case ctx.Err() != nil:
			return job, raw, lastState, ctx.Err()
		default:
			if e.Error() != lastErr {
				fmt.Fprintf(s.Err, "kcrash: %v (still trying every %s)\n", e, poll)
				lastErr = e.Error()
			}
		}
		select {
		case <-ctx.Done():
			return job, raw, lastState, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// slurmAccounting asks sacct, waiting up to tries seconds for slurmdbd to
// record the job's final state (it lags the controller by a moment).
func slurmAccounting(ctx context.Context, sl *cluster.Slurm, id string, tries int) (*cluster.Accounting, error) {
	var acct *cluster.Accounting
	var err error
	for i := 0; i < tries; i++ {
		acct, err = sl.Accounting(ctx, id)
		if err != nil || acct.Completion {
			return acct, err
		}
		if r := acct.Job(); r != nil && cluster.Terminal(r.State) {
			return acct, nil
		}
		select {
		case <-ctx.Done():
			return acct, err
		case <-time.After(time.Second):
		}
	}
	return acct, err
}

// slurmBundleSpec says how to bundle an ended Slurm job.
type slurmBundleSpec struct {
	outcome          *cluster.Outcome
	mode             string // "attach", "collect"
	out              string
	budget           byteSize
	collectorTimeout time.Duration
	only, skip       []string
	logs             []string
	// onNode forces the node collectors on (an epilog runs on the node); when
	// false they run only if this host is one of the job's nodes.
	onNode bool
	// tailTimeout bounds reading the StdOut/StdErr tails (a hung NFS mount).
	tailTimeout time.Duration
	notes       []string
}

// slurmTail is how much of each StdOut/StdErr/--log file goes into the bundle.
const slurmTail = 4 << 20

// writeSlurmBundle writes the bundle of an ended job: the "slurm" collector
// (job record, accounting, output tails), the node collectors when on the
// job's node, and the scheduler's findings for triage.
func writeSlurmBundle(s *streams, sp slurmBundleSpec) (string, int64, error) {
	oc := sp.outcome
	env := collectors.NewEnv()
	host := env.Host(context.Background())
	var notes []string
	notes = append(notes, sp.notes...)
	onNode := sp.onNode || oc.Job != nil && oc.Job.OnNode(host.Hostname)
	var chosen []collectors.Named
	if onNode {
		var err error
		chosen, err = collectors.Select(sp.only, sp.skip)
		if err != nil {
			return "", 0, err
		}
	} else {
		// Not on the node: of the host's collectors only "output" (the job's output tails) applies.
		chosen, _ = collectors.Select([]string{"output"}, sp.skip)
		notes = append(notes, fmt.Sprintf("kcrash ran on %s, not on the job's node (%s): node collectors (kernel messages, GPU, memory) were not run; run `kcrash collect --slurm-epilog` on the nodes for them", host.Hostname, orDash(oc.Node())))
	}
	if sp.tailTimeout <= 0 {
		sp.tailTimeout = sp.collectorTimeout
	}
	sc := collectors.NewSlurm(oc, sp.logs, slurmTail, sp.tailTimeout)
	chosen = append(chosen, collectors.Named{Name: "slurm", Collector: sc})

	code, sig, reason := oc.BundleExit()
	start, end := oc.StartEnd()
	now := time.Now()
	if end.IsZero() || end.After(now) {
		end = now
	}
	if start.IsZero() || start.After(end) {
		start = end
	}
	env.Start, env.Since = start, start.Add(-kmsgMargin)
	env.Cwd, _ = os.Getwd()
	if oc.Job != nil && oc.Job.WorkDir != "" {
		env.Cwd = oc.Job.WorkDir
	}
	output := sc.Output()
	env.Output = outputFrom(func() []byte { return output })
	env.AddFinding(oc.Findings()...)

	args := oc.Command()
	p := &pipeline{s: s, o: &runOptions{out: sp.out, collectorTimeout: sp.collectorTimeout, budget: sp.budget},
		cfg: &userConfig{}, env: env, chosen: chosen, args: args, cwd: env.Cwd,
		job:      &bundle.Job{Scheduler: "slurm", JobID: oc.JobID, Node: oc.Node()},
		resolved: &configs.Resolved{Set: map[string]string{}, Kept: map[string]string{}}}
	if sp.mode == "collect" {
		if n := os.Getenv("SLURMD_NODENAME"); n != "" {
			p.job.Node = n
		}
	}
	for _, n := range append(notes, sc.Notes()...) {
		p.note("%s", n)
	}
	ex := exitInfo{code: code, end: end, reason: reason}
	if sig > 0 {
		ex.signal = signalName(syscall.Signal(sig))
	}
	// Root writes a user's job: the bundle is never world-readable, not even
	// for the moment between its writing and its chmod.
	p.private = os.Geteuid() == 0
	return p.bundle(ex, false, sp.mode)
}
