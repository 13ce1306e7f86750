package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/kcrash/kcrash/agent/api"
)

// span is a run of lines a query reads: bytes [off, end) of a segment file,
// and whether every line in it is inside the window (no wall to check).
type span struct {
	path     string
	off, end int64
	inside   bool
	trusted  bool // the segment's lines are the journal's own
}

// Query calls fn with each entry whose Wall is in [since, until] (a zero
// until: no upper bound), in append order, until fn returns false. Only the
// blocks of segments whose walls meet the window are read, and at the
// window's edges a line's wall is looked at before the line is decoded.
// Entries appended while a query runs may or may not be seen; a segment
// dropped by retention meanwhile is skipped. fn gets an Entry of its own
// that it may keep (its strings share the memory of the block it was read
// from).
func (j *Journal) Query(ctx context.Context, since, until time.Time, fn func(*Entry) bool) error {
	return j.query(ctx, since, until, false, false, true, nil, func(e *Entry, _ string, _ *api.RecordSpans) bool { return fn(e) })
}

// QueryNewest is Query newest first: for a reader that wants the end of a
// window and stops once it has enough (the server's answer cap), so that
// an hour of a flood is not decoded to keep its last few thousand records.
func (j *Journal) QueryNewest(ctx context.Context, since, until time.Time, fn func(*Entry) bool) error {
	return j.query(ctx, since, until, true, false, true, nil, func(e *Entry, _ string, _ *api.RecordSpans) bool { return fn(e) })
}

// ScanNewest is QueryNewest for a reader that copies what it keeps: e,
// its strings and rec are good only until fn returns (the blocks are read
// into buffers used again, and one Entry is filled for every line). rec is
// the record's JSON as the line holds it, in the shape
// api.Record.AppendJSON writes, or "" where the line was not in that
// shape: an answer copies it instead of encoding the record again.
// Without subjects, e.Subject is left empty: a reader that needs only the
// records (root's query, which every record is shown) skips reading whom
// each line names, which was half of decoding a line.
//
// skip, when not nil, is asked first about each line of the window that
// names someone, with the line's boot id and its subject's JSON (parse it
// with ParseSubject): true drops the line before its record is read, and
// fn never sees it. A user's query withholds most of a flood's lines by
// whom they name alone, and reading their records was most of its cost.
//
// sp says where rec holds e.Rec's fields (nil where rec is ""; good only
// until fn returns): the compact form copies them
// (api.AppendCompactSpans) without finding them again.
func (j *Journal) ScanNewest(ctx context.Context, since, until time.Time, subjects bool, skip func(boot, subject string) bool, fn func(e *Entry, rec string, sp *api.RecordSpans) bool) error {
	return j.query(ctx, since, until, true, true, subjects, skip, fn)
}

// spanBufs are the read buffers of ScanNewest's blocks: a flood hour's
// query reads megabytes, which zeroed and collected again each time cost
// it more than the reading.
var spanBufs sync.Pool

// lineStarts are eachLineBackwardIn's lists of a block's line starts, for
// the same reason.
var lineStarts sync.Pool

