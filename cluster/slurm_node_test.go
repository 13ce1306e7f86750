package cluster

import (
	"os"
	"testing"
)

// Real `scontrol show node -o` of Slurm 22.05 (scripts/slurm-test-cluster.sh's
// node): idle, and drained with a reason that holds "a=b" and "State=x".
func TestParseScontrolNodes(t *testing.T) {
	for _, c := range []struct {
		file, state, reason string
		drained             bool
	}{
		{"scontrol-show-node-idle.txt", "IDLE", "", false},
		{"scontrol-show-node-drained.txt", "IDLE+DRAIN", "kcrash: [hardware] GPU 1652: 4 faults, Xid 79 a=b State=x [root@2026-12-03T18:28:47]", true},
	} {
		b, err := os.ReadFile("testdata/slurm/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		nodes := ParseScontrolNodes(b)
		if len(nodes) != 1 {
			t.Fatalf("%s: %d nodes", c.file, len(nodes))
		}
		n := nodes[0]
		if n.Name != "vm" || n.HostName != "vm" || n.Addr != "vm" || n.State != c.state || n.Reason != c.reason || n.Drained() != c.drained {
			t.Errorf("%s: %+v drained=%v", c.file, *n, n.Drained())
		}
	}
}

func TestDrainedStates(t *testing.T) {
	for st, want := range map[string]bool{"IDLE": false, "MIXED+DRAIN": true, "DRAINED": true, "DRAINING": true,
		"DOWN*+DRAIN": true, "DOWN*": false, "ALLOCATED+COMPLETING": false, "IDLE+DRAIN+RESERVED": true} {
		if got := (&SlurmNode{State: st}).Drained(); got != want {
			t.Errorf("%s: drained %v", st, got)
		}
	}
}

func TestFindNode(t *testing.T) {
	nodes := []*SlurmNode{{Name: "gpu001", HostName: "gpu001.cluster.example", Addr: "10.0.0.1"}, {Name: "gpu002", HostName: "gpu002", Addr: "gpu002"}}
	for host, want := range map[string]string{"gpu001": "gpu001", "gpu001.cluster.example": "gpu001", "10.0.0.1": "gpu001",
		"gpu002.cluster.example": "gpu002", "gpu003": "", "": ""} {
		got := ""
		if n := FindNode(nodes, host); n != nil {
			got = n.Name
		}
		if got != want {
			t.Errorf("%q: %q, want %q", host, got, want)
		}
	}
}
