package triage

// Kernel-API log analysis: the SGLang (`SGLANG_KERNEL_API_LOGLEVEL`) and
// FlashInfer (`FLASHINFER_LOGLEVEL`) call logs, levels 1/3/5/10, as described in
// shared/reference/kernel-api-log.md. Those logs reach gigabytes in minutes at
// level 3, so the analyzer is a single streaming pass with constant memory: it
// keeps reusable byte buffers for the calls still open, the previous input
// shapes of each API, and bounded lists of findings, and turns bytes into
// strings only for what ends up in the report.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// KernelAPIReport is the result of analyzing one or more kernel-API logs. Its
// JSON is the "kernel_api" object of SPEC §5.
type KernelAPIReport struct {
	Files          []string         `json:"files"`
	Format         string           `json:"format"` // "sglang", "flashinfer", "mixed"; "" when no call was found
	Level          int              `json:"level"`  // detected level (1,3,5,10); 0 when no call was found
	Calls          int64            `json:"calls"`
	LastCall       *APICall         `json:"last_call"`
	UnfinishedCall *APICall         `json:"unfinished_call"`
	FirstNonfinite *NonfiniteTensor `json:"first_nonfinite"`
	ShapeJumps     []ShapeJump      `json:"shape_jumps"`
	Exceptions     []APIException   `json:"exceptions"`
	DumpDirs       []DumpDir        `json:"dump_dirs"` // level-10 dirs left at inputs_saved (or exception)

	// UnfinishedCalls holds every call that started and never returned, one per
	// file and format at most (several processes can each die inside a call);
	// UnfinishedCall is the earliest of them.
	UnfinishedCalls []APICall `json:"unfinished_calls,omitempty"`
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
	// writer's local time, read in KernelAPIOptions.Location).
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
	Lines int64      `json:"lines"`
	Bytes int64      `json:"bytes"`
	// Warnings are read errors after which the analysis went on with what was
	// read (a truncated .gz in a bundle is the common case).
	Warnings []string `json:"warnings,omitempty"`
}

