package cluster

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/evidence"
)

// Outcome is what kcrash concluded about an ended Slurm job, from scontrol's
// record, sacct's rows and (in an epilog) the epilog's environment.
type Outcome struct {
	JobID  string
	Job    *SlurmJob // nil when scontrol no longer knew the job
	JobRaw []byte    // scontrol's output as printed
	JobErr string    // why there is no Job
	Acct   *Accounting
	// AcctErr says why there is no Acct (no accounting storage, sacct absent).
	AcctErr string
	// Script is the batch script (nil when scontrol would not give it), ScriptErr why not.
	Script    []byte
	ScriptErr string

	State     string // final state: FAILED, OUT_OF_MEMORY... ("" when unknown)
	StateFrom string // where State came from
	Exit      ExitStatus
	ExitFrom  string // "scontrol", "sacct", "sacct -c", "epilog environment"
	// ExitNoImplied says that an exit code above 128 must not be read as
	// 128+signal: slurmdbd's sacct already subtracted 128 (139 shows as 11:0).
	ExitNoImplied bool
}

// NewOutcome works out the job's final state and exit status. envExit is the
// epilog's SLURM_JOB_EXIT_CODE2 ("3:0"), "" elsewhere.
func NewOutcome(id string, job *SlurmJob, raw []byte, acct *Accounting, envExit string) *Outcome {
	o := &Outcome{JobID: id, Job: job, JobRaw: raw, Acct: acct}
	ar := acct.Job()
	if job != nil {
		st, inferred := job.BaseState()
		o.State, o.StateFrom = st, "scontrol JobState"
		if inferred {
			o.StateFrom = fmt.Sprintf("scontrol (JobState=%s while the epilog runs; inferred from Reason=%s ExitCode=%s)", job.State, job.Reason, job.Exit.Raw)
			// slurmdbd learns the final state before the epilogs finish (a cancelled job
			// shows CANCELLED there while scontrol still says COMPLETING).
			if ar != nil && Terminal(ar.State) && NormState(ar.State) != StateCompleted {
				o.State, o.StateFrom = NormState(ar.State), "sacct State (scontrol said COMPLETING)"
			}
		}
		if job.Exit.Raw != "" {
			o.Exit, o.ExitFrom = job.Exit, "scontrol"
		}
	} else if ar != nil {
		o.State, o.StateFrom = NormState(ar.State), "sacct State"
		o.Exit, o.ExitFrom = ar.Exit, "sacct"
		if acct.Completion {
			o.StateFrom, o.ExitFrom = "sacct -c State", "sacct -c"
		} else {
			o.ExitNoImplied = true
		}
	}
	if o.ExitFrom == "" && envExit != "" {
		if e, ok := ParseExitStatus(envExit); ok {
			o.Exit, o.ExitFrom = e, "epilog environment (SLURM_JOB_EXIT_CODE2)"
			if o.State == "" {
				o.State, o.StateFrom = StateCompleted, "epilog environment"
				if !e.Zero() {
					o.State = StateFailed
				}
			}
		}
	}
	return o
}

// Failed says whether the final state is one of states (names as sacct prints
// them, any case; DefaultFailStates when empty).
func (o *Outcome) Failed(states []string) bool {
	if len(states) == 0 {
		states = DefaultFailStates
	}
	for _, s := range states {
		if NormState(s) == o.State && o.State != "" {
			return true
		}
	}
	return false
}

