package drain

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/fleet/bucket"
	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/fleet/source"
)

// fleet reads fleettest.Mixed's bundles into a report.
func fleet(t *testing.T, now time.Time) *bucket.Report {
	t.Helper()
	dir := fleettest.Mixed(t, now)
	var sums []index.Summary
	if _, err := (source.Walk{Put: func(s []index.Summary) error { sums = append(sums, s...); return nil }}).Run(context.Background(), []string{dir}); err != nil {
		t.Fatal(err)
	}
	rep := bucket.Group(sums, bucket.Options{Now: now})
	return &rep
}

// One action per host with a hardware-suspect GPU: a node to drain, a node
// someone drained already (its reason stays), a host Slurm does not know.
// Software-suspect hosts are never drained.
func TestPlan(t *testing.T) {
	rep := fleet(t, time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	nodes := []*cluster.SlurmNode{
		{Name: "h1", HostName: "h1", State: "MIXED"},
		{Name: "h9", HostName: "h9", State: "IDLE+DRAIN", Reason: "bad PSU [admin@2026-12-01T10:00:00]"},
		{Name: "h2", HostName: "h2", State: "IDLE"},
	}
	acts := Plan(rep, nodes)
	if len(acts) != 2 {
		t.Fatalf("%d actions: %+v", len(acts), acts)
	}
	h1, h9 := acts[0], acts[1]
	if h1.Host != "h1" || h1.Node != "h1" || h1.Skip != "" || len(h1.GPUs) != 1 {
		t.Errorf("h1: %+v", h1)
	}
	if !strings.HasPrefix(h1.Reason, "kcrash: [hardware] GPU GPU-badbadba-0000-0000-0000-000000000001: 3 faults, ") || !strings.Contains(h1.Reason, "Xid 13") || !strings.Contains(h1.Reason, "Xid 119") {
		t.Errorf("h1's reason: %q", h1.Reason)
	}
	if h9.Node != "h9" || !strings.Contains(h9.Skip, "already idle+drain: bad PSU") || !strings.Contains(h9.Reason, ": 1 fault, ") || !strings.Contains(h9.Reason, "Xid 79") {
		t.Errorf("h9 (short name of h9.cluster.example): %+v", h9)
	}
	for _, a := range acts {
		if strings.Contains(a.Reason, "=") || len(a.Reason) > MaxReason {
			t.Errorf("reason %q", a.Reason)
		}
	}
	if acts := Plan(rep, nodes[2:]); len(acts) != 2 || acts[0].Skip != "Slurm has no node for this host" || acts[0].Node != "" {
		t.Errorf("without h1 in Slurm: %+v", acts)
	}
}

// Many GPUs on one host: most faults first, cut at MaxReason on a rune
// boundary, never an '=' or a newline.
func TestReasonBounded(t *testing.T) {
	var gs []bucket.GPU
	titles := map[string]string{}
	for i := range 12 {
		sig := string(rune('a' + i))
		titles[sig] = "nvidia Xid 48 é=DBE\nline"
		gs = append(gs, bucket.GPU{ID: "h/0000:0" + sig + ":00.0", Serial: "16520" + sig, Faults: i + 1, Buckets: []string{sig}})
	}
	r := Reason(gs, titles)
	if len(r) > MaxReason || !utf8.ValidString(r) || strings.ContainsAny(r, "=\n") || !strings.HasSuffix(r, "…") {
		t.Errorf("%d bytes: %q", len(r), r)
	}
	if !strings.HasPrefix(r, "kcrash: [hardware] GPU 16520l: 12 faults, nvidia Xid 48 é:DBE line | GPU 16520k: 11 faults") {
		t.Errorf("order: %q", r)
	}
}