// APICall is one logged kernel-API call.
type APICall struct {
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
	// files, or KernelAPIOptions.End) the call started; 1 s resolution.
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
	Call APICall `json:"call"`
	Arg  Arg     `json:"arg"`
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

// APIException is an `SGLang Kernel API Exception:` record (FlashInfer logs none).
type APIException struct {
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

// KernelAPIOptions tunes the analysis; the zero value is what AnalyzeKernelAPI uses.
type KernelAPIOptions struct {
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
}

// AnalyzeKernelAPI reads the files (each may be .gz, read transparently; "-"
// is stdin), merging several per-pid files by time, streaming with constant
// memory.
func AnalyzeKernelAPI(paths []string) (*KernelAPIReport, error) {
	return KernelAPIOptions{}.Analyze(paths)
}

// AnalyzeKernelAPIReaders is AnalyzeKernelAPI over open readers.
func AnalyzeKernelAPIReaders(inputs []NamedReader) (*KernelAPIReport, error) {
	return KernelAPIOptions{}.AnalyzeReaders(inputs)
}

// Analyze is AnalyzeKernelAPI with options.
func (o KernelAPIOptions) Analyze(paths []string) (*KernelAPIReport, error) {
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

// AnalyzeReaders is AnalyzeKernelAPIReaders with options.
func (o KernelAPIOptions) AnalyzeReaders(inputs []NamedReader) (*KernelAPIReport, error) {
	if len(inputs) == 0 {
		return nil, errors.New("kernel-api log: no input given")
	}
	// excFirst never grows past its capacity: excCur points into it.
	a := &kaAnalyzer{opts: o, loc: o.Location, excFirst: make([]APIException, 0, kaMaxExcFirst)}
	if a.loc == nil {
		a.loc = time.Local
	}
	a.rep = &KernelAPIReport{
		Files:      make([]string, 0, len(inputs)),
		ShapeJumps: []ShapeJump{},
		Exceptions: []APIException{},
		DumpDirs:   []DumpDir{},
	}
	// Several files share a memory budget for their read buffers so that a
	// directory of per-pid logs stays within constant memory too.
	bufSize := (8 << 20) / len(inputs)
	bufSize = max(64<<10, min(bufSize, 1<<20))
	streams := make([]*kaStream, 0, len(inputs))
	for _, in := range inputs {
		s, err := newKAStream(in, bufSize)
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
	a.finish()
	return a.rep, nil
}

// ---------------------------------------------------------------------------
// Limits. They bound memory whatever the input; the real logs stay far below.

const (
	kaStackDepth    = 16   // open (nested, or never-closed) calls kept per file and format
	kaMaxArgs       = 32   // arguments kept per call (inputs; outputs have their own)
	kaMaxOut        = 8    // return-value tensors kept per call
	kaMaxField      = 256  // bytes kept of one field value (shape, repr, …)
	kaMaxAPIName    = 512  // bytes kept of an API name
	kaMaxAPIs       = 1024 // APIs tracked for shape jumps, over all files
	kaMaxShape      = 128  // bytes of a shape kept for comparison
	kaMaxJumps      = 16   // the last shape jumps are reported
	kaMaxExcFirst   = 8    // the first exceptions …
	kaMaxExcLast    = 8    // … and the last ones are reported
	kaMaxExcLines   = 16   // lines kept of one exception message
	kaMaxExcBytes   = 2048 // bytes kept of one exception message
	kaMaxDumpDirs   = 64   // dump dirs reported
	kaMaxDumpScan   = 100000
	kaMaxMetaBytes  = 4 << 20
	kaMaxNameDigits = 7 // pid_max is at most 2^22
)

const (
	fmtSGLang = iota
	fmtFlashInfer
	nFormats
)

var formatNames = [nFormats]string{"sglang", "flashinfer"}

// Sections of a call record.
const (
	sectNone = iota
	sectIn   // Positional input arguments / Keyword input arguments / Default parameters
	sectOut  // Output: / Output value:
)

// tsKey packs a `YYYY-MM-DD HH:MM:SS` timestamp into an int64 that orders like
// the time it names, so that the merge never builds a time.Time.
type tsKey int64

// ---------------------------------------------------------------------------
// Per-call buffers, reused: a level-3 log has millions of calls and only a
// handful of them are reported.

type kaElem struct {
	name, typ, value             []byte
	shape, stride, dtype, device []byte
	min, max, mean, stats        []byte
	nan, inf                     int64
	statsBad                     bool
}

func (e *kaElem) reset() {
	e.name, e.typ, e.value = e.name[:0], e.typ[:0], e.value[:0]
	e.shape, e.stride, e.dtype, e.device = e.shape[:0], e.stride[:0], e.dtype[:0], e.device[:0]
	e.min, e.max, e.mean, e.stats = e.min[:0], e.max[:0], e.mean[:0], e.stats[:0]
	e.nan, e.inf, e.statsBad = 0, 0, false
}

type kaCall struct {
	format   int
	api      []byte
	key      tsKey
	hasTS    bool
	line     int64
	seq      int64 // order in which calls were opened, over all files
	in       [kaMaxArgs]kaElem
	nIn      int
	out      [kaMaxOut]kaElem
	nOut     int
	finished bool
	exc      []byte
	dumpDir  []byte
	dumpDone bool
	onStack  bool
	free     bool
}

func (c *kaCall) reset() {
	c.api = c.api[:0]
	c.key, c.hasTS, c.line, c.seq = 0, false, 0, 0
	c.nIn, c.nOut = 0, 0
	c.finished = false
	c.exc = c.exc[:0]
	c.dumpDir = c.dumpDir[:0]
	c.dumpDone = false
}

// kaStack is a ring: at level 1 nothing ever closes a call, so the oldest
// entries fall off the bottom.
type kaStack struct {
	s     [kaStackDepth]*kaCall
	start int
	n     int
}

func (st *kaStack) top() *kaCall {
	if st.n == 0 {
		return nil
	}
	return st.s[(st.start+st.n-1)%kaStackDepth]
}

// at returns the i-th entry from the top (0 = top).
func (st *kaStack) at(i int) *kaCall {
	return st.s[(st.start+st.n-1-i+kaStackDepth)%kaStackDepth]
}

type kaShapes struct {
	names  [kaMaxArgs][]byte
	shapes [kaMaxArgs][]byte
	n      int
}

// ---------------------------------------------------------------------------

type kaStream struct {
	an     *kaAnalyzer
	name   string
	pid    int
	br     *bufio.Reader
	closer io.Closer
	lineNo int64
	bytes  int64
	done   bool
	err    error

	// The call header read ahead: the merge needs the next call's time before
	// it lets this file go on.
	hasNext  bool
	nextFmt  int
	nextKey  tsKey
	nextTS   bool
	nextAPI  []byte
	nextLine int64

	stacks  [nFormats]kaStack
	pool    []*kaCall
	level   [nFormats]int
	last    *kaCall // the last call opened in this file
	recCall *kaCall // the call whose record is being read
	lastFmt int

	sect     int
	sectFmt  int
	inCall   *kaCall // inputs being read for this call
	outCall  *kaCall // outputs being read for this call
	cur      *kaElem
	topKey   []byte
	needVal  bool // FlashInfer: `  arg[0]:` seen, the value comes on the next line
	excCur   *APIException
	excLines int

	pendingFIDump []byte
	apis          map[string]*kaShapes
	nameBuf       []byte
}

func newKAStream(in NamedReader, bufSize int) (*kaStream, error) {
	s := &kaStream{name: in.Name, pid: pidFromName(in.Name), apis: map[string]*kaShapes{}}
	// A small log gets a small buffer: bundles carry many short files, and
	// the buffer is most of the analyzer's memory.
	rawSize := bufSize
	if n := sizeHint(in.Reader); n >= 0 && n < int64(bufSize) {
		rawSize = max(int(n)+1, 4096)
	}
	br := bufio.NewReaderSize(in.Reader, rawSize)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("kernel-api log %s: %w", in.Name, err)
		}
		s.closer = zr
		br = bufio.NewReaderSize(zr, bufSize)
	}
	s.br = br
	return s, nil
}

// sizeHint returns how many bytes r holds, or -1 when that is not known.
func sizeHint(r io.Reader) int64 {
	switch r := r.(type) {
	case interface{ Len() int }:
		return int64(r.Len())
	case *os.File:
		if st, err := r.Stat(); err == nil && st.Mode().IsRegular() {
			if off, err := r.Seek(0, io.SeekCurrent); err == nil {
				return max(st.Size()-off, 0)
			}
		}
	}
	return -1
}

func (s *kaStream) close() {
	if s.closer != nil {
		s.closer.Close()
		s.closer = nil
	}
}

func (s *kaStream) alloc() *kaCall {
	if n := len(s.pool); n > 0 {
		c := s.pool[n-1]
		s.pool = s.pool[:n-1]
		c.free = false
		c.reset()
		return c
	}
	return &kaCall{}
}

// release returns c to the pool once nothing refers to it any more; every
// place that drops a reference calls it.
func (s *kaStream) release(c *kaCall) {
	if c == nil || c.free || c.onStack || c == s.last || c == s.outCall || c == s.inCall || c == s.recCall {
		return
	}
	s.an.forget(c)
	c.free = true
	s.pool = append(s.pool, c)
}

func (s *kaStream) push(c *kaCall) {
	st := &s.stacks[c.format]
	if st.n == kaStackDepth {
		old := st.s[st.start]
		st.start = (st.start + 1) % kaStackDepth
		st.n--
		old.onStack = false
		s.release(old)
	}
	st.s[(st.start+st.n)%kaStackDepth] = c
	st.n++
	c.onStack = true
}

// pop leaves releasing to the caller, which may still keep the call.
func (s *kaStream) pop(format int) *kaCall {
	st := &s.stacks[format]
	if st.n == 0 {
		return nil
	}
	c := st.top()
	st.n--
	c.onStack = false
	return c
}

// ---------------------------------------------------------------------------

type kaJump struct {
	api, arg, from, to []byte
	line               int64
	key                tsKey
	hasTS              bool
	s                  *kaStream
}

type kaAnalyzer struct {
	opts    KernelAPIOptions
	loc     *time.Location
	rep     *KernelAPIReport
	streams []*kaStream
	seq     int64

	minKey, maxKey tsKey
	hasTime        bool

	jumps [kaMaxJumps]kaJump

	excFirst []APIException
	excLast  [kaMaxExcLast]APIException

	formats [nFormats]bool
	apis    int

	// The calls behind FirstNonfinite and FirstStatsUnavailable, while they
	// are still open: the report must show how they ended, not how they stood
	// when the tensor was read.
	watch [2]*kaCall
}

func (a *kaAnalyzer) forget(c *kaCall) {
	for i := range a.watch {
		if a.watch[i] == c {
			a.watch[i] = nil
		}
	}
}

// ended copies a watched call's outcome into the report.
func (a *kaAnalyzer) ended(c *kaCall) {
	for i, w := range a.watch {
		if w != c || c == nil {
			continue
		}
		var r *APICall
		if i == 0 && a.rep.FirstNonfinite != nil {
			r = &a.rep.FirstNonfinite.Call
		} else if i == 1 && a.rep.FirstStatsUnavailable != nil {
			r = &a.rep.FirstStatsUnavailable.Call
		}
		if r != nil {
			r.Finished = c.finished
			r.Exception = string(c.exc)
		}
	}
}

func (a *kaAnalyzer) run() {
	for _, s := range a.streams {
		s.advance(a) // whatever precedes the first call
	}
	for {
		// Linear scan: a handful of per-pid files is the normal case, and
		// the cost is per call, not per line.
		var best *kaStream
		for _, s := range a.streams {
			if !s.hasNext {
				continue
			}
			if best == nil || (s.nextTS && (!best.nextTS || s.nextKey < best.nextKey)) {
				best = s
			}
		}
		if best == nil {
			return
		}
		best.open(a)
		best.advance(a)
	}
}

// open turns the header read ahead into an open call.
func (s *kaStream) open(a *kaAnalyzer) {
	a.seq++
	a.rep.Calls++
	oldLast, oldOut, oldRec := s.last, s.outCall, s.recCall
	s.last, s.outCall, s.recCall, s.inCall = nil, nil, nil, nil
	s.release(oldLast)
	s.release(oldOut)
	s.release(oldRec)
	c := s.alloc()
	c.format = s.nextFmt
	c.api = append(c.api, s.nextAPI...)
	c.key, c.hasTS = s.nextKey, s.nextTS
	c.line = s.nextLine
	c.seq = a.seq
	if c.format == fmtFlashInfer && len(s.pendingFIDump) > 0 {
		// FlashInfer dumps the inputs before it logs the call.
		c.dumpDir = append(c.dumpDir, s.pendingFIDump...)
		s.pendingFIDump = s.pendingFIDump[:0]
	}
	s.last = c
	s.recCall = c
	s.lastFmt = c.format
	s.level[c.format] = max(s.level[c.format], 1)
	a.formats[c.format] = true
	s.push(c)
	s.hasNext = false
	s.sect = sectNone
	s.cur = nil
	s.needVal = false
}

// advance reads lines until the next call header (kept as s.next*) or EOF.
func (s *kaStream) advance(a *kaAnalyzer) {
	if s.done {
		return
	}
	for {
		ln, err := s.br.ReadSlice('\n')
		if len(ln) > 0 {
			s.lineNo++
			s.bytes += int64(len(ln))
			hdr := s.line(a, trimEOL(ln))
			if err == bufio.ErrBufferFull {
				// A line longer than the buffer: its start was analyzed
				// like any line, the rest is skipped.
				err = s.skipRest()
			}
			if hdr {
				if err != nil {
					s.eof(a, err)
				}
				return
			}
		}
		if err != nil {
			s.eof(a, err)
			return
		}
	}
}

func (s *kaStream) skipRest() error {
	for {
		ln, err := s.br.ReadSlice('\n')
		s.bytes += int64(len(ln))
		if err != bufio.ErrBufferFull {
			return err
		}
	}
}

func (s *kaStream) eof(a *kaAnalyzer, err error) {
	if s.done {
		return
	}
	s.done = true
	s.endRecord(a)
	if err != io.EOF {
		s.err = err
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

func isSep(b []byte, c byte) bool {
	if len(b) != 80 {
		return false
	}
	for _, x := range b {
		if x != c {
			return false
		}
	}
	return true
}

// parseTS reads `YYYY-MM-DD HH:MM:SS`.
func parseTS(b []byte) (tsKey, bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || b[10] != ' ' || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	var v [6]int64
	pos := [6][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}}
	for i, p := range pos {
		n := int64(0)
		for _, c := range b[p[0]:p[1]] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int64(c-'0')
		}
		v[i] = n
	}
	if v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60 {
		return 0, false
	}
	return tsKey(((((v[0]*13+v[1])*32+v[2])*24+v[3])*60+v[4])*61 + v[5]), true
}

func (a *kaAnalyzer) timeOf(k tsKey) time.Time {
	v := int64(k)
	sec := v % 61
	v /= 61
	mi := v % 60
	v /= 60
	h := v % 24
	v /= 24
	d := v % 32
	v /= 32
	mo := v % 13
	y := v / 13
	return time.Date(int(y), time.Month(mo), int(d), int(h), int(mi), int(sec), 0, a.loc)
}

func (a *kaAnalyzer) seeTime(k tsKey) {
	if !a.hasTime {
		a.minKey, a.maxKey, a.hasTime = k, k, true
		return
	}
	a.minKey = min(a.minKey, k)
	a.maxKey = max(a.maxKey, k)
}

const (
	pfxSGCall = "SGLang Kernel API Call: "
	pfxSGExc  = "SGLang Kernel API Exception: "
	pfxFICall = "FlashInfer API Call: "
	pfxFISys  = "FlashInfer API Logging - System Information"
)

// line handles one line; it returns true when the line is the next call's
// header, which ends the current record.
func (s *kaStream) line(a *kaAnalyzer, ln []byte) bool {
	if len(ln) == 0 {
		return false
	}
	if s.excCur != nil && !s.excContinue(a, ln) {
		return false
	}
	switch ln[0] {
	case ' ':
		s.indented(a, ln)
		return false
	case '[':
		if len(ln) < 22 || ln[20] != ']' || ln[21] != ' ' {
			return false
		}
		k, ok := parseTS(ln[1:20])
		if !ok {
			return false
		}
		rest := ln[22:]
		switch {
		case hasPrefix(rest, pfxSGCall):
			s.header(a, fmtSGLang, k, rest[len(pfxSGCall):])
			return true
		case hasPrefix(rest, pfxFICall):
			s.header(a, fmtFlashInfer, k, rest[len(pfxFICall):])
			return true
		case hasPrefix(rest, pfxSGExc):
			a.seeTime(k)
			s.exception(a, k, rest[len(pfxSGExc):])
		case hasPrefix(rest, pfxFISys):
			a.seeTime(k)
			a.formats[fmtFlashInfer] = true
		}
		return false
	case '=':
		if isSep(ln, '=') {
			s.endInputs(a)
			s.setSection(a, sectNone, s.sectFmt)
		}
		return false
	case 'P':
		if string(ln) == "Positional input arguments:" {
			s.beginInputs(a)
		}
		return false
	case 'K':
		if string(ln) == "Keyword input arguments:" {
			s.beginInputs(a)
		}
		return false
	case 'D':
		switch {
		case string(ln) == "Default parameters (not explicitly provided):":
			s.beginInputs(a)
		case hasPrefix(ln, "Dumped inputs to: "):
			s.dumpIn(a, fmtSGLang, ln[len("Dumped inputs to: "):])
		case hasPrefix(ln, "Dumped outputs to: "):
			s.dumpOut(a, fmtSGLang, ln[len("Dumped outputs to: "):])
		}
		return false
	case 'I':
		if hasPrefix(ln, "Inputs dumped to: ") {
			s.dumpIn(a, fmtFlashInfer, ln[len("Inputs dumped to: "):])
		}
		return false
	case 'O':
		switch {
		case string(ln) == "Output:":
			s.beginOutput(a, fmtSGLang)
		case string(ln) == "Output value:":
			s.beginOutput(a, fmtFlashInfer)
		case hasPrefix(ln, "Outputs dumped to: "):
			s.dumpOut(a, fmtFlashInfer, ln[len("Outputs dumped to: "):])
		}
		return false
	case 'T':
		if hasPrefix(ln, "Tensor dump skipped: ") {
			s.level[fmtSGLang] = max(s.level[fmtSGLang], 10)
		}
		return false
	case '(':
		if string(ln) == "(No explicit arguments)" {
			s.endInputs(a)
			s.level[fmtFlashInfer] = max(s.level[fmtFlashInfer], 3)
		}
		return false
	}
	return false
}

func (s *kaStream) header(a *kaAnalyzer, format int, k tsKey, api []byte) {
	s.endRecord(a)
	a.seeTime(k)
	if len(api) > kaMaxAPIName {
		api = api[:kaMaxAPIName]
	}
	s.hasNext = true
	s.nextFmt = format
	s.nextKey, s.nextTS = k, true
	s.nextAPI = append(s.nextAPI[:0], api...)
	s.nextLine = s.lineNo
}

// endRecord runs when the lines of the current call are over.
func (s *kaStream) endRecord(a *kaAnalyzer) {
	s.endExc()
	s.endInputs(a)
	s.closeElem(a)
	s.sect = sectNone
	s.needVal = false
}

func (s *kaStream) setSection(a *kaAnalyzer, sect, format int) {
	s.closeElem(a)
	s.sect, s.sectFmt = sect, format
	s.needVal = false
	s.topKey = s.topKey[:0]
}

func (s *kaStream) beginInputs(a *kaAnalyzer) {
	c := s.recCall
	if c == nil {
		s.setSection(a, sectNone, s.lastFmt)
		return
	}
	s.setSection(a, sectIn, c.format)
	s.inCall = c
	s.level[c.format] = max(s.level[c.format], 3)
}

// endInputs is where a call's input shapes are compared with the previous call
// of the same API: every input line has been read by then.
func (s *kaStream) endInputs(a *kaAnalyzer) {
	c := s.inCall
	if c == nil {
		return
	}
	s.closeElem(a)
	s.inCall = nil
	if s.sect == sectIn {
		s.sect = sectNone
	}
	defer s.release(c)
	sh := s.apis[string(c.api)]
	if sh == nil {
		if a.apis >= kaMaxAPIs {
			return
		}
		a.apis++
		sh = &kaShapes{}
		s.apis[string(c.api)] = sh
	}
	n := 0
	for i := 0; i < c.nIn; i++ {
		e := &c.in[i]
		if len(e.shape) == 0 {
			continue
		}
		for j := 0; j < sh.n; j++ {
			if bytes.Equal(sh.names[j], e.name) {
				if !bytes.Equal(sh.shapes[j], clip(e.shape, kaMaxShape)) {
					a.addJump(s, c, e.name, sh.shapes[j], e.shape)
				}
				break
			}
		}
	}
	// Only the previous call counts, so the stored set is replaced.
	for i := 0; i < c.nIn && n < kaMaxArgs; i++ {
		e := &c.in[i]
		if len(e.shape) == 0 {
			continue
		}
		sh.names[n] = append(sh.names[n][:0], e.name...)
		sh.shapes[n] = append(sh.shapes[n][:0], clip(e.shape, kaMaxShape)...)
		n++
	}
	sh.n = n
}

func (s *kaStream) beginOutput(a *kaAnalyzer, format int) {
	s.endInputs(a)
	s.closeElem(a)
	s.level[format] = max(s.level[format], 3)
	c := s.pop(format)
	old := s.outCall
	s.outCall = c
	s.release(old)
	if c != nil {
		c.finished = true
		a.ended(c)
	}
	s.setSection(a, sectOut, format)
	if c == nil {
		// Output of a call opened before the file starts (a rotated or
		// truncated log): nothing to attach it to.
		s.sect = sectNone
	}
}

func (s *kaStream) dumpIn(a *kaAnalyzer, format int, dir []byte) {
	s.endInputs(a)
	s.level[format] = max(s.level[format], 10)
	dir = clip(dir, kaMaxField*4)
	if s.pid == 0 {
		s.pid = pidFromDumpDir(dir)
	}
	if format == fmtFlashInfer {
		s.pendingFIDump = append(s.pendingFIDump[:0], dir...)
		return
	}
	if c := s.stacks[format].top(); c != nil {
		c.dumpDir = append(c.dumpDir[:0], dir...)
	}
}

func (s *kaStream) dumpOut(a *kaAnalyzer, format int, dir []byte) {
	s.endInputs(a)
	s.level[format] = max(s.level[format], 10)
	dir = clip(dir, kaMaxField*4)
	if c := s.outCall; c != nil && bytes.Equal(c.dumpDir, dir) {
		c.dumpDone = true
		return
	}
	st := &s.stacks[format]
	for i := 0; i < st.n; i++ {
		if c := st.at(i); bytes.Equal(c.dumpDir, dir) {
			c.dumpDone = true
			return
		}
	}
}

// exception handles `[ts] SGLang Kernel API Exception: <name> (<Type>: <msg>`.
func (s *kaStream) exception(a *kaAnalyzer, k tsKey, rest []byte) {
	s.endInputs(a)
	s.closeElem(a)
	s.sect = sectNone
	a.formats[fmtSGLang] = true
	s.level[fmtSGLang] = max(s.level[fmtSGLang], 1)
	name, text := rest, []byte(nil)
	if i := bytes.Index(rest, []byte(" (")); i >= 0 {
		name, text = rest[:i], rest[i+2:]
	}
	name = clip(name, kaMaxAPIName)
	typ := text
	if i := bytes.Index(text, []byte(": ")); i >= 0 {
		typ = text[:i]
	} else if n := len(typ); n > 0 && typ[n-1] == ')' {
		typ = typ[:n-1]
	}
	closed := false
	if n := len(text); n > 0 && text[n-1] == ')' {
		text, closed = text[:n-1], true
	}
	text = clip(text, kaMaxExcBytes)

	// The wrapper that raised is the innermost open call of that name; the
	// calls above it were left by the same exception.
	st := &s.stacks[fmtSGLang]
	var c *kaCall
	for i := 0; i < st.n; i++ {
		if bytes.Equal(st.at(i).api, name) {
			for j := 0; j < i; j++ {
				s.release(s.pop(fmtSGLang))
			}
			c = s.pop(fmtSGLang)
			break
		}
	}
	if c != nil {
		c.exc = append(c.exc[:0], clip(firstLine(text), kaMaxField)...)
		if len(c.dumpDir) > 0 && !c.dumpDone {
			a.addDump(DumpDir{Path: string(c.dumpDir), API: string(c.api), State: "exception", Source: "log"})
		}
		a.ended(c)
		s.release(c)
	}

	a.rep.ExceptionsTotal++
	t := a.timeOf(k)
	e := APIException{API: string(name), Type: string(clip(typ, 128)), Text: string(text),
		File: s.name, Line: int(s.lineNo), Pid: s.pid, Time: &t}
	if len(a.excFirst) < kaMaxExcFirst {
		a.excFirst = append(a.excFirst, e)
		s.excCur = &a.excFirst[len(a.excFirst)-1]
	} else {
		n := a.rep.ExceptionsTotal - kaMaxExcFirst - 1
		slot := &a.excLast[n%kaMaxExcLast]
		*slot = e
		s.excCur = slot
	}
	s.excLines = 1
	if closed {
		s.excCur = nil
	}
}

// excContinue takes the lines of a multi-line exception message; it returns
// true when ln is not part of the message and must be handled as usual.
func (s *kaStream) excContinue(a *kaAnalyzer, ln []byte) bool {
	if isSep(ln, '=') {
		s.excCur = nil
		return true
	}
	if ln[0] == '[' && len(ln) >= 22 && ln[20] == ']' {
		if _, ok := parseTS(ln[1:20]); ok {
			s.excCur = nil
			return true
		}
	}
	closed := false
	if n := len(ln); ln[n-1] == ')' {
		ln, closed = ln[:n-1], true
	}
	if s.excLines < kaMaxExcLines && len(s.excCur.Text)+len(ln) < kaMaxExcBytes && (len(ln) > 0 || !closed) {
		s.excCur.Text += "\n" + string(ln)
		s.excLines++
	}
	if closed {
		s.excCur = nil
	}
	return false
}

func (s *kaStream) endExc() { s.excCur = nil }

// ---------------------------------------------------------------------------
// Argument lines. SGLang: `  key=<first line>`, tensor fields at 6 spaces (12
// inside containers), items `[i] …`. FlashInfer: `  arg[i]:` / `  name=` /
// `  name= [DEFAULT]` with the value on the next lines, outputs at 2 spaces,
// items `[i]: …`. Indentation beyond "2 or more than 2" is not relied on:
// multi-line repr values can spill anywhere.

func (s *kaStream) indented(a *kaAnalyzer, ln []byte) {
	if s.sect == sectNone {
		return
	}
	n := 0
	for n < len(ln) && ln[n] == ' ' {
		n++
	}
	body := ln[n:]
	if len(body) == 0 {
		return
	}
	if len(body) == 1 && (body[0] == ')' || body[0] == ']' || body[0] == '}') {
		s.closeElem(a)
		return
	}
	if n == 2 {
		if s.sectFmt == fmtSGLang {
			eq := bytes.IndexByte(body, '=')
			if eq <= 0 {
				return
			}
			s.setTop(a, body[:eq])
			s.value(a, s.topKey, body[eq+1:])
			return
		}
		// FlashInfer
		if s.sect == sectOut {
			s.setTop(a, retName)
			s.value(a, s.topKey, body)
			return
		}
		switch {
		case body[len(body)-1] == ':':
			s.setTop(a, body[:len(body)-1])
		case bytes.HasSuffix(body, []byte("= [DEFAULT]")):
			s.setTop(a, body[:len(body)-len("= [DEFAULT]")])
		case body[len(body)-1] == '=':
			s.setTop(a, body[:len(body)-1])
		default:
			return
		}
		s.needVal = true
		return
	}
	if s.needVal {
		s.needVal = false
		s.value(a, s.topKey, body)
		return
	}
	switch body[0] {
	case '[':
		if len(body) > 1 && body[1] >= '0' && body[1] <= '9' {
			s.item(a, body)
			return
		}
		s.bracketStats(a, body)
		return
	case '\'':
		// SGLang dict item: 'key': <first line>
		if i := bytes.Index(body, []byte("': ")); i > 0 {
			s.nameBuf = append(append(append(append(s.nameBuf[:0], s.topKey...), '['), body[:i+1]...), ']')
			s.value(a, s.nameBuf, body[i+3:])
		}
		return
	}
	s.field(a, body)
}

var retName = []byte("return")

func (s *kaStream) setTop(a *kaAnalyzer, key []byte) {
	s.closeElem(a)
	s.topKey = append(s.topKey[:0], clip(key, 64)...)
	s.needVal = false
}

// item handles `[i] <first line>` (SGLang) and `[i]: <first line>` (FlashInfer).
func (s *kaStream) item(a *kaAnalyzer, body []byte) {
	j := bytes.IndexByte(body, ']')
	if j < 0 || j > 12 {
		return
	}
	rest := body[j+1:]
	if len(rest) > 0 && rest[0] == ':' {
		rest = rest[1:]
	}
	rest = bytes.TrimLeft(rest, " ")
	s.nameBuf = append(append(s.nameBuf[:0], s.topKey...), body[:j+1]...)
	s.value(a, s.nameBuf, rest)
}

// value starts an element from the first line of a value.
func (s *kaStream) value(a *kaAnalyzer, name, v []byte) {
	s.closeElem(a)
	if len(v) == 0 {
		return
	}
	switch {
	case string(v) == "(" || string(v) == "[" || string(v) == "{":
		return // a container: its items become elements
	case string(v) == "Tensor(":
		e := s.newElem(name)
		if e != nil {
			e.typ = append(e.typ, "Tensor"...)
		}
	case v[len(v)-1] == '(' && isIdent(v[:len(v)-1]):
		e := s.newElem(name)
		if e != nil {
			e.typ = append(e.typ, clip(v[:len(v)-1], 64)...)
		}
	default:
		e := s.newElem(name)
		if e != nil {
			e.value = append(e.value, clip(v, kaMaxField)...)
			s.closeElem(a)
		}
	}
}

func isIdent(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !(c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func (s *kaStream) newElem(name []byte) *kaElem {
	var e *kaElem
	switch s.sect {
	case sectIn:
		c := s.inCall
		if c == nil || c.nIn == kaMaxArgs {
			return nil
		}
		e = &c.in[c.nIn]
		c.nIn++
	case sectOut:
		c := s.outCall
		if c == nil || c.nOut == kaMaxOut {
			return nil
		}
		e = &c.out[c.nOut]
		c.nOut++
	default:
		return nil
	}
	e.reset()
	e.name = append(e.name, name...)
	s.cur = e
	return e
}

func (s *kaStream) field(a *kaAnalyzer, body []byte) {
	e := s.cur
	if e == nil {
		return
	}
	eq := bytes.IndexByte(body, '=')
	if eq <= 0 || eq > 16 {
		return
	}
	v := body[eq+1:]
	switch string(body[:eq]) {
	case "shape":
		e.shape = append(e.shape[:0], clip(v, kaMaxField)...)
	case "dtype":
		e.dtype = append(e.dtype[:0], clip(v, 64)...)
	case "device":
		e.device = append(e.device[:0], clip(v, 64)...)
	case "stride":
		e.stride = append(e.stride[:0], clip(v, kaMaxField)...)
	case "repr":
		e.value = append(e.value[:0], clip(v, kaMaxField)...)
	case "min":
		s.stat(&e.min, v)
	case "max":
		s.stat(&e.max, v)
	case "mean":
		s.stat(&e.mean, v)
	case "nan_count":
		s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
		e.nan = atoi(v)
	case "inf_count":
		s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
		e.inf = atoi(v)
	case "statistics":
		s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
		v = bytes.TrimSuffix(bytes.TrimPrefix(v, []byte("[")), []byte("]"))
		e.stats = append(e.stats[:0], clip(v, 128)...)
		e.statsBad = hasPrefix(v, "unavailable")
	}
}

func (s *kaStream) stat(dst *[]byte, v []byte) {
	s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
	*dst = append((*dst)[:0], clip(v, 32)...)
}

// bracketStats handles FlashInfer's `[statistics error: …]`,
// `[statistics skipped: …]` and `[stats deferred to GPU kernel: …]`.
func (s *kaStream) bracketStats(a *kaAnalyzer, body []byte) {
	e := s.cur
	if e == nil || !hasPrefix(body, "[stat") {
		return
	}
	s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
	v := bytes.TrimSuffix(body[1:], []byte("]"))
	e.stats = append(e.stats[:0], clip(v, 128)...)
	e.statsBad = hasPrefix(v, "statistics error")
}

func atoi(b []byte) int64 {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		if n > (1<<62)/10 {
			return n
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

// closeElem ends the element being read: only now are all its fields known.
func (s *kaStream) closeElem(a *kaAnalyzer) {
	e := s.cur
	if e == nil {
		return
	}
	s.cur = nil
	if e.nan <= 0 && e.inf <= 0 && !e.statsBad {
		return
	}
	c := s.inCall
	if s.sect == sectOut {
		c = s.outCall
	}
	if c == nil {
		return
	}
	if e.nan > 0 || e.inf > 0 {
		a.rep.NonfiniteTensors++
		if a.rep.FirstNonfinite == nil {
			a.rep.FirstNonfinite = &NonfiniteTensor{Call: a.call(s, c), Arg: argOf(e)}
			a.watch[0] = c
		}
	}
	if e.statsBad && a.rep.FirstStatsUnavailable == nil {
		a.rep.FirstStatsUnavailable = &NonfiniteTensor{Call: a.call(s, c), Arg: argOf(e)}
		a.watch[1] = c
	}
}

// ---------------------------------------------------------------------------
// Findings.

func (a *kaAnalyzer) addJump(s *kaStream, c *kaCall, name, from, to []byte) {
	j := &a.jumps[a.rep.ShapeJumpsTotal%kaMaxJumps]
	a.rep.ShapeJumpsTotal++
	j.api = append(j.api[:0], c.api...)
	j.arg = append(j.arg[:0], name...)
	j.from = append(j.from[:0], from...)
	j.to = append(j.to[:0], to...)
	j.line, j.key, j.hasTS, j.s = c.line, c.key, c.hasTS, s
}

func (a *kaAnalyzer) addDump(d DumpDir) {
	for _, x := range a.rep.DumpDirs {
		if x.Path == d.Path {
			return
		}
	}
	if len(a.rep.DumpDirs) >= kaMaxDumpDirs {
		// The newest matter most: the crash is at the end.
		copy(a.rep.DumpDirs, a.rep.DumpDirs[1:])
		a.rep.DumpDirs = a.rep.DumpDirs[:len(a.rep.DumpDirs)-1]
	}
	a.rep.DumpDirs = append(a.rep.DumpDirs, d)
}

func argOf(e *kaElem) Arg {
	return Arg{Name: string(e.name), Type: string(e.typ), Shape: string(e.shape), Stride: string(e.stride),
		Dtype: string(e.dtype), Device: string(e.device), Value: string(e.value),
		NanCount: e.nan, InfCount: e.inf, Min: string(e.min), Max: string(e.max), Mean: string(e.mean),
		Stats: string(e.stats)}
}

func (a *kaAnalyzer) call(s *kaStream, c *kaCall) APICall {
	r := APICall{API: string(c.api), Format: formatNames[c.format], Pid: s.pid, File: s.name, Line: int(c.line),
		Finished: c.finished, Exception: string(c.exc), DumpDir: string(c.dumpDir)}
	if c.hasTS {
		t := a.timeOf(c.key)
		r.Time = &t
	}
	if c.nIn > 0 {
		r.Args = make([]Arg, c.nIn)
		for i := 0; i < c.nIn; i++ {
			r.Args[i] = argOf(&c.in[i])
		}
	}
	return r
}

func (a *kaAnalyzer) finish() {
	rep := a.rep
	var last *kaStream
	for _, s := range a.streams {
		rep.Lines += s.lineNo
		rep.Bytes += s.bytes
		if s.err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: line %d: %v", s.name, s.lineNo, s.err))
		}
		for f := range nFormats {
			if a.formats[f] {
				rep.Level = max(rep.Level, normLevel(s.level[f]))
			}
		}
		if s.last != nil && (last == nil || s.last.seq > last.last.seq) {
			last = s
		}
	}
	switch {
	case a.formats[fmtSGLang] && a.formats[fmtFlashInfer]:
		rep.Format = "mixed"
	case a.formats[fmtSGLang]:
		rep.Format = "sglang"
	case a.formats[fmtFlashInfer]:
		rep.Format = "flashinfer"
	}
	if last != nil {
		c := a.call(last, last.last)
		rep.LastCall = &c
	}

	// A call still open at the end of a file logged at level ≥3 never
	// returned. The innermost open call of each file is the suspect there;
	// over files, the earliest is where the failure started.
	type cand struct {
		c   APICall
		key tsKey
		ts  bool
		seq int64
	}
	var cands []cand
	for _, s := range a.streams {
		for f := range nFormats {
			st := &s.stacks[f]
			if s.level[f] < 3 || st.n == 0 {
				continue
			}
			c := st.top()
			cands = append(cands, cand{a.call(s, c), c.key, c.hasTS, c.seq})
		}
		for f := range nFormats {
			st := &s.stacks[f]
			for i := st.n - 1; i >= 0; i-- {
				c := st.at(i)
				if len(c.dumpDir) > 0 && !c.dumpDone {
					a.addDump(DumpDir{Path: string(c.dumpDir), API: string(c.api), State: "inputs_saved", Source: "log"})
				}
			}
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].ts && cands[j].ts && cands[i].key != cands[j].key {
			return cands[i].key < cands[j].key
		}
		return cands[i].seq < cands[j].seq
	})
	for _, c := range cands {
		rep.UnfinishedCalls = append(rep.UnfinishedCalls, c.c)
	}
	if len(rep.UnfinishedCalls) > 0 {
		u := rep.UnfinishedCalls[0]
		rep.UnfinishedCall = &u
	}

	n := min(rep.ShapeJumpsTotal, kaMaxJumps)
	for i := rep.ShapeJumpsTotal - n; i < rep.ShapeJumpsTotal; i++ {
		j := &a.jumps[i%kaMaxJumps]
		sj := ShapeJump{API: string(j.api), Arg: string(j.arg), From: string(j.from), To: string(j.to),
			Dim: changedDim(j.from, j.to), Line: int(j.line), File: j.s.name, Pid: j.s.pid}
		if j.hasTS {
			t := a.timeOf(j.key)
			sj.Time = &t
		}
		rep.ShapeJumps = append(rep.ShapeJumps, sj)
	}

	rep.Exceptions = append(rep.Exceptions, a.excFirst...)
	if rest := rep.ExceptionsTotal - int64(len(a.excFirst)); rest > 0 {
		k := min(rest, kaMaxExcLast)
		for i := rest - k; i < rest; i++ {
			rep.Exceptions = append(rep.Exceptions, a.excLast[i%kaMaxExcLast])
		}
	}

	a.checkDumps()

	var end time.Time
	if a.hasTime {
		st, en := a.timeOf(a.minKey), a.timeOf(a.maxKey)
		rep.Start, rep.End = &st, &en
		end = en
	}
	if !a.opts.End.IsZero() {
		end = a.opts.End
	}
	if !end.IsZero() {
		setBefore := func(c *APICall) {
			if c != nil && c.Time != nil {
				c.BeforeEnd = end.Sub(*c.Time)
			}
		}
		setBefore(rep.LastCall)
		setBefore(rep.UnfinishedCall)
		for i := range rep.UnfinishedCalls {
			setBefore(&rep.UnfinishedCalls[i])
		}
		if rep.FirstNonfinite != nil {
			setBefore(&rep.FirstNonfinite.Call)
		}
		if rep.FirstStatsUnavailable != nil {
			setBefore(&rep.FirstStatsUnavailable.Call)
		}
	}
}

// normLevel maps what was seen to the documented levels: the logger's own
// thresholds are ≥3, ≥5 and ≥10.
func normLevel(l int) int {
	switch {
	case l >= 10:
		return 10
	case l >= 5:
		return 5
	case l >= 3:
		return 3
	case l >= 1:
		return 1
	}
	return 0
}

// changedDim compares two shape tuples such as "(1, 4096)" and "(288, 4096)".
func changedDim(from, to []byte) int {
	f := bytes.Split(bytes.Trim(from, "(),[] "), []byte(","))
	t := bytes.Split(bytes.Trim(to, "(),[] "), []byte(","))
	if len(f) != len(t) {
		return -1
	}
	for i := range f {
		if !bytes.Equal(bytes.TrimSpace(f[i]), bytes.TrimSpace(t[i])) {
			return i
		}
	}
	return -1
}

// ---------------------------------------------------------------------------
// Level-10 dump directories. The log says which dirs got no outputs line; the
// directory's own metadata, when it is reachable from here, is authoritative:
// SGLang rewrites metadata.json in place, FlashInfer appends to metadata.jsonl.

type kaMeta struct {
	FunctionName    string `json:"function_name"`
	ExecutionStatus string `json:"execution_status"`
}

func readDumpMeta(dir string) (kaMeta, bool) {
	var m kaMeta
	for _, name := range []string{"metadata.json", "metadata.jsonl"} {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, kaMaxMetaBytes))
		f.Close()
		if err != nil {
			continue
		}
		if name == "metadata.jsonl" {
			b = bytes.TrimRight(b, "\n\r ")
			if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
				b = b[i+1:]
			}
		}
		if json.Unmarshal(b, &m) == nil && m.ExecutionStatus != "" {
			return m, true
		}
	}
	return m, false
}

func (a *kaAnalyzer) checkDumps() {
	rep := a.rep
	if !a.opts.SkipDumpCheck {
		kept := rep.DumpDirs[:0]
		for _, d := range rep.DumpDirs {
			if m, ok := a.findDumpMeta(d.Path); ok {
				d.Source = "metadata"
				d.State = m.ExecutionStatus
				if m.FunctionName != "" {
					d.API = m.FunctionName
				}
				if d.State != "inputs_saved" && d.State != "exception" {
					continue
				}
			}
			kept = append(kept, d)
		}
		rep.DumpDirs = kept
	}
	for _, root := range a.opts.DumpRoots {
		ents, err := os.ReadDir(root)
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("dump root: %v", err))
			continue
		}
		if len(ents) > kaMaxDumpScan {
			// Names start with the time, so the last ones are the newest.
			ents = ents[len(ents)-kaMaxDumpScan:]
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			dir := filepath.Join(root, e.Name())
			m, ok := readDumpMeta(dir)
			if !ok || (m.ExecutionStatus != "inputs_saved" && m.ExecutionStatus != "exception") {
				continue
			}
			if a.knownDump(dir) {
				continue
			}
			a.addDump(DumpDir{Path: dir, API: m.FunctionName, State: m.ExecutionStatus, Source: "metadata"})
		}
	}
}

