package collectors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/kernlog"
)

// UnseenKmsg names the kernel messages in evidence.Unseen.
const UnseenKmsg = "kernel messages"

// agentKmsg is the node agent's kernel-message query (agent/api.Client).
type agentKmsg interface {
	Kmsg(ctx context.Context, q api.KmsgQuery) (api.KmsgResponse, error)
}

// fromAgent asks the node agent for the window's records when the ring
// itself cannot be read, and feeds its answer through the same buffer as
// the ring's records: the same window, repeats and bounds. It reports
// whether the agent answered; what it said, or why it did not, is in rep.
func (k *kmsgCollector) fromAgent(ctx context.Context, env *Env, since, end time.Time, rep *kmsgReport, notes *[]string, openErr error) bool {
	c, ok := any(env.Agent).(agentKmsg)
	if env.Agent == nil || !ok {
		rep.Agent = "no kcrash agent: " + agentSocketOf(env)
		return false
	}
	resp, err := c.Kmsg(ctx, api.KmsgQuery{Since: since, Until: end, Mark: kernlog.AcceptedTestMark()})
	if errors.Is(err, api.ErrNoAgent) {
		rep.Agent = "no kcrash agent: " + agentSocketOf(env)
		return false
	}
	if err != nil {
		rep.Agent = fmt.Sprintf("kcrash agent at %s: %v", agentSocketOf(env), err)
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !resp.BootTime.IsZero() {
		k.boot = resp.BootTime
	}
	b := newKmsgBuffer()
	// The agent leaves out records this user may not see: their sequence
	// numbers are missing on purpose, not lost.
	b.filtered = true
	if !since.IsZero() {
		b.setWindow(max(since.Sub(k.boot), 0))
	}
	gaps := resp.Gaps
	for _, r := range resp.Records {
		for len(gaps) > 0 && gaps[0].To < r.Seq {
			b.addGap(kmsgGap{From: gaps[0].From, To: gaps[0].To})
			gaps = gaps[1:]
		}
		b.add(kmsgRecord{Seq: r.Seq, Mono: r.Mono, Level: r.Level, Facility: r.Facility, Text: r.Text, Dict: r.Dict})
	}
	for _, g := range gaps {
		b.addGap(kmsgGap{From: g.From, To: g.To})
	}
	k.buf = b
	rep.Source = "kcrash agent " + agentSocketOf(env)
	rep.Agent = fmt.Sprintf("answered: %d records for this user, %d withheld", len(resp.Records), resp.Withheld)
	rep.Withheld = resp.Withheld
	*notes = append(*notes, fmt.Sprintf("%v: read through the node agent at %s", openErr, agentSocketOf(env)))
	if resp.Withheld > 0 {
		*notes = append(*notes, fmt.Sprintf("%d records of the window concern other users' processes or GPUs this user cannot use: withheld by the agent", resp.Withheld))
	}
	if !resp.JournalStart.IsZero() && resp.JournalStart.After(since) {
		*notes = append(*notes, fmt.Sprintf("the agent's journal begins at %s, after the window start: earlier records of the window are not in it", kmsgTime(resp.JournalStart)))
	}
	*notes = append(*notes, resp.Notes...)
	return true
}

// agentSocketOf names the socket the Env's agent client dials.
func agentSocketOf(env *Env) string {
	if env.Agent != nil && env.Agent.Socket != "" {
		return env.Agent.Socket
	}
	return api.SocketPath()
}

// The agent's client answers every question the collectors ask it.
var (
	_ agentKmsg = (*api.Client)(nil)
	_ agentInfo = (*api.Client)(nil)
	_ agentGPU  = (*api.Client)(nil)
)

// kmsgFix is what would let the next run read kernel messages.
func kmsgFix(env *Env) string {
	return fmt.Sprintf("Kernel messages (GPU page faults, Xids, the OOM killer) could not be read as this user: start the node agent (`kcrash agent`, see the README's \"Node agent\") so that it answers at %s, or give kcrash CAP_SYSLOG (or set kernel.dmesg_restrict=0).", agentSocketOf(env))
}

// agentInfo is the node agent's self-description (agent/api.Client).
type agentInfo interface {
	Info(ctx context.Context) (api.Info, error)
}

type agentCheck struct {
	ok  bool
	why string
}

// kmsgAgentCheck says whether the node agent answers this user, and what it
// gives them, for doctor.
func kmsgAgentCheck(env *Env) agentCheck {
	c, ok := any(env.Agent).(agentInfo)
	if env.Agent == nil || !ok {
		return agentCheck{why: "no kcrash agent at " + agentSocketOf(env)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.Info(ctx)
	if errors.Is(err, api.ErrNoAgent) {
		return agentCheck{why: "no kcrash agent at " + agentSocketOf(env)}
	}
	if err != nil {
		return agentCheck{why: fmt.Sprintf("the kcrash agent at %s does not answer: %v", agentSocketOf(env), err)}
	}
	why := fmt.Sprintf("the kcrash agent at %s answers (uid %d): %s", agentSocketOf(env), info.Caller.UID, info.Caller.Sees)
	if !info.Journal.Oldest.IsZero() {
		why += fmt.Sprintf("; its journal holds %d records since %s", info.Journal.Records, kmsgTime(info.Journal.Oldest))
	}
	if info.Journal.ReadingErr != "" {
		return agentCheck{why: why + "; but it cannot follow the kernel's ring now: " + info.Journal.ReadingErr}
	}
	return agentCheck{ok: true, why: why}
}
