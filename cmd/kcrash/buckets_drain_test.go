package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/fleet/drain"
	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// TestSlurmRealBucketsDrain drains the real one-node Slurm's node for a GPU
// that fell off the bus on it: --drain alone changes nothing and says what
// it would do; --drain --apply sets the drain with kcrash's reason; a second
// run keeps that reason (the node is drained already); a host Slurm does not
// know is skipped. The node is resumed when the test ends.
func TestSlurmRealBucketsDrain(t *testing.T) {
	realSlurm(t)
	ctx := context.Background()
	s := &cluster.Slurm{}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	node := nodeOf(t, s, host)
	if node.Drained() {
		t.Fatalf("node %s is drained before the test: %s", node.Name, node.Reason)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("scontrol", "update", "NodeName="+node.Name, "State=RESUME").CombinedOutput(); err != nil {
			t.Errorf("resume %s: %v %s", node.Name, err, out)
		}
	})

	now := time.Now().UTC().Truncate(time.Second)
	dir := t.TempDir()
	bus := fleettest.Corpus(t, testcorpus.Dir(t), "3-nvidia-xid/xid79-modal-gpu-health-wrapped.txt")
	fleettest.Write(t, fleettest.Spec{Out: dir, Host: host, Time: now.Add(-time.Hour), Job: "77", Log: bus, BusID: "0000:c6:00.0", Seed: 1})
	fleettest.Write(t, fleettest.Spec{Out: dir, Host: "gpu-not-in-slurm", Time: now.Add(-2 * time.Hour), Job: "78", Log: bus, BusID: "0000:3b:00.0", Seed: 2})

	run := func(apply, asJSON bool) (string, error) {
		io, out, _ := iostreams.Test()
		o := &bucketsOptions{IO: io, sources: []string{dir}, since: days(7 * 24 * time.Hour), window: days(7 * 24 * time.Hour), k: 3, m: 3, n: 2,
			asJSON: asJSON, act: bucketsActions{drain: true, apply: apply}}
		err := runBuckets(ctx, o)
		return out.String(), err
	}

	out, err := run(false, false)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantReason := "kcrash: [hardware] GPU " + host + "/0000:c6:00.0: 1 fault, gpu-fell-off-bus | nvidia Xid 79"
	for _, want := range []string{"drain (dry run; --apply drains):", "would drain " + node.Name + ": scontrol update NodeName=" + node.Name + " State=DRAIN Reason=\"" + wantReason,
		"skip gpu-not-in-slurm: Slurm has no node for this host"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run: no %q in\n%s", want, out)
		}
	}
	if n := nodeOf(t, s, host); n.Drained() {
		t.Fatalf("a dry run drained %s: %s", n.Name, n.State)
	}

	out, err = run(true, true)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep struct {
		Drain   []drain.Action `json:"drain"`
		Applied bool           `json:"drain_applied"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Applied || len(rep.Drain) != 2 {
		t.Fatalf("--apply: %+v", rep)
	}
	for _, a := range rep.Drain {
		if a.Host == host && (!a.Done || a.Node != node.Name) || a.Host != host && a.Done {
			t.Errorf("action %+v", a)
		}
	}
	n := nodeOf(t, s, host)
	if !n.Drained() || !strings.HasPrefix(n.Reason, wantReason) {
		t.Fatalf("after --apply: state %s, reason %q, want %q", n.State, n.Reason, wantReason)
	}
	sinfo, _ := exec.Command("sinfo", "-R", "-h", "-o", "%E|%N").Output()
	if !strings.Contains(string(sinfo), wantReason) {
		t.Errorf("sinfo -R: %s", sinfo)
	}

	// Someone's own reason (here kcrash's earlier one) is never overwritten.
	out, err = run(true, false)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "skip "+host+": already ") || strings.Contains(out, "drained "+node.Name) {
		t.Errorf("second --apply:\n%s", out)
	}
	if again := nodeOf(t, s, host); again.Reason != n.Reason {
		t.Errorf("reason changed: %q -> %q", n.Reason, again.Reason)
	}

	// scontrol's refusal is one line and exit 1, the report still printed.
	if err := s.Drain(ctx, "kcrash-no-such-node", "x"); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("draining a missing node: %v", err)
	}
	textDir := t.TempDir()
	io, _, _ := iostreams.Test()
	o := &bucketsOptions{IO: io, sources: []string{dir}, since: days(7 * 24 * time.Hour), window: days(7 * 24 * time.Hour), k: 3, m: 3, n: 2,
		act: bucketsActions{textfileDir: textDir}}
	if err := runBuckets(ctx, o); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(textDir, "kcrash-buckets.prom")); err != nil || !strings.Contains(string(b), `kcrash_fleet_gpus{class="hardware-suspect"} 2`) {
		t.Errorf("--textfile-dir: %v\n%s", err, b)
	}
}

func nodeOf(t *testing.T, s *cluster.Slurm, host string) *cluster.SlurmNode {
	t.Helper()
	nodes, err := s.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := cluster.FindNode(nodes, host)
	if n == nil {
		t.Fatalf("no Slurm node for %s in %+v", host, nodes)
	}
	return n
}
