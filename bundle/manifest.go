// Package bundle lays out, writes and reads crash bundles (SPEC §4): one
// tar.gz holding one directory, written under a temporary name and linked into
// place so that no reader ever sees half a bundle and no bundle overwrites another.
package bundle

import (
	"encoding/json"
	"time"
)

// SchemaVersion is manifest.json's schema_version.
const SchemaVersion = 1

// Manifest is manifest.json. Every field SPEC §4 lists is present, null where unknown.
type Manifest struct {
	SchemaVersion int             `json:"schema_version"`
	KcrashVersion string          `json:"kcrash_version"`
	Mode          string          `json:"mode"` // run, attach, collect
	Command       []string        `json:"command"`
	Cwd           string          `json:"cwd"`
	StartTime     time.Time       `json:"start_time"`
	EndTime       time.Time       `json:"end_time"`
	Exit          Exit            `json:"exit"`
	Host          Host            `json:"host"`
	Job           *Job            `json:"job"`
	Env           Env             `json:"env"`
	Triage        json.RawMessage `json:"triage"`
	// Signature is the crash signature (package crashsig) computed from
	// Triage when the bundle was written; absent from older bundles.
	Signature  *Signature        `json:"signature,omitempty"`
	Collectors []CollectorStatus `json:"collectors"`
	Truncated  []string          `json:"truncated"`
	Notes      []string          `json:"notes,omitempty"`
	// Incomplete: the kcrash that collected it was killed first; a later
	// one made the bundle from what it had staged (the notes say what).
	Incomplete bool `json:"incomplete,omitempty"`
}

// Signature identifies the bug a bundle shows, for counting bundles of a
// fleet in buckets: Fine and Coarse are hashes of normalised keys (Fine is
// Key), valid only against signatures of the same Version.
type Signature struct {
	Version int      `json:"version"`
	Fine    string   `json:"fine"`
	Coarse  string   `json:"coarse"`
	Title   string   `json:"title"`           // at most 120 characters
	Class   string   `json:"class,omitempty"` // "hardware" or "software" when the record itself says
	Key     string   `json:"key"`             // the normalised parts Fine hashes, for people
	Notes   []string `json:"notes,omitempty"` // which rules fired and why
}

// Exit is how the supervised process ended. Code is null when unknown (attach
// without ptrace, a job still running).
type Exit struct {
	Code       *int    `json:"code"`
	Signal     *string `json:"signal"`
	CoreDumped bool    `json:"core_dumped"`
	Reason     string  `json:"reason,omitempty"`
}

// Host identifies the machine.
type Host struct {
	Hostname string   `json:"hostname"`
	Kernel   string   `json:"kernel"`
	OS       string   `json:"os,omitempty"`
	CPU      string   `json:"cpu,omitempty"`
	CPUs     int      `json:"cpus,omitempty"`
	MemBytes uint64   `json:"mem_bytes,omitempty"`
	GPUs     []string `json:"gpus"`
}

// Job is the scheduler identity of a rank (SPEC §6).
type Job struct {
	Scheduler string `json:"scheduler"` // slurm, torchrun, mpi
	JobID     string `json:"job_id,omitempty"`
	StepID    string `json:"step_id,omitempty"`
	Rank      *int   `json:"rank,omitempty"`
	LocalRank *int   `json:"local_rank,omitempty"`
	WorldSize *int   `json:"world_size,omitempty"`
	Node      string `json:"node,omitempty"`
	NodeID    string `json:"node_id,omitempty"`
}

// Env records what kcrash set for the child and the user's own variables,
// secrets redacted.
type Env struct {
	Profiles []string          `json:"profiles"`
	Set      map[string]string `json:"set"`  // variables kcrash added or overrode
	Kept     map[string]string `json:"kept"` // profile variables the user had already set, left alone
	User     map[string]string `json:"user"` // the rest of the child's environment
}

// CollectorStatus is one entry of manifest.collectors.
type CollectorStatus struct {
	Name       string   `json:"name"`
	Status     string   `json:"status"` // ok, error, timeout, skipped
	DurationMS int64    `json:"duration_ms"`
	Error      string   `json:"error"`
	Files      []string `json:"files"`
	// Source says where the evidence came from when a collector has more
	// than one way to it (kmsg: /dev/kmsg, the node agent, dmesg).
	Source string `json:"source,omitempty"`
}

// Collector statuses.
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusTimeout = "timeout"
	StatusSkipped = "skipped"
)
