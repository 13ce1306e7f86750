// The verdict's one-line summary: its headline for each kind, where it
// happened and what it explains.

package triage

import (
	"fmt"
	"path"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/human"
)

// summary writes the verdict's one line: what happened, where, and what it explains.
func (x *facts) summary(k evidence.Kind, ev []*cf, suspect *cf) string {
	var p *cf
	if len(ev) > 0 {
		p = ev[0]
	}
	s := x.headline(k, p, ev)
	if suspect != nil && gpuVerdict(k) {
		call, unfinished := x.suspect()
		switch {
		case unfinished:
			s += fmt.Sprintf("; the kernel-API call %s (%s:%d) started and never returned", call.API, path.Base(call.File), call.Line)
		default:
			s += fmt.Sprintf("; the last kernel-API call logged was %s (%s:%d)", call.API, path.Base(call.File), call.Line)
		}
	}
	if ex := x.explainedText(); ex != "" && k != evidence.CleanExit && k != evidence.Unknown {
		s += "; it explains " + ex
	}
	return s
}

func (x *facts) headline(k evidence.Kind, p *cf, ev []*cf) string {
	var d evidence.Details
	text := ""
	if p != nil {
		d, text = p.f.Details, p.f.Text
	}
	short := lsClip(strings.TrimSpace(text), 160)
	switch k {
	case evidence.CleanExit:
		return x.headlineCleanExit()
	case evidence.GPUHardwareError:
		return headlineHardware(p, d, short)
	case evidence.HostOOM:
		return headlineHostOOM(p, d, short)
	case evidence.GPUDeviceAssert:
		return x.headlineDeviceAssert(ev, d, short)
	case evidence.GPUArchMismatch:
		return x.headlineArchMismatch(ev, d, short)
	case evidence.GPUPageFault:
		return headlinePageFault(p, ev)
	case evidence.GPUIllegalMemoryAccess:
		return headlineIllegalAccess(p, d, short)
	case evidence.GPUOOM:
		return headlineGPUOOM(p, d, short)
	case evidence.GPUHang:
		return headlineGPUHang(d, short)
	case evidence.NumericalNonfinite:
		if api := d.Text(detail.API); api != "" {
			return fmt.Sprintf("non-finite values: %s of %s has nan_count=%s inf_count=%s", d.Text(detail.Arg), api, d.Text(detail.NanCount), d.Text(detail.InfCount))
		}
		return "non-finite values: " + short
	case evidence.CollectiveTimeout:
		return headlineCollective(ev, d, short)
	case evidence.Hang:
		if c := threadDump(ev); c != nil {
			n, _ := c.f.Details.Int(detail.ThreadsDumped)
			return fmt.Sprintf("hang: faulthandler dumped %d threads' stacks with no fatal error (a watchdog or a signal asked for them, most often because the program was stuck)", n)
		}
		if sig := d.Text(detail.Signature); timeLimitSig(sig) {
			return "hang or a run longer than its time limit: " + timeLimitWho(sig) + " at its time limit (" + short + ")"
		}
		if s := stallHeadline(d); s != "" {
			return s
		}
		if d.Text(detail.Signature) == liveStacksWaitSig {
			return headlineLiveStacks(d)
		}
		return "hang: " + short
	case evidence.NativeCrash:
		if d.Bool(detail.Truncated) && d.Text(detail.Signature) == goDumpCutSig {
			return headlineGoDumpCut(d)
		}
		if d.Bool(detail.Truncated) && d.Text(detail.Signature) == pyFramesCutSig {
			return headlinePyFramesCut(d)
		}
		if d.Bool(detail.Truncated) {
			return headlineNativeFramesCut(d)
		}
		return x.headlineNativeCrash(p, ev, d, short)
	case evidence.PythonException:
		if d.Bool(detail.Truncated) {
			return headlineCutTraceback(d)
		}
		switch d.Text(detail.Family) {
		case "graph_capture":
			return headlineGraphCapture(ev, short)
		case "config_validation":
			return headlineConfigValidation(ev, short)
		}
		exc := d.Text(detail.Exception)
		if m := d.Text(detail.Message); m != "" {
			// A line that gave only the message (ComfyUI's, a logger's) names no exception.
			if exc != "" {
				exc += ":"
			}
			exc += " " + lsClip(m, 120)
		} else if exc != "" {
			exc = " " + exc
		}
		return "Python exception" + exc + where(d)
	case evidence.Killed:
		if x.signal != "" {
			return fmt.Sprintf("killed by %s from outside the program, with no other evidence", x.signal)
		}
		return headlineKilledReport(d, short)
	case evidence.Unknown:
		return x.headlineUnknown()
	}
	return short
}

