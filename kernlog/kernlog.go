// Package kernlog turns kernel-log text into evidence findings: amdgpu VM
// faults, ring timeouts and resets, NVIDIA Xid and fallen-off-the-bus
// messages, OOM-killer reports, userspace segfault/general-protection/trap
// lines, and the ROCm runtime lines (ROCr memory access faults,
// HSA_STATUS_ERROR_*) that accompany GPU faults in program output.
//
// Everything here is a pure function of its input, safe on hostile text:
// time and memory are linear in the input, each line is capped at 64 KiB and
// the number of findings is bounded.
package kernlog

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Line is one kernel-log line with what is known about it.
type Line struct {
	N    int            // 1-based line number in its file / record sequence
	Text string         // message text with any timestamp/host prefix removed
	Time *time.Time     // absolute wall time when the prefix gave one (nil for plain monotonic dmesg)
	Mono *time.Duration // seconds-since-boot when the prefix gave one ("[ 1234.567890]")
	Raw  string         // the line as read
}

const (
	// MaxLineBytes is where a line is cut; kernel records are at most 1 KiB,
	// so anything longer is not a kernel line worth more than its start.
	MaxLineBytes = 64 << 10
	// MaxFindings bounds one parse. Repeats are coalesced first, so only
	// input built to defeat coalescing gets near it.
	MaxFindings = 10000

	maxTextBytes = 4096
	// blockGap is how many unrelated lines may sit inside a multi-line block
	// (other CPUs print between the lines of an amdgpu fault report).
	blockGap = 8
)

// Parse finds every finding in a sequence of lines. Multi-line reports (an
// amdgpu VM fault block, an OOM-killer report, a wrapped fallen-off-the-bus
// message) become one finding whose Line is the first line of the report.
// Identical consecutive findings (an Xid 13 burst, a fault storm on one
// address space) are coalesced into the first, with details "repeat" and
// "last_line". Findings are returned in line order. A Line with Raw but no
// Text is split with SplitPrefix first (with no year).
func Parse(lines []Line) []evidence.Finding {
	p := newParser()
	for i := range lines {
		p.feed(recOf(&lines[i]))
	}
	return p.finish()
}

// ParseReader reads text in any prefix form SplitPrefix knows (\r\n
// tolerated, lines past MaxLineBytes cut there) and returns what Parse finds.
// year completes syslog timestamps, which carry none. On a read error the
// findings up to that point are returned with the error.
func ParseReader(r io.Reader, year int) ([]evidence.Finding, error) {
	p := newParser()
	err := readLines(r, func(raw string, n int) { p.feed(splitPrefix(raw, n, year)) })
	return p.finish(), err
}

// chunkBytes is how much readLines converts to a string at once: one
// allocation per chunk instead of one per line. It must exceed MaxLineBytes.
const chunkBytes = 256 << 10

// readLines calls fn for each line of r, cutting long lines instead of
// failing on them as bufio.Scanner would: one hostile line must not hide the
// kernel messages after it. Lines are substrings of a shared chunk, so
// anything kept past the line must be copied (emit does).
func readLines(r io.Reader, fn func(raw string, n int)) error {
	buf := make([]byte, 0, chunkBytes)
	n := 0
	skipping := false // discarding the rest of a line already cut
	line := func(l string) {
		if skipping {
			skipping = false
			return
		}
		if len(l) > MaxLineBytes {
			l = l[:MaxLineBytes]
		}
		n++
		fn(l, n)
	}
	for empty := 0; ; {
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if m == 0 && err == nil {
			// A reader that never progresses would hang the parse; bufio
			// gives up the same way.
			if empty++; empty > 100 {
				return io.ErrNoProgress
			}
			continue
		}
		empty = 0
		if last := bytes.LastIndexByte(buf, '\n'); last >= 0 {
			s := string(buf[:last+1])
			for s != "" {
				i := strings.IndexByte(s, '\n')
				line(s[:i+1])
				s = s[i+1:]
			}
			buf = buf[:copy(buf, buf[last+1:])]
		}
		if len(buf) >= MaxLineBytes {
			if !skipping {
				line(string(buf[:MaxLineBytes]))
				skipping = true
			}
			buf = buf[:0]
		}
		if err != nil {
			if len(buf) > 0 {
				line(string(buf))
			}
			return eofNil(err)
		}
	}
}

