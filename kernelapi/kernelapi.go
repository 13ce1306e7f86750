// Package kernelapi analyzes kernel-API call logs: the SGLang
// (`SGLANG_KERNEL_API_LOGLEVEL`) and FlashInfer (`FLASHINFER_LOGLEVEL`) logs,
// levels 1/3/5/10, as described in shared/reference/kernel-api-log.md. Those
// logs reach gigabytes in minutes at level 3, so the analyzer is a single
// streaming pass with constant memory: it keeps reusable byte buffers for the
// calls still open, the previous input shapes of each API, and bounded lists
// of findings, and turns bytes into strings only for what ends up in the
// report.
package kernelapi

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kcrash/kcrash/internal/gzcap"
)

// Report is the result of analyzing one or more kernel-API logs. Its
// JSON is the "kernel_api" object of SPEC §5.
type Report struct {
	Files          []string         `json:"files"`
	Format         string           `json:"format"` // "sglang", "flashinfer", "mixed"; "" when no call was found
	Level          int              `json:"level"`  // detected level (1,3,5,10); 0 when no call was found
	Calls          int64            `json:"calls"`
	LastCall       *Call            `json:"last_call"`
	UnfinishedCall *Call            `json:"unfinished_call"`
	FirstNonfinite *NonfiniteTensor `json:"first_nonfinite"`
	ShapeJumps     []ShapeJump      `json:"shape_jumps"`
	Exceptions     []Exception      `json:"exceptions"`
	DumpDirs       []DumpDir        `json:"dump_dirs"` // level-10 dirs left at inputs_saved (or exception)

	// UnfinishedCalls holds every call that started and never returned, one per
	// file and format at most (several processes can each die inside a call);
	// UnfinishedCall is the earliest of them.
	UnfinishedCalls []Call `json:"unfinished_calls,omitempty"`
	// LastCalls is each file's last call, in file order, when there are
	// several files (per-pid logs): LastCall is only the newest of them,
	// which may be a worker's that ended normally after another crashed.
	LastCalls []Call `json:"last_calls,omitempty"`
	// FirstStatsUnavailable is the first tensor whose level-5 statistics could
	// not be computed (`statistics=[unavailable: …]`, `[statistics error: …]`):
	// after an asynchronous device fault every `.item()` fails, so this brackets
	// the fault to the calls just before it.
	FirstStatsUnavailable *NonfiniteTensor `json:"first_stats_unavailable,omitempty"`
	// Totals: the lists above are bounded, these counts are not.
	ShapeJumpsTotal  int64 `json:"shape_jumps_total"`
	ExceptionsTotal  int64 `json:"exceptions_total"`
	NonfiniteTensors int64 `json:"nonfinite_tensors"`
	// Start and End are the first and last timestamps seen in all files (the
	// writer's local time, read in Options.Location).
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
	Lines int64      `json:"lines"`
	Bytes int64      `json:"bytes"`
	// Warnings are read errors after which the analysis went on with what was
	// read (a truncated .gz in a bundle is the common case).
	Warnings []string `json:"warnings,omitempty"`
}

// Call is one logged kernel-API call.
type Call struct {
	API    string     `json:"api"`
	Format string     `json:"format,omitempty"` // "sglang" or "flashinfer"
	Time   *time.Time `json:"time,omitempty"`
	// Pid comes from the file name (LOGDEST with %i) or a level-10 dump dir
	// name; the log lines themselves never carry one.
	Pid  int    `json:"pid,omitempty"`
	File string `json:"file"`
	Line int    `json:"line"`
	Args []Arg  `json:"args,omitempty"` // inputs, in log order (bounded)
	// Finished: the call reached `Output:` / `Output value:`. Always false at
	// level 1, where nothing is logged after a call.
	Finished bool `json:"finished"`
	// Exception is "<Type>: <first line of message>" when the call raised.
	Exception string `json:"exception,omitempty"`
	DumpDir   string `json:"dump_dir,omitempty"`
	// BeforeEnd is how long before the end of the log (the last timestamp in all
	// files, or Options.End) the call started; 1 s resolution.
	BeforeEnd time.Duration `json:"before_end_ns,omitempty"`
}

