// Package api is the node agent's wire contract: the types a client and the
// agent exchange over the agent's unix socket, and the Client that kcrash
// run, attach, collect and doctor use. It imports nothing of the agent's
// server side, so a client carries no daemon code.
//
// The transport is HTTP/1.1 over a unix socket with JSON bodies. What a
// caller may see is decided by the agent from the socket's peer credentials
// (SO_PEERCRED) and /proc, never from anything the request claims.
package api

import "time"

// Version is the wire version: it is the first element of every path
// (/v1/...), bumped only for an incompatible change.
const Version = "v1"

const (
	// DefaultSocket is where the agent listens unless told otherwise.
	DefaultSocket = "/run/kcrash/agent.sock"
	// SocketEnv names the variable a client reads the socket path from.
	SocketEnv = "KCRASH_AGENT_SOCKET"
)

// Routes.
const (
	PathInfo  = "/" + Version + "/info"  // GET: Info
	PathKmsg  = "/" + Version + "/kmsg"  // GET ?since=&until=&mark=: KmsgResponse
	PathGPU   = "/" + Version + "/gpu"   // GET ?since=&until=: GPUResponse
	PathCrash = "/" + Version + "/crash" // POST CrashNotice: counted in the agent's metrics
)

// CrashNotice is what a kcrash run tells the agent after writing a bundle,
// for the node's metrics. The agent counts it by verdict kind (a fixed set:
// an unknown kind counts as "other") and keeps nothing else.
type CrashNotice struct {
	Verdict string `json:"verdict"`
	// Bundle is the bundle's absolute path: the job's epilog links its own
	// bundle to it (GET PathCrashes, root only).
	Bundle string `json:"bundle,omitempty"`
}

// PathCrashes (GET ?job=ID, root only) lists the crash notices of a Slurm
// job's processes: the bundles its users' kcrash runs wrote.
const PathCrashes = "/" + Version + "/crashes"

// CrashRecord is a crash notice as the agent keeps it: who sent it comes
// from the socket (uid, the job of its cgroup), what it says from the body.
type CrashRecord struct {
	Time    time.Time `json:"time"`
	UID     int       `json:"uid"`
	Job     string    `json:"job,omitempty"`
	Verdict string    `json:"verdict"`
	Bundle  string    `json:"bundle,omitempty"`
}

// Info is the agent's answer to "who are you and what will you give me".
type Info struct {
	AgentVersion string       `json:"agent_version"`
	BootID       string       `json:"boot_id"`
	Journal      JournalStats `json:"journal"`
	GPU          GPUStats     `json:"gpu"`
	// Caller is the agent's view of the peer: what the kernel said about
	// the connection, and in words what records this caller may read.
	Caller Caller `json:"caller"`
}

// JournalStats describes the agent's kernel-message journal.
type JournalStats struct {
	Records    int64     `json:"records"`
	Bytes      int64     `json:"bytes"`
	Oldest     time.Time `json:"oldest,omitzero"`
	Newest     time.Time `json:"newest,omitzero"`
	Gaps       int64     `json:"gaps"`
	Lost       uint64    `json:"lost"` // records the kernel overwrote before the agent read them
	MaxBytes   int64     `json:"max_bytes"`
	MaxAge     Duration  `json:"max_age"`
	ReadingErr string    `json:"reading_error,omitempty"` // why the agent cannot follow /dev/kmsg now
}

// GPUStats describes the agent's GPU sampler.
type GPUStats struct {
	Tools      []string  `json:"tools"`
	Interval   Duration  `json:"interval"`
	LastSample time.Time `json:"last_sample,omitzero"`
	Samples    int       `json:"samples"`
}

// Caller is the identity the agent took from the connection.
type Caller struct {
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	PID    int    `json:"pid"`
	Cgroup string `json:"cgroup,omitempty"`
	Job    string `json:"job,omitempty"` // Slurm job id from the cgroup path
	Root   bool   `json:"root"`
	Sees   string `json:"sees"` // one sentence: which records this caller is given
}