// BundleExit is the exit the bundle records: the code (nil when unknown) and
// the signal number (0 when none), with a sentence saying how they were read.
// An exit code of 128+N from scontrol (a program of the batch script died of
// signal N) gives both the code and N. OUT_OF_MEMORY's 0:125 is Slurm's
// marker, not a signal: the cgroup OOM killer's SIGKILL is reported instead.
func (o *Outcome) BundleExit() (code *int, sig int, reason string) {
	e := o.Exit
	what := fmt.Sprintf("slurm job %s ended %s", o.JobID, orUnknown(o.State))
	if o.ExitFrom == "" {
		return nil, 0, what + "; its exit code is unknown"
	}
	what += fmt.Sprintf(" with ExitCode %s (%s)", e.Raw, o.ExitFrom)
	if o.State == StateOutOfMemory {
		return nil, 9, what + ": the cgroup OOM killer SIGKILLed a process of the job"
	}
	if s, implied := e.DeathSignal(); s > 0 && !(implied && o.ExitNoImplied) {
		if implied {
			c := e.Code
			return &c, s, what + fmt.Sprintf(": the batch script exited %d = 128+%d, a program it ran died of %s", e.Code, s, sigName(s))
		}
		return nil, s, what
	}
	if e.Signal > 64 || e.Zero() && o.State != StateCompleted {
		// 0:0 on a cancelled or timed-out job (sacct prints that) says nothing about how it ended.
		return nil, 0, what
	}
	c := e.Code
	if o.ExitNoImplied && c > 0 {
		what += "; slurmdbd prints an exit of 128+N as N, so this may be a death by signal"
	}
	return &c, 0, what
}

func sigName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", n)
}

func orUnknown(s string) string {
	if s == "" {
		return "in an unknown state"
	}
	return s
}

// Command is the job's command line for the manifest: its script and
// arguments, or for an `sbatch --wrap` job `sh -c WRAPPED`, or "slurm-job:ID".
func (o *Outcome) Command() []string {
	if o.Job != nil && o.Job.Command != "" {
		return strings.Fields(o.Job.Command)
	}
	if w := WrappedCommand(o.Script); w != "" {
		return []string{"sh", "-c", w}
	}
	return []string{"slurm-job:" + o.JobID}
}

// Node is the job's batch host, else its node list.
func (o *Outcome) Node() string {
	if o.Job == nil {
		if ar := o.Acct.Job(); ar != nil {
			return ar.Fields["NodeList"]
		}
		return ""
	}
	if o.Job.BatchHost != "" {
		return o.Job.BatchHost
	}
	return o.Job.NodeList
}

// StartEnd is when the job started and ended (zero when unknown).
func (o *Outcome) StartEnd() (time.Time, time.Time) {
	if o.Job != nil && !o.Job.StartTime.IsZero() {
		return o.Job.StartTime, o.Job.EndTime
	}
	if ar := o.Acct.Job(); ar != nil {
		return SlurmTime(ar.Fields["Start"]), SlurmTime(ar.Fields["End"])
	}
	return time.Time{}, time.Time{}
}