// Arg is one argument (or, with Name "return", return value) of a call; a
// tensor inside a tuple/list/dict is named after its container, "arg[1][0]".
type Arg struct {
	Name     string `json:"name"`
	Type     string `json:"type,omitempty"` // "Tensor", a class name; "" for a plain value
	Shape    string `json:"shape,omitempty"`
	Stride   string `json:"stride,omitempty"`
	Dtype    string `json:"dtype,omitempty"`
	Device   string `json:"device,omitempty"`
	Value    string `json:"value,omitempty"` // a scalar's repr, or an object's repr= summary
	NanCount int64  `json:"nan_count,omitempty"`
	InfCount int64  `json:"inf_count,omitempty"`
	Min      string `json:"min,omitempty"`
	Max      string `json:"max,omitempty"`
	Mean     string `json:"mean,omitempty"`
	Stats    string `json:"statistics,omitempty"` // "empty tensor", "unavailable: RuntimeError", "skipped: …"
}

// NonfiniteTensor is a tensor argument (or return value) and its call.
type NonfiniteTensor struct {
	Call Call `json:"call"`
	Arg  Arg  `json:"arg"`
}

// ShapeJump is a change of an input's shape between two consecutive calls of
// one API in one file (one process), e.g. M 1 → 288 when a prefill follows
// decodes. Line and File are those of the second call.
type ShapeJump struct {
	API  string     `json:"api"`
	Arg  string     `json:"arg"`
	From string     `json:"from"`
	To   string     `json:"to"`
	Dim  int        `json:"dim"` // first dimension that changed; -1 when the rank changed
	Line int        `json:"line"`
	File string     `json:"file"`
	Pid  int        `json:"pid,omitempty"`
	Time *time.Time `json:"time,omitempty"`
}

// Exception is an `SGLang Kernel API Exception:` record (FlashInfer logs none).
type Exception struct {
	API  string     `json:"api"`
	Type string     `json:"type,omitempty"`
	Text string     `json:"text"` // "<Type>: <message>", message lines joined by \n
	File string     `json:"file"`
	Line int        `json:"line"`
	Pid  int        `json:"pid,omitempty"`
	Time *time.Time `json:"time,omitempty"`
}

// DumpDir is a level-10 dump directory whose call never completed.
type DumpDir struct {
	Path  string `json:"path"`
	API   string `json:"api"`
	State string `json:"state"` // "inputs_saved" or "exception"
	// Source: "log" (from the Dumped/dumped-to lines, no outputs line
	// followed), "metadata" (execution_status read from the directory).
	Source string `json:"source"`
}

// NamedReader is one open log; Name is used in the File fields and for the pid.
type NamedReader struct {
	Name   string
	Reader io.Reader
}

// Options tunes the analysis; the zero value is what Analyze uses.
type Options struct {
	// Location is the zone the timestamps were written in: the logger writes
	// the server's local time without a zone. nil means time.Local.
	Location *time.Location
	// End, when set, is the reference of BeforeEnd instead of the last
	// timestamp of the logs (for instance the time the run exited).
	End time.Time
	// DumpRoots are level-10 dump roots (SGLANG_KERNEL_API_DUMP_DIR,
	// FLASHINFER_DUMP_DIR) whose call directories are checked for metadata
	// still at inputs_saved or exception, whether or not the log names them.
	DumpRoots []string
	// SkipDumpCheck: do not look on disk for the dump directories the log
	// names (by default their metadata, when it exists, overrides what the log
	// says, and a directory whose metadata says completed is dropped).
	SkipDumpCheck bool
	// Calls, when set, is told about every call, not only the few the report
	// keeps (kcrash diff aligns whole call sequences).
	Calls CallSink
	// MaxDecompressed caps what a .gz log decompresses to (gzcap.Default
	// when 0): past it the analysis fails with a *gzcap.TooLarge.
	MaxDecompressed int64
}

// CallSink receives the calls of a log as the streaming pass reads them.
// Call comes once per call, in the order the calls were opened (over all
// files, the merge order), when its inputs have been read; Return comes when
// the call's outputs have been read or it raised, with the seq Call gave.
// A call that never returned gets no Return. The Call and slices are the
// sink's to keep.
type CallSink interface {
	Call(seq int64, c Call)
	Return(seq int64, outputs []Arg, exception string)
}

// Analyze reads the files (each may be .gz, read transparently; "-"
// is stdin), merging several per-pid files by time, streaming with constant
// memory.
func Analyze(paths []string) (*Report, error) {
	return Options{}.Analyze(paths)
}

// AnalyzeReaders is Analyze over open readers.
func AnalyzeReaders(inputs []NamedReader) (*Report, error) {
	return Options{}.AnalyzeReaders(inputs)
}

