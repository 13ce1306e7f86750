// Package evidence is the data model shared by collectors, parsers and triage:
// findings, verdict kinds and the processes of a run. It has no behaviour of its
// own so that every other package can depend on it without cycles.
package evidence

import "time"

// Kind is one of the stable verdict strings of SPEC §5. Scripts and dashboards
// key on these, so they never change spelling.
type Kind string

const (
	GPUPageFault           Kind = "gpu_page_fault"
	GPUIllegalMemoryAccess Kind = "gpu_illegal_memory_access"
	GPUDeviceAssert        Kind = "gpu_device_assert"
	GPUArchMismatch        Kind = "gpu_arch_mismatch" // the program holds no kernel built for this GPU
	GPUOOM                 Kind = "gpu_oom"
	HostOOM                Kind = "host_oom"
	GPUHardwareError       Kind = "gpu_hardware_error"
	GPUHang                Kind = "gpu_hang"
	CollectiveTimeout      Kind = "collective_timeout"
	NumericalNonfinite     Kind = "numerical_nonfinite"
	NativeCrash            Kind = "native_crash"
	PythonException        Kind = "python_exception"
	Hang                   Kind = "hang"
	Killed                 Kind = "killed"
	CleanExit              Kind = "clean_exit"
	Unknown                Kind = "unknown"
)

// Kinds lists every verdict kind, in the order SPEC §5 gives them.
var Kinds = []Kind{GPUPageFault, GPUIllegalMemoryAccess, GPUDeviceAssert, GPUArchMismatch, GPUOOM, HostOOM,
	GPUHardwareError, GPUHang, CollectiveTimeout, NumericalNonfinite, NativeCrash,
	PythonException, Hang, Killed, CleanExit, Unknown}

// Source names where a finding was read (SPEC §5).
const (
	SourceDmesg     = "dmesg"
	SourceLog       = "log"
	SourceKernelAPI = "kernel-api-log"
	SourceSMI       = "smi"
	SourceExit      = "exit"
	SourceCgroup    = "cgroup"
	SourceScheduler = "scheduler"
	SourceSoftware  = "software" // software.json: a stale or mismatched build
)

// Unseen is a source of evidence kcrash could not read: said in the bundle
// with the reason and what would let a next run read it, never counted as
// evidence itself.
type Unseen struct {
	Source string `json:"source"` // "kernel messages"
	Why    string `json:"why"`
	Fix    string `json:"fix,omitempty"`
}

// Finding is one piece of evidence, as SPEC §5 prints it. Zero-valued optional
// fields are omitted from JSON.
type Finding struct {
	Kind    Kind       `json:"kind"`
	Source  string     `json:"source"`
	File    string     `json:"file,omitempty"` // the file inside a bundle or on disk the line came from
	Line    int        `json:"line,omitempty"` // 1-based line number in File
	Text    string     `json:"text"`
	Time    *time.Time `json:"time,omitempty"`
	Pid     int        `json:"pid,omitempty"`
	GPU     string     `json:"gpu,omitempty"`
	Address string     `json:"address,omitempty"`
	Xid     int        `json:"xid,omitempty"`
	Details Details    `json:"details,omitempty"`
	// Attribution says how the finding is tied to this run ("pid-in-tree",
	// "device-in-window", "unrelated"...); empty for findings from the run's own output.
	Attribution string `json:"attribution,omitempty"`
}

// Process is one member of a supervised process tree, alive or already gone.
type Process struct {
	Pid       int32     `json:"pid"`
	PPid      int32     `json:"ppid"`
	Name      string    `json:"name"`
	Cmdline   []string  `json:"cmdline,omitempty"`
	StartTime time.Time `json:"start_time"`
	RSSBytes  uint64    `json:"rss_bytes"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Exited    bool      `json:"exited"`
	// How it ended, when the kernel's process events said (root only): a
	// worker's SIGSEGV or SIGKILL, seen though nobody waited for it.
	ExitCode   *int   `json:"exit_code,omitempty"`
	ExitSignal string `json:"exit_signal,omitempty"`
	CoreDumped bool   `json:"core_dumped,omitempty"`
}