func eofNil(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// block is a finding still collecting the lines that follow its first one.
type block struct {
	f    evidence.Finding
	last int // number of the last line absorbed
	// absorb takes a line into the block and reports whether it belonged.
	absorb func(p *parser, b *block, r *rec) bool
	// key returns the coalescing key, computed at flush because later lines
	// (the faulting process of an amdgpu fault) are part of it.
	key func(b *block) string
	// drop marks a block that turned out not to be evidence (a wrapped NVRM
	// message that was not about the bus).
	drop bool
}

type parser struct {
	cur     rec
	out     []evidence.Finding
	lastKey string
	dropped int

	blk *block
	oom oomState

	// uuids maps NVRM's PCI spelling to the GPU UUID the driver printed for
	// it, so an Xid finding can name the GPU the way nvidia-smi does.
	uuids map[string]string

	mark testMark
}

func newParser() *parser { return &parser{mark: newTestMark()} }

func (p *parser) feed(line rec) {
	// The line lives in the parser, not on the stack: handing a stack value's
	// address to the absorb callbacks would move every line to the heap.
	p.cur = line
	r := &p.cur
	r.text = p.mark.filter(r)
	if len(r.text) > MaxLineBytes {
		r.text = r.text[:MaxLineBytes]
	}
	if b := p.blk; b != nil {
		if b.absorb(p, b, r) {
			b.last = r.n
			return
		}
		if r.n-b.last > blockGap || r.n < b.last {
			p.flushBlock()
		}
	}
	p.oom.tick(p, r)
	p.dispatch(r)
}

// dispatch sends a line to the matchers its literal markers point at. The
// strings.Contains pre-filter keeps the cost of the common, irrelevant line
// to a few memory scans; a matcher that does not recognise the line lets the
// next one try.
func (p *parser) dispatch(r *rec) {
	t := r.text
	switch {
	case strings.Contains(t, "NVRM") && p.nvrm(r):
	case strings.Contains(t, "amdgpu") && p.amdgpu(r):
	case strings.Contains(t, "by GPU node-") && p.rocr(r):
	case strings.Contains(t, "HSA_STATUS_ERROR") && p.hsa(r):
	case (strings.Contains(t, "oom") || strings.Contains(t, "Kill")) && p.oomLine(r):
	case (strings.Contains(t, "traps: ") || strings.Contains(t, "]: ")) && p.trap(r):
	}
}

// open starts a multi-line block, closing any block before it.
func (p *parser) open(b *block) {
	p.flushBlock()
	b.last = b.f.Line
	p.blk = b
}

func (p *parser) flushBlock() {
	b := p.blk
	if b == nil {
		return
	}
	p.blk = nil
	if b.drop {
		return
	}
	key := ""
	if b.key != nil {
		key = b.key(b)
	}
	p.emit(b.f, key)
}

// emit appends a finding, or folds it into the previous one when both share a
// non-empty key: a burst of the same fault is one piece of evidence.
func (p *parser) emit(f evidence.Finding, key string) {
	cloneStrings(&f)
	if key != "" && key == p.lastKey && len(p.out) > 0 {
		merge(&p.out[len(p.out)-1], &f)
		return
	}
	if len(p.out) >= MaxFindings {
		p.dropped++
		return
	}
	p.out = append(p.out, f)
	p.lastKey = key
}

func merge(dst, src *evidence.Finding) {
	d := dst.Details
	rep, _ := d.Int(detail.Repeat)
	if rep == 0 {
		rep = 1
	}
	d.SetInt(detail.Repeat, rep+1)
	d.SetInt(detail.LastLine, int64(src.Line))
	if src.Address != "" && src.Address != dst.Address {
		appendDistinct(d, "addresses", dst.Address, 16)
		appendDistinct(d, "addresses", src.Address, 16)
	}
	mergeList(d, src.Details, "message", "messages")
	mergeList(d, src.Details, "exception", "exceptions")
}

// cloneStrings copies every string a finding holds, so it no longer pins
// the input chunk its substrings point into.
func cloneStrings(f *evidence.Finding) {
	f.Text = strings.Clone(f.Text)
	f.GPU = strings.Clone(f.GPU)
	f.Address = strings.Clone(f.Address)
	for k, v := range f.Details {
		switch v := v.(type) {
		case string:
			f.Details[k] = strings.Clone(v)
		case []string:
			c := make([]string, len(v))
			for i, s := range v {
				c[i] = strings.Clone(s)
			}
			f.Details[k] = c
		}
	}
}

// mergeList keeps the distinct values of key seen across a coalesced burst
// under list: the first Xid 13 of a burst often says only "Multiple Warp
// Errors" while a later one names the cause.
func mergeList(d, src map[string]any, key, list string) {
	v, _ := src[key].(string)
	first, _ := d[key].(string)
	if v == "" || (v == first && d[list] == nil) {
		return
	}
	appendDistinct(d, list, first, 8)
	appendDistinct(d, list, v, 8)
}

func (p *parser) finish() []evidence.Finding {
	p.flushBlock()
	p.oom.flush(p)
	if p.dropped > 0 && len(p.out) > 0 {
		p.out[len(p.out)-1].Details["findings_dropped"] = int64(p.dropped)
	}
	// OOM reports are emitted when they complete, which can be after later
	// single-line findings; callers get line order.
	slices.SortStableFunc(p.out, func(a, b evidence.Finding) int { return a.Line - b.Line })
	return p.out
}

// newFinding fills what every finding from line r shares.
func newFinding(r *rec, kind evidence.Kind, event, vendor string) evidence.Finding {
	f := evidence.Finding{
		Kind:    kind,
		Source:  evidence.SourceDmesg,
		Line:    r.n,
		Text:    clip(strings.TrimSpace(r.text), maxTextBytes),
		Details: map[string]any{"event": event},
	}
	if vendor != "" {
		f.Details.SetText(detail.Vendor, vendor)
	}
	if r.hasT {
		t := r.t
		f.Time = &t
	}
	if r.hasMono {
		f.Details["uptime_s"] = r.mono.Seconds()
	}
	return f
}