// Analyze is the package-level Analyze with options.
func (o Options) Analyze(paths []string) (*Report, error) {
	if len(paths) == 0 {
		return nil, errors.New("kernel-api log: no file given")
	}
	inputs := make([]NamedReader, 0, len(paths))
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	stdin := false
	for _, p := range paths {
		if p == "-" {
			if stdin {
				return nil, errors.New("kernel-api log: stdin given twice")
			}
			stdin = true
			inputs = append(inputs, NamedReader{Name: "-", Reader: os.Stdin})
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("kernel-api log: %w", err)
		}
		files = append(files, f)
		inputs = append(inputs, NamedReader{Name: p, Reader: f})
	}
	return o.AnalyzeReaders(inputs)
}

// AnalyzeReaders is the package-level AnalyzeReaders with options.
func (o Options) AnalyzeReaders(inputs []NamedReader) (*Report, error) {
	if len(inputs) == 0 {
		return nil, errors.New("kernel-api log: no input given")
	}
	// excFirst never grows past its capacity: excCur points into it.
	a := &analyzer{opts: o, loc: o.Location, excFirst: make([]Exception, 0, maxExcFirst)}
	if a.loc == nil {
		a.loc = time.Local
	}
	a.rep = &Report{
		Files:      make([]string, 0, len(inputs)),
		ShapeJumps: []ShapeJump{},
		Exceptions: []Exception{},
		DumpDirs:   []DumpDir{},
	}
	// Several files share a memory budget for their read buffers so that a
	// directory of per-pid logs stays within constant memory too.
	bufSize := (8 << 20) / len(inputs)
	bufSize = max(64<<10, min(bufSize, 1<<20))
	streams := make([]*stream, 0, len(inputs))
	for _, in := range inputs {
		s, err := newStream(in, bufSize, o.MaxDecompressed)
		if s != nil {
			s.an = a
		}
		if err != nil {
			for _, t := range streams {
				t.close()
			}
			return nil, err
		}
		streams = append(streams, s)
		a.rep.Files = append(a.rep.Files, in.Name)
	}
	defer func() {
		for _, s := range streams {
			s.close()
		}
	}()
	a.streams = streams
	a.run()
	for _, s := range streams {
		if gzcap.IsTooLarge(s.err) {
			return nil, s.err
		}
	}
	a.finish()
	return a.rep, nil
}

// Relocate rewrites every file and line the report cites through where:
// the run's log files become the bundle's copy of them. A reference where
// reports false for keeps its file and line.
func (r *Report) Relocate(where func(file string, line int) (string, int, bool)) {
	if r == nil {
		return
	}
	fix := func(file *string, line *int) {
		if f, l, ok := where(*file, *line); ok {
			*file, *line = f, l
		}
	}
	call := func(c *Call) {
		if c != nil {
			fix(&c.File, &c.Line)
		}
	}
	call(r.LastCall)
	call(r.UnfinishedCall)
	for i := range r.UnfinishedCalls {
		call(&r.UnfinishedCalls[i])
	}
	for i := range r.LastCalls {
		call(&r.LastCalls[i])
	}
	if r.FirstNonfinite != nil {
		call(&r.FirstNonfinite.Call)
	}
	if r.FirstStatsUnavailable != nil {
		call(&r.FirstStatsUnavailable.Call)
	}
	for i := range r.ShapeJumps {
		fix(&r.ShapeJumps[i].File, &r.ShapeJumps[i].Line)
	}
	for i := range r.Exceptions {
		fix(&r.Exceptions[i].File, &r.Exceptions[i].Line)
	}
}

// HasPid says whether one of the logs is that process's own (a per-pid file).
func (r *Report) HasPid(pid int) bool {
	if r == nil || pid == 0 {
		return false
	}
	for _, c := range r.LastCalls {
		if c.Pid == pid {
			return true
		}
	}
	return false
}

// ForPid is the report as that process's log tells it: LastCall is its last
// call, UnfinishedCall its call that never returned (nil when it has none;
// the others stay in UnfinishedCalls, its own first). Per-pid logs of
// several workers end at different times, and the newest line over all of
// them is most often a worker's that ended normally. The receiver is not
// changed; without a log of that pid it is returned as is.
func (r *Report) ForPid(pid int) *Report {
	if !r.HasPid(pid) {
		return r
	}
	v := *r
	for i := range r.LastCalls {
		if r.LastCalls[i].Pid == pid {
			c := r.LastCalls[i]
			v.LastCall = &c
		}
	}
	v.UnfinishedCall = nil
	v.UnfinishedCalls = nil
	for i, c := range r.UnfinishedCalls {
		if c.Pid == pid && v.UnfinishedCall == nil {
			u := r.UnfinishedCalls[i]
			v.UnfinishedCall = &u
			v.UnfinishedCalls = append([]Call{u}, v.UnfinishedCalls...)
			continue
		}
		v.UnfinishedCalls = append(v.UnfinishedCalls, c)
	}
	return &v
}