func (x *facts) headlineCleanExit() string {
	s := "the program exited with code 0"
	if n := len(x.causes(kindsLoggedOnCleanExit...)); n > 0 {
		s += fmt.Sprintf(" (%d error finding(s) were logged along the way)", n)
	}
	// A training run can finish "successfully" with a NaN loss: exit 0 is
	// not the news then, the numbers are.
	if nf := x.causes(evidence.NumericalNonfinite); len(nf) > 0 {
		s += fmt.Sprintf(", but it logged non-finite values: %s (line %d)", lsClip(strings.TrimSpace(nf[0].f.Text), 120), nf[0].f.Line)
	}
	return s
}

func headlineHardware(p *cf, d evidence.Details, short string) string {
	if d.Text(detail.Subsystem) == "nvls" {
		return "NVLink SHARP (NVLS) multicast setup failed: a Fabric Manager or NVSwitch problem of the system, not a collective timeout or a program bug (" + short + ")"
	}
	if nc := d.Text(detail.NamedCause); nc != "" {
		s := fmt.Sprintf("GPU hardware error: %s, named as the cause by the Xid %d that followed it", nc, p.f.Xid)
		if p.f.GPU != "" {
			s += " on " + p.f.GPU
		}
		return s
	}
	if p.f.Xid != 0 {
		what := d.Text(detail.Description)
		if what == "" {
			what = d.Text(detail.Meaning)
		}
		if what == "" {
			what = short
		}
		s := fmt.Sprintf("GPU hardware error: Xid %d (%s)", p.f.Xid, what)
		if p.f.GPU != "" {
			s += " on " + p.f.GPU
		}
		return s
	}
	return "GPU hardware error: " + short
}

func headlineHostOOM(p *cf, d evidence.Details, short string) string {
	if v := d.Text(detail.Victim); v != "" {
		s := fmt.Sprintf("host out of memory: the kernel killed %s", v)
		if p.f.Pid != 0 {
			s += fmt.Sprintf(" (pid %d", p.f.Pid)
			if kb, ok := d.Int(detail.AnonRSSKB); ok {
				s += ", anon-rss " + human.Bytes(kb*1024)
			}
			s += ")"
		}
		if sc := d.Text(detail.Scope); sc == "memcg" {
			s += " at its cgroup's memory limit"
		}
		return s
	}
	if d.Text(detail.Signature) == "dataloader-shm-bus-error" {
		s := "host shared memory (/dev/shm) full: a DataLoader worker died of SIGBUS"
		if p.f.Pid != 0 {
			s += fmt.Sprintf(" (pid %d)", p.f.Pid)
		}
		return s + "; not a native-code crash"
	}
	if d.Text(detail.Scheduler) == "kubernetes" {
		return "host out of memory: Kubernetes killed the container at its memory limit (OOMKilled)"
	}
	if d.Text(detail.Signature) == "ray-memory-monitor-kill" {
		s := "host out of memory: Ray's memory monitor killed a worker"
		if ip := d.Text(detail.NodeIP); ip != "" {
			s += " on node " + ip
		}
		if u, t := d.Text(detail.Used), d.Text(detail.Total); u != "" && t != "" {
			s += fmt.Sprintf(" (node memory %s of %s)", u, t)
		}
		return s + "; not the kernel's OOM killer, and not GPU memory"
	}
	return "host out of memory: " + short
}

func (x *facts) headlineDeviceAssert(ev []*cf, d evidence.Details, short string) string {
	if f := d.Text(detail.AssertFile); f != "" {
		in := ""
		if fn := d.Text(detail.Function); fn != "" {
			in = " in " + fn // older CUDA toolkits print no function
		}
		return fmt.Sprintf("device-side assert failed at %s:%s%s: `%s` (%s GPU thread(s))",
			path.Base(f), d.Text(detail.AssertLine), in, lsClip(d.Text(detail.Assertion), 120), d.Text(detail.Count))
	}
	for _, c := range ev {
		if f := c.f.Details.Text(detail.AssertFile); f != "" {
			return x.headline(evidence.GPUDeviceAssert, c, nil)
		}
	}
	switch d.Text(detail.Via) {
	case "NCCL WARN", "Cuda failure", "Hip failure":
		return "device-side assert triggered in a GPU kernel, reported through NCCL (" + short + "); the collective failed because of it" + where(d)
	case "Process group watchdog":
		return "device-side assert triggered in a GPU kernel, reported by the process-group watchdog" + where(d)
	}
	return "device-side assert triggered: " + short + where(d)
}