// findDumpMeta resolves a dir named in the log: as written (absolute, or
// relative to the current directory), then relative to each log file's
// directory and each dump root.
func (a *kaAnalyzer) findDumpMeta(p string) (kaMeta, bool) {
	if m, ok := readDumpMeta(p); ok {
		return m, true
	}
	if filepath.IsAbs(p) {
		for _, root := range a.opts.DumpRoots {
			if m, ok := readDumpMeta(filepath.Join(root, filepath.Base(p))); ok {
				return m, true
			}
		}
		return kaMeta{}, false
	}
	for _, s := range a.streams {
		if s.name == "-" {
			continue
		}
		if m, ok := readDumpMeta(filepath.Join(filepath.Dir(s.name), p)); ok {
			return m, true
		}
	}
	for _, root := range a.opts.DumpRoots {
		if m, ok := readDumpMeta(filepath.Join(root, filepath.Base(p))); ok {
			return m, true
		}
	}
	return kaMeta{}, false
}

func (a *kaAnalyzer) knownDump(dir string) bool {
	base := filepath.Base(dir)
	for _, d := range a.rep.DumpDirs {
		if d.Path == dir || filepath.Base(d.Path) == base {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Pids. LOGDEST=kapi_%i.log gives kapi_48213.log; rotation adds .1 … .4.

// pidFromName returns the last run of digits in the file name that stands
// alone (between non-alphanumerics), so that "level3" or "7a" do not count.
func pidFromName(name string) int {
	base := filepath.Base(name)
	for _, ext := range []string{".gz", ".1", ".2", ".3", ".4", ".log", ".txt", ".out"} {
		if len(base) > len(ext) && base[len(base)-len(ext):] == ext {
			base = base[:len(base)-len(ext)]
		}
	}
	pid := 0
	for i := 0; i < len(base); {
		if !isDigit(base[i]) {
			i++
			continue
		}
		j := i
		for j < len(base) && isDigit(base[j]) {
			j++
		}
		if (i == 0 || !isAlnum(base[i-1])) && (j == len(base) || !isAlnum(base[j])) && j-i <= kaMaxNameDigits {
			if v, err := strconv.Atoi(base[i:j]); err == nil && v > 0 && v <= 1<<22 {
				pid = v
			}
		}
		i = j
	}
	return pid
}

// pidFromDumpDir reads the pid out of `<ts>_pid<PID>_<func>_call<NNNN>`.
func pidFromDumpDir(dir []byte) int {
	base := filepath.Base(string(dir))
	i := 0
	for {
		k := indexStr(base[i:], "_pid")
		if k < 0 {
			return 0
		}
		i += k + 4
		j := i
		for j < len(base) && isDigit(base[j]) {
			j++
		}
		if j > i && j-i <= kaMaxNameDigits && (j == len(base) || base[j] == '_') {
			v, _ := strconv.Atoi(base[i:j])
			return v
		}
	}
}

func indexStr(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
