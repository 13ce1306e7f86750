package kernelapi

// The streaming pass: one reader a file with reusable call buffers, the
// files merged by time into one analyzer.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kcrash/kcrash/internal/gzcap"
)

// Limits. They bound memory whatever the input; the real logs stay far below.

const (
	stackDepth    = 16   // open (nested, or never-closed) calls kept per file and format
	maxArgs       = 32   // arguments kept per call (inputs; outputs have their own)
	maxOut        = 8    // return-value tensors kept per call
	maxField      = 256  // bytes kept of one field value (shape, repr, …)
	maxAPIName    = 512  // bytes kept of an API name
	maxAPIs       = 1024 // APIs tracked for shape jumps, over all files
	maxShape      = 128  // bytes of a shape kept for comparison
	maxJumps      = 16   // the last shape jumps are reported
	maxExcFirst   = 8    // the first exceptions …
	maxExcLast    = 8    // … and the last ones are reported
	maxExcLines   = 16   // lines kept of one exception message
	maxExcBytes   = 2048 // bytes kept of one exception message
	maxDumpDirs   = 64   // dump dirs reported
	maxDumpScan   = 100000
	maxMetaBytes  = 4 << 20
	maxNameDigits = 7 // pid_max is at most 2^22
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

type elemBuf struct {
	name, typ, value             []byte
	shape, stride, dtype, device []byte
	min, max, mean, stats        []byte
	nan, inf                     int64
	statsBad                     bool
}

func (e *elemBuf) reset() {
	e.name, e.typ, e.value = e.name[:0], e.typ[:0], e.value[:0]
	e.shape, e.stride, e.dtype, e.device = e.shape[:0], e.stride[:0], e.dtype[:0], e.device[:0]
	e.min, e.max, e.mean, e.stats = e.min[:0], e.max[:0], e.mean[:0], e.stats[:0]
	e.nan, e.inf, e.statsBad = 0, 0, false
}

type callBuf struct {
	format   int
	api      []byte
	key      tsKey
	hasTS    bool
	line     int64
	seq      int64 // order in which calls were opened, over all files
	in       [maxArgs]elemBuf
	nIn      int
	out      [maxOut]elemBuf
	nOut     int
	finished bool
	exc      []byte
	dumpDir  []byte
	dumpDone bool
	onStack  bool
	free     bool
	// told: the sink has had the call (toldOut: its return).
	told, toldOut bool
}

func (c *callBuf) reset() {
	c.api = c.api[:0]
	c.key, c.hasTS, c.line, c.seq = 0, false, 0, 0
	c.nIn, c.nOut = 0, 0
	c.finished = false
	c.exc = c.exc[:0]
	c.dumpDir = c.dumpDir[:0]
	c.dumpDone = false
	c.told, c.toldOut = false, false
}

// callStack is a ring: at level 1 nothing ever closes a call, so the oldest
// entries fall off the bottom.
type callStack struct {
	s     [stackDepth]*callBuf
	start int
	n     int
}

func (st *callStack) top() *callBuf {
	if st.n == 0 {
		return nil
	}
	return st.s[(st.start+st.n-1)%stackDepth]
}

// at returns the i-th entry from the top (0 = top).
func (st *callStack) at(i int) *callBuf {
	return st.s[(st.start+st.n-1-i+stackDepth)%stackDepth]
}

type apiShapes struct {
	names  [maxArgs][]byte
	shapes [maxArgs][]byte
	n      int
}

// ---------------------------------------------------------------------------

type stream struct {
	an     *analyzer
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

	stacks  [nFormats]callStack
	pool    []*callBuf
	level   [nFormats]int
	last    *callBuf // the last call opened in this file
	recCall *callBuf // the call whose record is being read
	lastFmt int

	sect     int
	sectFmt  int
	inCall   *callBuf // inputs being read for this call
	outCall  *callBuf // outputs being read for this call
	cur      *elemBuf
	topKey   []byte
	needVal  bool // FlashInfer: `  arg[0]:` seen, the value comes on the next line
	excCur   *Exception
	excLines int

	pendingFIDump []byte
	apis          map[string]*apiShapes
	nameBuf       []byte
}

func newStream(in NamedReader, bufSize int, maxDecompressed int64) (*stream, error) {
	s := &stream{name: in.Name, pid: pidFromName(in.Name), apis: map[string]*apiShapes{}}
	// A small log gets a small buffer: bundles carry many short files, and
	// the buffer is most of the analyzer's memory.
	rawSize := bufSize
	if n := sizeHint(in.Reader); n >= 0 && n < int64(bufSize) {
		rawSize = max(int(n)+1, 4096)
	}
	br := bufio.NewReaderSize(in.Reader, rawSize)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzcap.NewReader(br, in.Name, maxDecompressed)
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

func (s *stream) close() {
	if s.closer != nil {
		s.closer.Close()
		s.closer = nil
	}
}

func (s *stream) alloc() *callBuf {
	if n := len(s.pool); n > 0 {
		c := s.pool[n-1]
		s.pool = s.pool[:n-1]
		c.free = false
		c.reset()
		return c
	}
	return &callBuf{}
}

// release returns c to the pool once nothing refers to it any more; every
// place that drops a reference calls it.
func (s *stream) release(c *callBuf) {
	if c == nil || c.free || c.onStack || c == s.last || c == s.outCall || c == s.inCall || c == s.recCall {
		return
	}
	s.an.forget(c)
	c.free = true
	s.pool = append(s.pool, c)
}

func (s *stream) push(c *callBuf) {
	st := &s.stacks[c.format]
	if st.n == stackDepth {
		old := st.s[st.start]
		st.start = (st.start + 1) % stackDepth
		st.n--
		old.onStack = false
		s.release(old)
	}
	st.s[(st.start+st.n)%stackDepth] = c
	st.n++
	c.onStack = true
}

// pop leaves releasing to the caller, which may still keep the call.
func (s *stream) pop(format int) *callBuf {
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

type jumpBuf struct {
	api, arg, from, to []byte
	line               int64
	key                tsKey
	hasTS              bool
	s                  *stream
}

type analyzer struct {
	opts    Options
	loc     *time.Location
	rep     *Report
	streams []*stream
	seq     int64

	minKey, maxKey tsKey
	hasTime        bool

	jumps [maxJumps]jumpBuf

	excFirst []Exception
	excLast  [maxExcLast]Exception

	formats [nFormats]bool
	apis    int

	// The calls behind FirstNonfinite and FirstStatsUnavailable, while they
	// are still open: the report must show how they ended, not how they stood
	// when the tensor was read.
	watch [2]*callBuf
}

func (a *analyzer) forget(c *callBuf) {
	for i := range a.watch {
		if a.watch[i] == c {
			a.watch[i] = nil
		}
	}
}

// ended copies a watched call's outcome into the report.
func (a *analyzer) ended(c *callBuf) {
	for i, w := range a.watch {
		if w != c || c == nil {
			continue
		}
		var r *Call
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

func (a *analyzer) run() {
	for _, s := range a.streams {
		s.advance(a) // whatever precedes the first call
	}
	for {
		// Linear scan: a handful of per-pid files is the normal case, and
		// the cost is per call, not per line.
		var best *stream
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
func (s *stream) open(a *analyzer) {
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
func (s *stream) advance(a *analyzer) {
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

func (s *stream) skipRest() error {
	for {
		ln, err := s.br.ReadSlice('\n')
		s.bytes += int64(len(ln))
		if err != bufio.ErrBufferFull {
			return err
		}
	}
}

func (s *stream) eof(a *analyzer, err error) {
	if s.done {
		return
	}
	s.done = true
	s.endRecord(a)
	if err != io.EOF {
		s.err = err
	}
}