// Findings is the scheduler's word as evidence (SPEC §5 source "scheduler"):
// OUT_OF_MEMORY (of the job or of one of its steps) is host_oom, TIMEOUT is
// hang, and a job the scheduler ended for reasons of its own (CANCELLED,
// NODE_FAIL, PREEMPTED, DEADLINE, BOOT_FAIL) was killed from outside. FAILED
// adds nothing: the exit status is the evidence.
func (o *Outcome) Findings() []evidence.Finding {
	var out []evidence.Finding
	d := o.details()
	var at *time.Time
	if _, end := o.StartEnd(); !end.IsZero() {
		at = &end
	}
	text := fmt.Sprintf("slurm job %s state %s", o.JobID, o.State)
	if o.Job != nil {
		text += fmt.Sprintf(" (Reason=%s ExitCode=%s", o.Job.Reason, o.Job.Exit.Raw)
		if o.State == StateTimeout {
			text += fmt.Sprintf(" RunTime=%s TimeLimit=%s", o.Job.RunTime, o.Job.TimeLimit)
		}
		if o.State == StateNodeFail {
			text += " NodeList=" + o.Job.NodeList
		}
		text += ")"
	}
	add := func(k evidence.Kind, t string, extra map[string]any) {
		dd := map[string]any{}
		for k, v := range d {
			dd[k] = v
		}
		for k, v := range extra {
			dd[k] = v
		}
		out = append(out, evidence.Finding{Kind: k, Source: evidence.SourceScheduler, Text: t, Time: at, Details: dd})
	}
	switch o.State {
	case StateOutOfMemory:
		t := text + ": the job went over its memory limit"
		if o.Job != nil && o.Job.MinMemory != "" {
			t += " (" + o.Job.MinMemory + ")"
		}
		add(evidence.HostOOM, t, nil)
	case StateTimeout:
		add(evidence.Hang, text+": the job ran into its time limit", nil)
	case StateNodeFail:
		add(evidence.Killed, text+": a node of the job failed (NODE_FAIL) and Slurm ended the job", map[string]any{"node_fail": true})
	case StateCancelled:
		t := text + ": the job was cancelled"
		if ar := o.Acct.Job(); ar != nil && strings.Contains(ar.State, " by ") {
			t += " (sacct: " + ar.State + ")"
		}
		add(evidence.Killed, t, nil)
	case StatePreempted, StateDeadline, StateBootFail:
		add(evidence.Killed, text, nil)
	}
	if o.State != StateOutOfMemory {
		for _, step := range o.Acct.OOMSteps() {
			add(evidence.HostOOM, fmt.Sprintf("slurm job %s step %s state OUT_OF_MEMORY", o.JobID, step), map[string]any{"step": step})
		}
		if o.Job != nil && o.Job.DerivedExit != nil && o.Job.DerivedExit.Signal == SigOOM && len(o.Acct.OOMSteps()) == 0 {
			add(evidence.HostOOM, fmt.Sprintf("slurm job %s DerivedExitCode %s: a step ended out of memory", o.JobID, o.Job.DerivedExit.Raw), nil)
		}
	}
	return out
}

// details are the facts every scheduler finding carries.
func (o *Outcome) details() map[string]any {
	d := map[string]any{"scheduler": "slurm", "job_id": o.JobID, "state": o.State}
	if o.ExitFrom != "" {
		d["exit_code"] = o.Exit.Raw
	}
	if o.Job != nil {
		d["reason"] = o.Job.Reason
		if o.Job.NodeList != "" {
			d["node_list"] = o.Job.NodeList
		}
		if o.Job.MinMemory != "" {
			d["min_memory"] = o.Job.MinMemory
		}
	}
	if rss, step, ok := o.Acct.MaxRSS(); ok {
		d["max_rss_bytes"] = rss
		d["max_rss_step"] = step
	}
	return d
}

// Summary is raw/slurm.json: the parsed record kcrash acted on.
func (o *Outcome) Summary() map[string]any {
	m := map[string]any{"job_id": o.JobID, "state": o.State, "state_from": o.StateFrom}
	if o.ExitFrom != "" {
		m["exit_code"] = o.Exit
		m["exit_code_from"] = o.ExitFrom
		if s, implied := o.Exit.DeathSignal(); s > 0 && !(implied && o.ExitNoImplied) {
			m["death_signal"] = s
			m["death_signal_implied"] = implied
		}
	}
	if o.Job != nil {
		j := o.Job
		m["scontrol"] = map[string]any{"job_state": j.State, "reason": j.Reason, "exit_code": j.Exit.Raw,
			"name": j.Name, "user": j.UserID, "node_list": j.NodeList, "batch_host": j.BatchHost,
			"run_time": j.RunTime, "time_limit": j.TimeLimit, "min_memory": j.MinMemory,
			"std_out": j.StdOut, "std_err": j.StdErr, "work_dir": j.WorkDir, "command": j.Command,
			"start_time": j.Fields["StartTime"], "end_time": j.Fields["EndTime"]}
	} else {
		m["scontrol_error"] = o.JobErr
	}
	if o.Acct != nil {
		m["sacct"] = map[string]any{"command": strings.Join(o.Acct.Command, " "), "completion_log": o.Acct.Completion, "rows": o.Acct.Rows}
		if rss, step, ok := o.Acct.MaxRSS(); ok {
			m["max_rss_bytes"] = rss
			m["max_rss_step"] = step
		}
	} else {
		m["sacct_error"] = o.AcctErr
	}
	return m
}
