package triage

import (
	"fmt"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/kernelapi"
)

// The suspect kernel-API call: which process's log it comes from, and the
// finding that cites it.

// suspect returns the kernel-API call a GPU fault is pinned on: the call
// that never returned, else (level 1, or asynchronous errors) the last one.
// The bool says whether it is the unfinished one.
func (x *facts) suspect() (*kernelapi.Call, bool) {
	ka := x.in.KernelAPI
	if ka == nil || x.verdict == evidence.CleanExit {
		return nil, false // a run that succeeded has nothing to pin on a call
	}
	if ka.UnfinishedCall != nil {
		return ka.UnfinishedCall, true
	}
	return ka.LastCall, false
}

// crashedPid is the process the verdict is about, when the evidence names
// one that has a kernel-API log of its own (per-pid logs): the root cause's
// pid (a fault line, a core dump), else a process the tree or the exit saw
// die. 0 when none does.
func (x *facts) crashedPid(ev []*cf) int {
	ka := x.in.KernelAPI
	if ka == nil || len(ka.LastCalls) < 2 {
		return 0
	}
	for _, c := range ev {
		if !c.hidden && c.f.Pid != 0 && ka.HasPid(c.f.Pid) {
			return c.f.Pid
		}
	}
	for _, c := range x.all {
		if !c.hidden && c.f.Source == evidence.SourceExit && c.f.Pid != 0 && ka.HasPid(c.f.Pid) {
			return c.f.Pid
		}
	}
	return 0
}

// suspectFinding is the suspect call as a finding, for the verdict's evidence list.
func (x *facts) suspectFinding(verdict evidence.Kind) *cf {
	call, unfinished := x.suspect()
	if call == nil {
		return nil
	}
	kind := evidence.Unknown
	if gpuVerdict(verdict) {
		kind = verdict
	}
	state := "last call before the end of the log; it returned"
	switch {
	case unfinished:
		state = "started and never returned"
	case !call.Finished:
		state = "last call before the end of the log (this log level records no returns)"
	}
	f := evidence.Finding{Kind: kind, Source: evidence.SourceKernelAPI, File: call.File, Line: call.Line,
		Time: call.Time, Pid: call.Pid, Text: fmt.Sprintf("%s: %s", call.API, state),
		Details: map[string]any{"api": call.API, "finished": call.Finished, "unfinished": unfinished, "verdict_role": RoleSuspect}}
	if len(call.Args) > 0 {
		f.Details["args"] = argsText(call.Args, 8)
	}
	return &cf{f: f, kind: kind, role: RoleSuspect, synth: true}
}
