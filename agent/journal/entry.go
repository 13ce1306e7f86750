package journal

import (
	"time"

	"github.com/kcrash/kcrash/agent/api"
)

// Entry is one line of the journal: a kernel record with what the agent
// learnt about it when it arrived (Subject), or a gap of records it never
// read.
type Entry struct {
	Boot string     `json:"boot"` // /proc/sys/kernel/random/boot_id of the record's boot
	Wall time.Time  `json:"wall"` // boot time + Mono: what time windows are cut on
	Rec  api.Record `json:"rec"`
	Gap  *GapInfo   `json:"gap,omitempty"` // set on a gap entry, whose Rec is empty

	Subject Subject `json:"subject,omitzero"`
}

// GapInfo is a run of sequence numbers lost before they were read.
type GapInfo struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// Why: "overwritten" (EPIPE, or a jump in seq while following) or
	// "agent down" (the first record after a restart is past the cursor).
	Why string `json:"why"`
}

// Subject is who a record concerns, resolved by agent/access at the moment
// the record arrived, while the processes it names were (usually) alive.
// A record with an empty Subject concerns the host alone.
type Subject struct {
	// Procs are the processes the text names (a faulting pid, an OOM
	// victim, a row of the OOM task dump), with the owner the agent found.
	Procs []Proc `json:"procs,omitempty"`
	// Devices are the GPUs the text names (by PCI address), with the
	// processes that held their device files open at the time.
	Devices []Device `json:"devices,omitempty"`
	// Inherited is set when the record names nothing itself but continues
	// a multi-line report of the record before it, whose subject it took.
	Inherited bool `json:"inherited,omitempty"`
}

// Proc is a process a record names.
type Proc struct {
	Pid    int    `json:"pid"`
	UID    int    `json:"uid"` // -1: unknown (gone before the agent saw it, and the text says no uid)
	Cgroup string `json:"cgroup,omitempty"`
}

// Device is a GPU a record names.
type Device struct {
	BDF     string   `json:"bdf"` // 0000:3b:00.0
	Holders []Holder `json:"holders,omitempty"`
	// Nodes are the device numbers of the GPU's files ("c 226:128"), in
	// the form of cgroup v1's devices.list: a caller whose cgroup's device
	// rules grant one can use the GPU.
	Nodes []string `json:"nodes,omitempty"`
}

// Holder is a process that had a device's files open.
type Holder struct {
	Pid    int    `json:"pid"`
	UID    int    `json:"uid"`
	Cgroup string `json:"cgroup,omitempty"`
}