// headlinePageFault: the kernel's and the runtime's reports of one fault
// complement each other: the address and process from one, the reason from
// the other.
func headlinePageFault(p *cf, ev []*cf) string {
	pick := func(k detail.Text) string {
		for _, c := range ev {
			if v := c.f.Details.Text(k); v != "" {
				return v
			}
		}
		return ""
	}
	s := "GPU page fault"
	if p.f.Address != "" {
		s += " at " + p.f.Address
	}
	if r := pick(detail.Reason); r != "" {
		s += " (" + strings.TrimSuffix(r, ".") + ")"
	} else if m := pick(detail.Status); strings.HasPrefix(m, "HSA_") {
		s += " (" + m + ")"
	}
	if p.f.Xid != 0 {
		s += fmt.Sprintf(" (Xid %d)", p.f.Xid)
	}
	if proc := pick(detail.Process); proc != "" {
		s += " in " + proc
		if p.f.Pid != 0 {
			s += fmt.Sprintf(" (pid %d)", p.f.Pid)
		}
	}
	if e := pick(detail.UTCL2Client); e != "" {
		s += ", engine " + e
	}
	return s
}

func headlineIllegalAccess(p *cf, d evidence.Details, short string) string {
	switch {
	case p.f.Xid != 0:
		return fmt.Sprintf("illegal GPU memory access / kernel exception: Xid %d%s", p.f.Xid, onGPU(p.f.GPU))
	case d.Text(detail.Status) != "" && strings.Contains(d.Text(detail.Status), "_STATUS_EXECUTION_FAILED"):
		return fmt.Sprintf("a BLAS kernel failed to execute: %s in %s%s", d.Text(detail.Status), human.OrDash(d.Text(detail.Call)), where(d))
	}
	msg := d.Text(detail.Message)
	if msg == "" {
		msg = short
	}
	return "illegal GPU memory access: " + msg + where(d)
}

func headlineGPUOOM(p *cf, d evidence.Details, short string) string {
	if d.Text(detail.Framework) == "triton" && d.Text(detail.Required) != "" {
		return fmt.Sprintf("GPU on-chip %s exhausted: a Triton kernel needs %s bytes, the GPU has %s (%s; not VRAM)", d.Text(detail.Resource), d.Text(detail.Required), d.Text(detail.Limit), human.OrDash(d.Text(detail.Exception)))
	}
	if b, ok := d.Int(detail.RequestedBytes); ok && d.Text(detail.Requested) == "" {
		return fmt.Sprintf("GPU out of memory%s: tried to allocate %s (%s)", onGPU(p.f.GPU), human.Bytes(b), short)
	}
	if r := d.Text(detail.Requested); r != "" {
		s := fmt.Sprintf("GPU out of memory%s: tried to allocate %s", onGPU(p.f.GPU), r)
		if fr := d.Text(detail.Free); fr != "" {
			s += " with " + fr + " free"
			if t := d.Text(detail.Total); t != "" {
				s += " of " + t
			}
		}
		return s
	}
	return "GPU out of memory: " + short
}

func headlineCollective(ev []*cf, d evidence.Details, short string) string {
	if g := glooTimeoutHeadline(d); g != "" {
		return g
	}
	if c := d.Text(detail.Collective); c != "" {
		ranks := map[string]bool{}
		var rl []string
		for _, e := range ev {
			if r := e.f.Details.Text(detail.Rank); r != "" && !ranks[r] {
				ranks[r] = true
				rl = append(rl, r)
			}
		}
		s := fmt.Sprintf("NCCL collective timed out: %s seq %s ran %s ms (timeout %s ms)", c, d.Text(detail.Seq), d.Text(detail.RanMs), d.Text(detail.TimeoutMs))
		if len(rl) > 0 {
			s += " on rank(s) " + strings.Join(rl, ",")
		}
		return s + "; usually the symptom of another rank's failure"
	}
	return "NCCL/RCCL error: " + short
}

