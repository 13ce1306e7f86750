// Package detail names the finding details that are read outside the code
// that writes them, each with the type it is read as. A finding's details stay
// a JSON object of free-form keys (signatures add their own, and a named group
// of a signature holds a number or a string depending on what it matched), so
// manifest.json is what it was; what these types add is that a reader cannot
// misspell a key or read it as the wrong type: evidence.Details has one
// accessor a type (Text, Int, Bool) and takes only keys of that type.
package detail

// Text is a key read as text. Whatever scalar was written (a signature's named
// group of digits is an int64) reads as its decimal form.
type Text string

// Int is a key written as an int64 and read as a number.
type Int string

// Bool is a key written as a bool.
type Bool string

// How a finding counts. Written by triage's log scanner (signatures.yaml) and
// kernlog's Xid catalog; read by the verdict, summary.md and kcrash merge.
const (
	Signature   Text = "signature"    // the signature that matched a log line
	Role        Text = "role"         // kernlog's role of an Xid: cause, consequence, info
	VerdictRole Text = "verdict_role" // triage's role of the finding in the verdict
	Symptom     Bool = "symptom"      // the line only reports that something else failed
	Truncated   Bool = "truncated"    // a traceback cut off by the end of the log
	Vendor      Text = "vendor"       // amd, nvidia
	Runtime     Text = "runtime"      // CUDA, HIP (as logged)
	Framework   Text = "framework"    // triton, xla, sglang, ...
	Scheduler   Text = "scheduler"    // slurm, kubernetes
	Via         Text = "via"          // what reported a device assert: NCCL WARN, the watchdog
	Arch        Text = "arch"         // a GPU architecture the line names: sm_90, gfx942
	Peer        Text = "peer"         // the remote end of a lost NCCL socket: host<port>
	GPUName     Text = "gpu_name"     // a GPU's product name the line gives
	Subsystem   Text = "subsystem"    // the part of a library that failed: nvls
	Family      Text = "family"       // a failure family a signature belongs to: graph_capture
	Config      Text = "config"       // the configuration model a validation error names: ModelConfig
	NodeIP      Text = "node_ip"      // the node a Ray report names
	Used        Text = "used"         // memory in use, as the report prints it
	ExitCode    Text = "exit_code"    // an exit code a scheduler reports
)

// faulthandler dumps (the log scanner).
const ThreadsDumped Int = "threads_dumped" // how many threads' stacks the dump holds

// amdgpu VM faults (kernlog).
const (
	VMID  Int = "vmid"  // 0 is the kernel driver's own VM, never a process's
	PASID Int = "pasid" // the process address space; 0 with VMID 0
)

// NVIDIA Xids (kernlog).
const (
	Description Text = "description" // the catalog's description of the Xid
	Meaning     Text = "meaning"     // what the Xid's message says, when not catalogued
	Action      Text = "action"      // NVIDIA's recommended recovery action
	CausedByXid Int  = "caused_by_xid"
	NamedCause  Text = "named_cause" // set by triage when it promotes the cause an Xid names
)

// Host OOM kills (kernlog's OOM report; collectors tie them to the run by memcg).
const (
	Victim    Text = "victim"
	AnonRSSKB Int  = "anon_rss_kb"
	Scope     Text = "scope" // "memcg" when the kill was at a cgroup's limit
	TaskMemcg Text = "task_memcg"
	Memcg     Text = "memcg"
)

// Kernel lines repeated within a record (kernlog, collectors' kmsg reader).
const (
	Repeat   Int = "repeat"
	LastLine Int = "last_line"
)

// GPU faults and runtime errors (kernlog, signatures).
const (
	Reason      Text = "reason"
	Status      Text = "status"
	Process     Text = "process"
	UTCL2Client Text = "utcl2_client"
	Call        Text = "call" // the BLAS call that failed
	Message     Text = "message"
	Signal      Text = "signal"
	Code        Text = "code"
)

// Device-side asserts (triage's log scanner).
const (
	AssertFile Text = "assert_file"
	AssertLine Text = "assert_line"
	Function   Text = "function"
	Assertion  Text = "assertion"
	Count      Text = "count"
)

// Python exceptions and faulthandler dumps (triage's log scanner).
const (
	Exception Text = "exception"
	FrameFile Text = "frame_file"
	FrameLine Text = "frame_line"
	FrameFunc Text = "frame_func"
)

// GPU out of memory (signatures; the _bytes keys are the scanner's parse of
// the sizes).
const (
	Requested                Text = "requested"
	RequestedBytes           Int  = "requested_bytes"
	Free                     Text = "free"
	Total                    Text = "total"
	TotalBytes               Int  = "total_bytes"
	ReservedUnallocatedBytes Int  = "reserved_unallocated_bytes"
	Required                 Text = "required" // a Triton kernel's on-chip need
	Resource                 Text = "resource"
	Limit                    Text = "limit"
)

// Non-finite tensors (triage, from the kernel-API log).
const (
	API      Text = "api"
	Arg      Text = "arg"
	NanCount Text = "nan_count"
	InfCount Text = "inf_count"
)

// Collective timeouts (signatures).
const (
	Collective Text = "collective"
	Rank       Text = "rank"
	Seq        Text = "seq"
	RanMs      Text = "ran_ms"
	TimeoutMs  Text = "timeout_ms"
)

// Build problems (collectors' software collector; read by triage's next steps).
const (
	SoftwareIssue Text = "software_issue" // software.IssueStaleBuild, ...
	Package       Text = "package"        // the Python distribution concerned
	Library       Text = "library"        // the mapped file concerned
)
