package cluster

import (
	"context"
	"fmt"
	"strings"
)

// SlurmNode is one record of `scontrol show node -o`.
type SlurmNode struct {
	Name     string // NodeName
	HostName string // NodeHostName
	Addr     string // NodeAddr
	State    string // as printed: IDLE, MIXED+DRAIN, DOWN*+DRAIN...
	Reason   string // the drain or down reason with its [user@time] stamp, "" for none
}

// nodeKeys are the fields of `scontrol show node` (Slurm 20.11 to 24.x):
// inside Reason or Comment only these start a new field.
var nodeKeys = map[string]bool{}

var nodeFreeText = map[string]bool{"Reason": true, "Comment": true, "Extra": true, "OS": true,
	"AvailableFeatures": true, "ActiveFeatures": true}

func init() {
	for _, k := range strings.Fields(`NodeName Arch CoresPerSocket CPUAlloc CPUEfctv CPUTot CPULoad AvailableFeatures
		ActiveFeatures Gres GresDrain GresUsed NodeAddr NodeHostName Port Version OS RealMemory AllocMem FreeMem Sockets
		Boards State ThreadsPerCore TmpDisk Weight Owner MCS_label Partitions BootTime SlurmdStartTime LastBusyTime
		ResumeAfterTime CfgTRES AllocTRES CapWatts CurrentWatts AveWatts LowestJoules ConsumedJoules ExtSensorsJoules
		ExtSensorsWatts ExtSensorsTemp Reason Comment Extra InstanceId InstanceType NextState CPUSpecList MemSpecLimit
		CoreSpecCount ResvPorts`) {
		nodeKeys[k] = true
	}
}

// ParseScontrolNodes parses `scontrol show node -o`, one record a line.
func ParseScontrolNodes(out []byte) []*SlurmNode {
	var nodes []*SlurmNode
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "NodeName=") {
			continue
		}
		_, f := splitRecord(line, nodeKeys, nodeFreeText)
		nodes = append(nodes, &SlurmNode{Name: f["NodeName"], HostName: nullable(f["NodeHostName"]),
			Addr: nullable(f["NodeAddr"]), State: f["State"], Reason: nullable(strings.TrimSpace(f["Reason"]))})
	}
	return nodes
}

// Drained: the node is drained or draining already (a person or a health
// check took it out; its reason is theirs).
func (n *SlurmNode) Drained() bool {
	for _, p := range strings.Split(n.State, "+") {
		switch strings.TrimRight(p, "*~#!%$@^-") {
		case "DRAIN", "DRAINED", "DRAINING":
			return true
		}
	}
	return false
}

// FindNode returns the node a host name (as a bundle records it: the
// machine's hostname, short or fully qualified) stands for: by NodeName,
// NodeHostName or NodeAddr, then by their short forms. nil when Slurm has
// no such node.
func FindNode(nodes []*SlurmNode, host string) *SlurmNode {
	if host == "" {
		return nil
	}
	short := func(s string) string { s, _, _ = strings.Cut(s, "."); return s }
	for _, match := range []func(a, b string) bool{
		func(a, b string) bool { return a == b },
		func(a, b string) bool { return short(a) == short(b) },
	} {
		for _, n := range nodes {
			for _, name := range []string{n.Name, n.HostName, n.Addr} {
				if name != "" && match(name, host) {
					return n
				}
			}
		}
	}
	return nil
}

// Nodes runs `scontrol show node -o`.
func (s *Slurm) Nodes(ctx context.Context) ([]*SlurmNode, error) {
	r, err := s.run(ctx, s.scontrol(), "show", "node", "-o")
	if err != nil {
		return nil, fmt.Errorf("scontrol show node: %w", err)
	}
	if r.ExitCode != 0 {
		return nil, fmt.Errorf("scontrol show node: exit status %d: %s", r.ExitCode, firstLine([]byte(strings.TrimSpace(string(r.Stderr)+" "+string(r.Stdout)))))
	}
	return ParseScontrolNodes(r.Stdout), nil
}

// Drain runs `scontrol update NodeName=NODE State=DRAIN Reason=REASON`:
// running jobs finish, no new job starts there until someone resumes it.
// The reason is one argument (no shell), so it may hold spaces.
func (s *Slurm) Drain(ctx context.Context, node, reason string) error {
	if node == "" || strings.ContainsAny(node, " =\n") {
		return fmt.Errorf("drain: not a node name: %q", node)
	}
	r, err := s.run(ctx, s.scontrol(), "update", "NodeName="+node, "State=DRAIN", "Reason="+reason)
	if err != nil {
		return fmt.Errorf("scontrol update NodeName=%s State=DRAIN: %w", node, err)
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("scontrol update NodeName=%s State=DRAIN: exit status %d: %s", node, r.ExitCode, firstLine([]byte(strings.TrimSpace(string(r.Stderr)+" "+string(r.Stdout)))))
	}
	return nil
}
