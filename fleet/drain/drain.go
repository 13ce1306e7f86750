// Package drain turns a bucket report's hardware-suspect GPUs into Slurm
// drains: one per node, with a reason a person can check (which GPU, how
// many faults, which titles), never over a drain someone else set. Nothing
// is drained unless asked: Plan only says what would be done.
package drain

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/fleet/bucket"
)

// MaxReason bounds the reason: sinfo -R and scontrol show it on one line,
// and a drain reason is read by people and health checks, not parsed.
const MaxReason = 200

// Action is what --drain does (or would do) about one host.
type Action struct {
	Host   string   `json:"host"`           // as the bundles name it
	Node   string   `json:"node,omitempty"` // the Slurm node; "" when Slurm has none for the host
	GPUs   []string `json:"gpus"`           // the hardware-suspect GPUs' IDs
	Reason string   `json:"reason"`         // the drain reason
	// Skip says why nothing is done: the node is drained already (its
	// reason is kept), or Slurm has no such node.
	Skip string `json:"skip,omitempty"`
	// Done: drained by this run. Err: scontrol failed.
	Done bool   `json:"done,omitempty"`
	Err  string `json:"error,omitempty"`
}

// Plan returns one action per host with a hardware-suspect GPU, in host
// order, matched against Slurm's nodes.
func Plan(rep *bucket.Report, nodes []*cluster.SlurmNode) []Action {
	titles := map[string]string{}
	for _, b := range rep.Buckets {
		titles[b.Signature] = b.Title
	}
	byHost := map[string][]bucket.GPU{}
	for _, g := range rep.GPUs {
		if g.Class == bucket.Hardware {
			byHost[g.Host] = append(byHost[g.Host], g)
		}
	}
	hosts := make([]string, 0, len(byHost))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var acts []Action
	for _, h := range hosts {
		gs := byHost[h]
		a := Action{Host: h, Reason: Reason(gs, titles)}
		for _, g := range gs {
			a.GPUs = append(a.GPUs, g.ID)
		}
		switch n := cluster.FindNode(nodes, h); {
		case n == nil:
			a.Skip = "Slurm has no node for this host"
		case n.Drained():
			a.Node, a.Skip = n.Name, fmt.Sprintf("already %s: %s", strings.ToLower(n.State), n.Reason)
		default:
			a.Node = n.Name
		}
		acts = append(acts, a)
	}
	return acts
}

// Reason is "kcrash: [hardware] GPU <serial>: N faults, <titles>", one such
// part per GPU (most faults first), cut at MaxReason. A GPU is named by its
// serial, else its UUID, else its ID (host/bus id). An '=' would start a new
// field when scontrol's output is read back, so none is written.
func Reason(gs []bucket.GPU, titles map[string]string) string {
	gs = append([]bucket.GPU(nil), gs...)
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].Faults > gs[j].Faults })
	parts := make([]string, 0, len(gs))
	for _, g := range gs {
		name := g.Serial
		if name == "" {
			name = g.ID
		}
		var ts []string
		seen := map[string]bool{}
		for _, sig := range g.Buckets {
			if t := titles[sig]; t != "" && !seen[t] {
				seen[t] = true
				ts = append(ts, t)
			}
		}
		if len(ts) == 0 {
			ts = append(ts, strings.TrimPrefix(g.Reason, "hardware record: "))
		}
		faults := "faults"
		if g.Faults == 1 {
			faults = "fault"
		}
		parts = append(parts, fmt.Sprintf("GPU %s: %d %s, %s", name, g.Faults, faults, strings.Join(ts, "; ")))
	}
	r := "kcrash: [hardware] " + strings.Join(parts, " | ")
	r = strings.Map(func(c rune) rune {
		switch c {
		case '=':
			return ':'
		case '\n', '\r', '\t':
			return ' '
		}
		return c
	}, r)
	if len(r) > MaxReason {
		cut := MaxReason - len("…")
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		r = r[:cut] + "…"
	}
	return r
}

// Drainer is what Apply needs of Slurm (cluster.Slurm).
type Drainer interface {
	Drain(ctx context.Context, node, reason string) error
}

// Apply drains every action's node that is not skipped, and records the
// outcome in the action. It returns how many failed.
func Apply(ctx context.Context, s Drainer, acts []Action) (failed int) {
	for i := range acts {
		a := &acts[i]
		if a.Skip != "" || a.Node == "" {
			continue
		}
		if err := s.Drain(ctx, a.Node, a.Reason); err != nil {
			a.Err = err.Error()
			failed++
			continue
		}
		a.Done = true
	}
	return failed
}