func (j *Journal) query(ctx context.Context, since, until time.Time, newest, transient, subjects bool, skip func(boot, subject string) bool, fn func(*Entry, string, *api.RecordSpans) bool) error {
	lo, hi := wallNanos(since), int64(math.MaxInt64)
	if since.IsZero() {
		lo = math.MinInt64
	}
	if !until.IsZero() {
		hi = wallNanos(until)
	}
	if lo > hi {
		return nil
	}
	spans := j.spans(lo, hi)
	lines := eachLine
	if newest {
		slices.Reverse(spans)
		starts, _ := lineStarts.Get().(*[]int)
		if starts == nil {
			starts = new([]int)
		}
		defer lineStarts.Put(starts)
		lines = func(data string, fn func(string) bool) { eachLineBackwardIn(starts, data, fn) }
	}
	var (
		d    = lineDecoder{noSubject: !subjects}
		slab []Entry
		f    *os.File
		path string
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for _, sp := range spans {
		if err := ctx.Err(); err != nil {
			return err
		}
		if sp.path != path {
			if f != nil {
				f.Close()
				f = nil
			}
			path = sp.path
			var err error
			f, err = os.Open(path)
			if errors.Is(err, os.ErrNotExist) {
				continue // dropped by retention since the snapshot
			}
			if err != nil {
				return fmt.Errorf("journal: %w", err)
			}
		}
		if f == nil {
			continue
		}
		n := int(sp.end - sp.off)
		// A buffer of its own for each span, never written again once read:
		// the entries' strings are views of it (no copy of a flood's
		// megabytes), and it lives as long as one of them does; for
		// ScanNewest, until fn is done with its lines.
		var buf []byte
		if transient {
			if b, ok := spanBufs.Get().(*[]byte); ok && cap(*b) >= n {
				buf = (*b)[:n]
			} else {
				buf = make([]byte, n, max(n, maxSpan))
			}
		} else {
			buf = make([]byte, n)
		}
		m, err := f.ReadAt(buf, sp.off)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("journal: %w", err)
		}
		// Short only where a failed write left the file behind the index.
		text := unsafe.String(unsafe.SliceData(buf), m)
		d.trusted = sp.trusted && trustOwnLines
		subjectOf := lineSubject
		if d.trusted {
			subjectOf = lineSubjectTrusted
		}
		stop := false
		lines(text, func(line string) bool {
			inWindow := sp.inside
			if !sp.inside {
				w, ok := wallOf(line)
				if ok && (wallNanos(w) < lo || wallNanos(w) > hi) {
					return true
				}
				inWindow = ok
			}
			if skip != nil && inWindow {
				if boot, subject, ok := subjectOf(line); ok && skip(boot, subject) {
					return true
				}
			}
			// Entries are handed out from a slab: one allocation for many
			// instead of one each, which a flood's hour makes felt.
			if len(slab) == 0 {
				slab = make([]Entry, 64)
			}
			e := &slab[0]
			if transient {
				// fn is done with the last line's strings.
				d.arena.Rewind()
			}
			if d.decode(line, e) != nil {
				return true // a torn line, counted at Open
			}
			if w := wallNanos(e.Wall); w < lo || w > hi {
				return true
			}
			if !transient {
				slab = slab[1:]
			}
			var spans *api.RecordSpans
			if d.rec != "" {
				spans = &d.spans
			}
			if !fn(e, d.rec, spans) {
				stop = true
				return false
			}
			return true
		})
		if transient {
			spanBufs.Put(&buf)
		}
		if stop {
			return nil
		}
	}
	return nil
}

// trustOwnLines lets a query trust the segments the journal wrote or read
// through (segment.trusted); tests turn it off to hold the trusting
// reading to the validating one.
var trustOwnLines = true

// maxSpan bounds the blocks merged into one read.
const maxSpan = 1 << 20

// spans snapshots, under the lock, the byte ranges of the blocks that meet
// [lo, hi]; adjacent blocks merge so that a long window is read in few
// large reads. The writer's buffer is flushed first so that the file holds
// every line the index counts.
func (j *Journal) spans(lo, hi int64) []span {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cur != nil && j.err == nil {
		// A failed flush stops the writer, not the readers: what reached
		// the files can still be read.
		if err := j.w.Flush(); err != nil {
			j.err = fmt.Errorf("journal: %w", err)
		}
	}
	var out []span
	for _, s := range j.segs {
		for i, b := range s.blocks {
			if b.max < lo || b.min > hi {
				continue
			}
			end := s.size
			if i+1 < len(s.blocks) {
				end = s.blocks[i+1].off
			}
			inside := b.min >= lo && b.max <= hi
			if k := len(out) - 1; k >= 0 && out[k].path == s.path && out[k].end == b.off &&
				out[k].inside == inside && end-out[k].off <= maxSpan {
				out[k].end = end
				continue
			}
			out = append(out, span{path: s.path, off: b.off, end: end, inside: inside, trusted: s.trusted})
		}
	}
	return out
}
