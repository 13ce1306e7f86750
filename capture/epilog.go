package capture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/iostreams"
)

// DefaultEpilogOut is where an epilog's bundles go without --out, KCRASH_OUT
// or a config file (an epilog runs as root in slurmd's directory).
const DefaultEpilogOut = "/var/log/kcrash"

// EpilogJob is `kcrash collect --slurm-epilog`'s settings.
type EpilogJob struct {
	// Out is the bundle directory asked for ("" for DefaultEpilogOut).
	Out string
	// ConfigErr is why the config file could not be read: logged, and the
	// epilog carries on without it.
	ConfigErr        error
	Timeout          time.Duration // the whole epilog's budget
	CollectorTimeout time.Duration
	Budget           int64
	FailStates       []string // as given; a bad one is logged and the defaults used
	Only, Skip       []string // collectors
	Version          string
}

// Epilog bundles the Slurm job that just ended on this node (SLURM_JOB_ID)
// when it failed. It never fails: whatever goes wrong is logged and kcrash
// exits 0, since a failing epilog drains the node. Its time budget is
// split: each scontrol and sacct call (at most four) gets an eighth, the
// collectors a third, the rest is for writing; a watchdog exits 0 at the
// budget whatever is still running.
func Epilog(io *iostreams.IOStreams, o EpilogJob) {
	begin := time.Now()
	budget := o.Timeout
	if budget <= 0 {
		budget = 30 * time.Second
	}
	if os.Getenv("PATH") == "" {
		// slurmd runs epilogs with no PATH; scontrol, sacct and the collectors' tools need one.
		os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	out := o.Out
	if out == "" {
		out = DefaultEpilogOut
	}
	id := os.Getenv("SLURM_JOB_ID")
	if id == "" {
		id = os.Getenv("SLURM_JOBID")
	}

	// Where to write. Bundles hold the job's output, and the epilog runs as
	// root for every user's jobs: the directory is created 0750, reached
	// through no directory a user could change, and the log is written only
	// once it is.
	logDir := ""
	logf := func(format string, a ...any) {
		msg := fmt.Sprintf("kcrash: epilog job %s: %s", human.OrDash(id), fmt.Sprintf(format, a...))
		fmt.Fprintln(io.Err, msg)
		if logDir == "" {
			return
		}
		if f, err := os.OpenFile(filepath.Join(logDir, "kcrash-epilog.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o640); err == nil {
			fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), msg)
			f.Close()
		}
	}
	if dir, err := SecureOutDir(out); err == nil {
		out, logDir = dir, dir
	} else if dir, derr := SecureOutDir(DefaultEpilogOut); out != DefaultEpilogOut && derr == nil {
		logDir = dir
		logf("%v; writing into %s instead", err, dir)
		out = dir
	} else {
		logf("%v; nothing collected", err)
		return
	}
	defer func() {
		if r := recover(); r != nil {
			logf("internal error: %v", r)
		}
	}()
	watchdog := time.AfterFunc(budget, func() {
		logf("over the %s budget: exiting 0 with collection unfinished", budget)
		os.Exit(0)
	})
	defer watchdog.Stop()
	if o.ConfigErr != nil {
		logf("%v (carrying on without the config file)", o.ConfigErr)
	}
	if id == "" {
		logf("no SLURM_JOB_ID: not run as a Slurm epilog; nothing collected")
		return
	}
	states, serr := FailStates(o.FailStates)
	if serr != nil {
		logf("%v; using %s", serr, strings.Join(cluster.DefaultFailStates, ","))
		states = cluster.DefaultFailStates
	}

	// How the job ended, from scontrol and sacct.
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
			logf("%v; no bundle (state %s)", jerr, human.OrDash(oc.State))
		}
		return
	}
	if job != nil {
		var err error
		if oc.Script, err = sl.BatchScript(ctx, id); err != nil {
			oc.ScriptErr = err.Error()
		}
	}

	// The bundle, in what is left of the budget.
	left := budget - time.Since(begin)
	ct := o.CollectorTimeout
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
	path, size, berr := SlurmBundle(io, SlurmSpec{
		Outcome: oc, Mode: "collect", Config: Config{Out: out, CollectorTimeout: ct, Budget: o.Budget, Version: o.Version},
		TailTimeout: ct / 2, Only: o.Only, Skip: o.Skip, OnNode: true, Notes: notes,
	})
	if berr != nil {
		logf("job ended %s: no bundle written: %v", oc.State, berr)
		return
	}
	logf("job ended %s, ExitCode %s: bundle %s (%s) in %s", oc.State, human.OrDash(oc.Exit.Raw), path, human.Bytes(size), human.Duration(time.Since(begin)))
}
