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
//
//  1. where to write: the bundle directory, which is also the log's;
//  2. which job: SLURM_JOB_ID, and the states that count as failed;
//  3. how it ended, from scontrol and sacct; a job that did not fail stops here;
//  4. the bundle, in what is left of the budget.
func Epilog(io *iostreams.IOStreams, o EpilogJob) {
	e := newEpilog(io, o)

	// 1. where to write
	if !e.openOut() {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			e.logf("internal error: %v", r)
		}
	}()
	watchdog := time.AfterFunc(e.budget, func() {
		e.logf("over the %s budget: exiting 0 with collection unfinished", e.budget)
		os.Exit(0)
	})
	defer watchdog.Stop()
	if o.ConfigErr != nil {
		e.logf("%v (carrying on without the config file)", o.ConfigErr)
	}

	// 2. which job
	if e.id == "" {
		e.logf("no SLURM_JOB_ID: not run as a Slurm epilog; nothing collected")
		return
	}
	states, serr := FailStates(o.FailStates)
	if serr != nil {
		e.logf("%v; using %s", serr, strings.Join(cluster.DefaultFailStates, ","))
		states = cluster.DefaultFailStates
	}

	// 3. how it ended
	oc, failed, jerr := e.outcome(states)
	if !failed {
		return
	}

	// 4. the bundle
	e.bundle(oc, jerr)
}

// epilog is one run of Epilog: its budget, its job, where it writes and logs.
type epilog struct {
	io     *iostreams.IOStreams
	o      EpilogJob
	begin  time.Time
	budget time.Duration
	id     string // the job; "" outside an epilog
	out    string // the bundle directory
	logDir string // where kcrash-epilog.log goes; "" until out is known safe
}

func newEpilog(io *iostreams.IOStreams, o EpilogJob) *epilog {
	e := &epilog{io: io, o: o, begin: time.Now(), budget: o.Timeout, out: o.Out}
	if e.budget <= 0 {
		e.budget = 30 * time.Second
	}
	if os.Getenv("PATH") == "" {
		// slurmd runs epilogs with no PATH; scontrol, sacct and the collectors' tools need one.
		os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if e.out == "" {
		e.out = DefaultEpilogOut
	}
	e.id = os.Getenv("SLURM_JOB_ID")
	if e.id == "" {
		e.id = os.Getenv("SLURM_JOBID")
	}
	return e
}

// logf says one line on stderr and, once the directory is known safe, in
// its kcrash-epilog.log.
func (e *epilog) logf(format string, a ...any) {
	msg := fmt.Sprintf("kcrash: epilog job %s: %s", human.OrDash(e.id), fmt.Sprintf(format, a...))
	fmt.Fprintln(e.io.Err, msg)
	if e.logDir == "" {
		return
	}
	if f, err := os.OpenFile(filepath.Join(e.logDir, "kcrash-epilog.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o640); err == nil {
		fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), msg)
		f.Close()
	}
}

// openOut settles where to write. Bundles hold the job's output, and the
// epilog runs as root for every user's jobs: the directory is created 0750,
// reached through no directory a user could change, and the log is written
// only once it is. An unsafe --out falls back to DefaultEpilogOut; false
// when neither will do (logged).
func (e *epilog) openOut() bool {
	if dir, err := SecureOutDir(e.out); err == nil {
		e.out, e.logDir = dir, dir
	} else if dir, derr := SecureOutDir(DefaultEpilogOut); e.out != DefaultEpilogOut && derr == nil {
		e.logDir = dir
		e.logf("%v; writing into %s instead", err, dir)
		e.out = dir
	} else {
		e.logf("%v; nothing collected", err)
		return false
	}
	return true
}

// outcome asks scontrol and sacct how the job ended, each call within an
// eighth of the budget; failed says whether it ended in one of states (a
// failed job's batch script is fetched too). jerr is scontrol's error.
func (e *epilog) outcome(states []string) (oc *cluster.Outcome, failed bool, jerr error) {
	ctx := context.Background()
	sl := &cluster.Slurm{Timeout: e.budget / 8}
	job, raw, jerr := sl.ShowJob(ctx, e.id)
	acct, aerr := sl.Accounting(ctx, e.id)
	oc = cluster.NewOutcome(e.id, job, raw, acct, os.Getenv("SLURM_JOB_EXIT_CODE2"))
	if jerr != nil {
		oc.JobErr = jerr.Error()
	}
	if aerr != nil {
		oc.AcctErr = aerr.Error()
	}
	if !oc.Failed(states) {
		if jerr != nil {
			e.logf("%v; no bundle (state %s)", jerr, human.OrDash(oc.State))
		}
		return oc, false, jerr
	}
	if job != nil {
		var err error
		if oc.Script, err = sl.BatchScript(ctx, e.id); err != nil {
			oc.ScriptErr = err.Error()
		}
	}
	return oc, true, jerr
}

// bundle writes the failed job's bundle in what is left of the budget: the
// collectors get at most a third of it and half of what is left.
func (e *epilog) bundle(oc *cluster.Outcome, jerr error) {
	left := e.budget - time.Since(e.begin)
	ct := e.o.CollectorTimeout
	if ct <= 0 || ct > e.budget/3 {
		ct = e.budget / 3
	}
	if ct > left/2 {
		ct = left / 2
	}
	var notes []string
	if jerr != nil {
		notes = append(notes, "scontrol: "+jerr.Error())
	}
	own := e.ownBundles()
	notes = append(notes, ownNotes(own)...)
	path, size, berr := SlurmBundle(e.io, SlurmSpec{
		Outcome: oc, Mode: "collect", Config: Config{Out: e.out, CollectorTimeout: ct, Budget: e.o.Budget, Version: e.o.Version},
		TailTimeout: ct / 2, Only: e.o.Only, Skip: e.o.Skip, OnNode: true, Notes: notes,
	})
	if berr != nil {
		e.logf("job ended %s: no bundle written: %v", oc.State, berr)
		return
	}
	// Shared before the last line, which says how long the epilog took.
	e.share(path, oc, own)
	e.logf("job ended %s, ExitCode %s: bundle %s (%s) in %s", oc.State, human.OrDash(oc.Exit.Raw), path, human.Bytes(size), human.Duration(time.Since(e.begin)))
}