func (x *facts) headlineNativeCrash(p *cf, ev []*cf, d evidence.Details, short string) string {
	sig := x.signal
	if sig == "" || !crashSignal(sig) {
		sig = d.Text(detail.Signal)
	}
	s := "native crash"
	if sig != "" {
		s += " (" + sig + ")"
	} else if nt := ntstatusCrash(d); nt != "" {
		s += " (" + nt + ")"
	}
	if p.f.Source != evidence.SourceExit {
		for _, c := range ev {
			if ff := c.f.Details.Text(detail.FrameFunc); ff != "" {
				s += fmt.Sprintf(" in %s (%s:%s) per faulthandler", ff, path.Base(c.f.Details.Text(detail.FrameFile)), c.f.Details.Text(detail.FrameLine))
				if c.f.Details.Text(detail.Signature) == headerlessFatalDumpSig {
					s += " (its `Fatal Python error` line is not in the log; a dump with a current thread is not the hang watchdog's)"
				}
				return s + "; no GPU evidence"
			}
		}
		return s + ": " + short + "; no GPU evidence"
	}
	return s + " with no GPU evidence"
}

func (x *facts) headlineUnknown() string {
	s := "no root cause found"
	if x.exitCf != nil {
		s += " (" + x.exitCf.f.Text + ")"
	}
	for _, c := range x.symptomsOf(evidence.Unknown, evidence.CollectiveTimeout) {
		if !c.synth {
			s += "; " + symptomName(c) + " was reported"
			break
		}
	}
	if x.recoveredOOM() {
		s += "; a GPU out-of-memory was logged, but the program retried with less and went on, so it is not the cause"
	}
	return s + "; checked: " + strings.Join(x.checked(), ", ")
}

func where(d evidence.Details) string {
	f := d.Text(detail.FrameFile)
	if f == "" {
		return ""
	}
	return fmt.Sprintf(" at %s:%s in %s", path.Base(f), d.Text(detail.FrameLine), d.Text(detail.FrameFunc))
}

func onGPU(g string) string {
	if g == "" {
		return ""
	}
	return " on GPU " + g
}

// explainedText names, briefly, the symptoms the verdict accounts for.
func (x *facts) explainedText() string {
	var names []string
	seen := map[string]bool{}
	for _, c := range x.all {
		if c.role != RoleExplained {
			continue
		}
		n := symptomName(c)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		names = append(names, n)
	}
	if len(names) > 4 {
		names = append(names[:4], "more")
	}
	return strings.Join(names, ", ")
}

func symptomName(c *cf) string {
	d := c.f.Details
	switch sig := d.Text(detail.Signature); sig {
	case "sglang-sigquit":
		return "SGLang's sigquit from a child"
	case "vllm-engine-core-died", "vllm-engine-dead", "vllm-engine-init-failed":
		return "vLLM's dead engine"
	case hsaToolInitSig:
		return "HSA_STATUS_ERROR_OUT_OF_RESOURCES from a tool's HSA call (most often /dev/kfd or the render node not accessible, not memory)"
	case "torchelastic-child-failed":
		return "torchrun's failed child"
	}
	switch c.kind {
	case evidence.NativeCrash:
		if s := d.Text(detail.Signal); s != "" {
			return "the " + s
		}
		return "the native crash"
	case evidence.Killed:
		if s := d.Text(detail.Signal); s != "" {
			return "the " + s
		}
		return "the kill"
	case evidence.CollectiveTimeout:
		if d.Text(detail.Collective) != "" {
			return "the NCCL watchdog timeout"
		}
		return "the NCCL error"
	case evidence.PythonException:
		if e := d.Text(detail.Exception); e != "" {
			return "the " + e[strings.LastIndexByte(e, '.')+1:]
		}
		return "the Python exception"
	case evidence.GPUIllegalMemoryAccess:
		if c.f.Xid != 0 {
			return fmt.Sprintf("Xid %d", c.f.Xid)
		}
		return "the illegal-address errors"
	case evidence.GPUHang:
		return "the GPU hang/reset"
	case evidence.GPUArchMismatch:
		return "the missing kernel image"
	case evidence.GPUPageFault:
		return "the page fault"
	case evidence.Hang:
		return "the hang"
	case evidence.Unknown:
		if c.f.Xid != 0 {
			return fmt.Sprintf("Xid %d", c.f.Xid)
		}
		if c.f.Source == evidence.SourceExit {
			return "exit code " + d.Text(detail.Code)
		}
	}
	return ""
}

func (x *facts) checked() []string {
	if len(x.in.Checked) > 0 {
		return x.in.Checked
	}
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if x.in.ExitCode != nil || x.in.Signal != "" {
		add("exit status")
	}
	for _, c := range x.all {
		if !c.synth {
			add(c.f.Source)
		}
	}
	if x.in.KernelAPI != nil {
		add(evidence.SourceKernelAPI)
	}
	if len(out) == 0 {
		out = append(out, "nothing (no evidence was given)")
	}
	return out
}
