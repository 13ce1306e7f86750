package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/iostreams"
)

// ErrStopped says a watch was given up (^C, SIGTERM) before its end: what
// was said about it is printed, and there is no bundle. kcrash exits 130.
var ErrStopped = errors.New("stopped before the end; no bundle")

// FailStates validates --fail-states against Slurm's terminal states.
func FailStates(states []string) ([]string, error) {
	var out []string
	for _, s := range states {
		n := cluster.NormState(s)
		if n == "" {
			continue
		}
		if !cluster.Terminal(n) {
			return nil, fmt.Errorf("--fail-states: %q is not a state a Slurm job ends in (BOOT_FAIL, CANCELLED, COMPLETED, DEADLINE, FAILED, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, TIMEOUT)", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// SlurmWatch is `kcrash attach --slurm-job`: which job, and what gets a bundle.
type SlurmWatch struct {
	JobID      string
	FailStates []string // validated (FailStates)
	Poll       time.Duration
	Logs       []string // more files whose tails go into the bundle
	Only, Skip []string // collectors
	Quiet      bool     // no start line
	Config     Config
}

// AttachSlurm follows a Slurm job until it ends, and bundles it when it
// ended in one of w.FailStates. SIGINT, SIGTERM and SIGHUP stop the
// following (ErrStopped).
func AttachSlurm(ctx context.Context, io *iostreams.IOStreams, w SlurmWatch) error {
	states := w.FailStates
	if w.Poll < 100*time.Millisecond {
		w.Poll = 100 * time.Millisecond
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	sl := &cluster.Slurm{}
	id := w.JobID

	// Follow the job to its end.
	job, raw, lastState, err := followSlurmJob(ctx, io, sl, id, w.Poll, states, w.Quiet)
	if ctx.Err() != nil {
		fmt.Fprintf(io.Err, "kcrash: stopped following slurm job %s (last seen %s); no bundle\n", id, human.OrDash(lastState))
		return ErrStopped
	}
	jobErr := ""
	if err != nil {
		if !errors.Is(err, cluster.ErrJobNotFound) {
			return err
		}
		// Never known, or forgotten (purged) between two looks: sacct has to say how it ended.
		jobErr, job, raw = err.Error(), nil, nil
	}

	// How it ended: the controller's last record, and accounting.
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
	line := fmt.Sprintf("kcrash: slurm job %s ended %s", id, human.OrDash(out.State))
	if out.ExitFrom != "" {
		line += ", ExitCode " + out.Exit.Raw
	}
	line += took
	if !out.Failed(states) {
		fmt.Fprintln(io.Err, line+"; no bundle")
		return nil
	}

	// The bundle.
	path, size, err := SlurmBundle(io, SlurmSpec{
		Outcome: out, Mode: "attach", Config: w.Config, Only: w.Only, Skip: w.Skip, Logs: w.Logs,
	})
	if err != nil {
		fmt.Fprintln(io.Err, line)
		return fmt.Errorf("no bundle written: %v", err)
	}
	fmt.Fprintf(io.Err, "%s; bundle %s (%s)\n", line, DisplayPath(path), human.Bytes(size))
	return nil
}

// followSlurmJob polls scontrol until the job is in a terminal state, and
// returns its last record. When scontrol forgets the job on the way (it was
// purged), the error wraps cluster.ErrJobNotFound and lastState is the last
// state seen. Transient scontrol failures (a restarting controller) are
// reported once and polled through.
func followSlurmJob(ctx context.Context, io *iostreams.IOStreams, sl *cluster.Slurm, id string, poll time.Duration, states []string, quiet bool) (job *cluster.SlurmJob, raw []byte, lastState string, err error) {
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
						fmt.Fprintf(io.Err, "kcrash: following slurm job %s (%s, %s%s); a bundle when it ends %s\n", id, j.Name, st, where, strings.Join(states, ", "))
					}
				} else if !cluster.Terminal(st) {
					fmt.Fprintf(io.Err, "kcrash: slurm job %s is %s%s\n", id, st, where)
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
				fmt.Fprintf(io.Err, "kcrash: %v (still trying every %s)\n", e, poll)
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

// SlurmSpec says how to bundle an ended Slurm job.
type SlurmSpec struct {
	Outcome    *cluster.Outcome
	Mode       string // "attach", "collect"
	Config     Config
	Only, Skip []string
	Logs       []string
	// OnNode forces the node collectors on (an epilog runs on the node); when
	// false they run only if this host is one of the job's nodes.
	OnNode bool
	// TailTimeout bounds reading the StdOut/StdErr tails (a hung NFS mount).
	TailTimeout time.Duration
	Notes       []string
}

// slurmTail is how much of each StdOut/StdErr/--log file goes into the bundle.
const slurmTail = 4 << 20

// SlurmBundle writes the bundle of an ended job: the "slurm" collector
// (job record, accounting, output tails), the node collectors when on the
// job's node, and the scheduler's findings for triage.
func SlurmBundle(io *iostreams.IOStreams, sp SlurmSpec) (string, int64, error) {
	oc := sp.Outcome
	env := collectors.NewEnv()
	host := env.Host(context.Background())
	var notes []string
	notes = append(notes, sp.Notes...)
	onNode := sp.OnNode || oc.Job != nil && oc.Job.OnNode(host.Hostname)
	var chosen []collectors.Named
	if onNode {
		var err error
		chosen, err = collectors.Select(sp.Only, sp.Skip)
		if err != nil {
			return "", 0, err
		}
	} else {
		// Not on the node: of the host's collectors only "output" (the job's output tails) applies.
		chosen, _ = collectors.Select([]string{"output"}, sp.Skip)
		notes = append(notes, fmt.Sprintf("kcrash ran on %s, not on the job's node (%s): node collectors (kernel messages, GPU, memory) were not run; run `kcrash collect --slurm-epilog` on the nodes for them", host.Hostname, human.OrDash(oc.Node())))
	}
	if sp.TailTimeout <= 0 {
		sp.TailTimeout = sp.Config.CollectorTimeout
	}
	sc := collectors.NewSlurm(oc, sp.Logs, slurmTail, sp.TailTimeout)
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
	env.Start, env.Since = start, start.Add(-KmsgMargin)
	env.Cwd, _ = os.Getwd()
	if oc.Job != nil && oc.Job.WorkDir != "" {
		env.Cwd = oc.Job.WorkDir
	}
	output := sc.Output()
	env.Output = outputFrom(func() []byte { return output })
	env.AddFinding(oc.Findings()...)

	cfg := sp.Config
	// Root writes a user's job: the bundle is never world-readable, not even
	// for the moment between its writing and its chmod.
	cfg.Private = os.Geteuid() == 0
	p := &Session{IO: io, Config: cfg, Env: env, Chosen: chosen, Args: oc.Command(), Cwd: env.Cwd,
		Job: &bundle.Job{Scheduler: "slurm", JobID: oc.JobID, Node: oc.Node()}}
	if sp.Mode == "collect" {
		if n := os.Getenv("SLURMD_NODENAME"); n != "" {
			p.Job.Node = n
		}
	}
	for _, n := range append(notes, sc.Notes()...) {
		p.Note("%s", n)
	}
	ex := Exit{Code: code, End: end, Reason: reason}
	if sig > 0 {
		ex.Signal = SignalName(syscall.Signal(sig))
	}
	return p.Bundle(ex, false, sp.Mode)
}