// KmsgQuery asks for the kernel records of a window. Mark is the caller's
// test token (kernlog.TestMarkEnv): marked test records of another token are
// never returned.
type KmsgQuery struct {
	Since time.Time
	Until time.Time // zero: up to now
	Mark  string
}

// Record is one kernel record as /dev/kmsg gave it (internal/kmsg.Record),
// with the boot it belongs to. Mono is on the printk clock of that boot.
type Record struct {
	Seq      uint64        `json:"seq"`
	Mono     time.Duration `json:"mono_ns"`
	Level    uint8         `json:"level"`
	Facility uint8         `json:"facility"`
	Text     string        `json:"text"`
	Dict     string        `json:"dict,omitempty"`
}

// Gap is a run of sequence numbers the agent never read: the kernel
// overwrote them first (or the agent was down longer than the ring lasts).
type Gap struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// KmsgResponse is the window's records visible to the caller, in sequence
// order, for the current boot.
type KmsgResponse struct {
	BootID   string    `json:"boot_id"`
	BootTime time.Time `json:"boot_time"` // wall time of the printk clock's zero
	Records  []Record  `json:"records"`
	Gaps     []Gap     `json:"gaps,omitempty"` // gaps inside the window
	// Withheld counts records of the window the caller may not see
	// (another user's processes, GPUs it cannot use): said, never shown.
	Withheld int `json:"withheld"`
	// JournalStart is the oldest time the journal still covers: a window
	// starting before it may be missing records.
	JournalStart time.Time `json:"journal_start,omitzero"`
	Notes        []string  `json:"notes,omitempty"`
}

// GPUQuery asks for the GPU samples of a window.
type GPUQuery struct {
	Since time.Time
	Until time.Time
}

// GPUResponse is the agent's GPU samples of the window, reduced to the
// GPUs the caller's processes used and to the caller's own processes.
// Its JSON shapes are those of gpu.json (collectors.GPUSample, GPUProcess).
type GPUResponse struct {
	IntervalMS int64        `json:"interval_ms"`
	Tools      []string     `json:"tools"`
	Samples    []GPUSample  `json:"samples"`
	Processes  []GPUProcess `json:"processes"`
	Withheld   int          `json:"withheld"` // GPUs and processes left out
	Errors     []string     `json:"errors,omitempty"`
}

// GPUSample mirrors collectors.GPUSample on the wire.
type GPUSample struct {
	Time time.Time `json:"time"`
	GPUs []GPUMem  `json:"gpus"`
}

// GPUMem mirrors collectors.GPUMem on the wire.
type GPUMem struct {
	Index       int      `json:"index"`
	BusID       string   `json:"bus_id,omitempty"`
	Name        string   `json:"name,omitempty"`
	Vendor      string   `json:"vendor"`
	UsedBytes   *uint64  `json:"vram_used_bytes"`
	TotalBytes  *uint64  `json:"vram_total_bytes"`
	UsedPercent *float64 `json:"vram_used_percent,omitempty"`
	Card        string   `json:"card,omitempty"`
	MIG         string   `json:"mig,omitempty"`
	Source      string   `json:"source"`
}

// GPUProcess mirrors collectors.GPUProcess on the wire.
type GPUProcess struct {
	Pid          int       `json:"pid"`
	Name         string    `json:"name,omitempty"`
	GPU          string    `json:"gpu"`
	UsedBytes    *uint64   `json:"used_bytes"`
	MaxUsedBytes *uint64   `json:"max_used_bytes,omitempty"`
	Source       string    `json:"source"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
}

// Error is the body of every non-200 answer.
type Error struct {
	Error string `json:"error"`
}

// Duration is a time.Duration that reads and writes as "1h0m0s".
type Duration time.Duration

// Client talks to the agent over its unix socket. The zero value is not
// usable; see New.
type Client struct {
	// Socket is the path the client dials.
	Socket string
}
