package journal

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// blockBytes is how much of a segment one index entry covers. A query reads
// only the blocks whose wall range meets its window, so a window's edges
// cost at most a block of lines decoded for nothing.
const blockBytes = 64 << 10

// segment is one file of the journal, with what queries and retention
// need to know about it without reading it.
type segment struct {
	num    uint64
	path   string
	size   int64 // bytes written, the writer's buffer included
	blocks []block
	// Counts for Stats.
	records, gaps int64
	lost          uint64
	last          Cursor // the newest record in it, if any
	// trusted: every line is appendLine's, as this journal wrote it or
	// read it through at Open (lineDecoder.trusted).
	trusted bool
}

// block is a run of whole lines starting at off (ending where the next
// block starts, or at the segment's size), with the range of their walls.
type block struct {
	off      int64
	min, max int64 // wall, unix ns
}

func (s *segment) minWall() int64 {
	m := int64(math.MaxInt64)
	for _, b := range s.blocks {
		m = min(m, b.min)
	}
	return m
}

func (s *segment) maxWall() int64 {
	m := int64(math.MinInt64)
	for _, b := range s.blocks {
		m = max(m, b.max)
	}
	return m
}

// note accounts one line of n bytes written at s.size.
func (s *segment) note(e *Entry, n int) {
	w := wallNanos(e.Wall)
	if len(s.blocks) == 0 || s.size-s.blocks[len(s.blocks)-1].off >= blockBytes {
		s.blocks = append(s.blocks, block{off: s.size, min: w, max: w})
	} else {
		b := &s.blocks[len(s.blocks)-1]
		b.min, b.max = min(b.min, w), max(b.max, w)
	}
	s.size += int64(n)
	switch {
	case e.Gap != nil:
		s.gaps++
		if e.Gap.To >= e.Gap.From {
			s.lost += e.Gap.To - e.Gap.From + 1
		}
	default:
		s.records++
		s.last = Cursor{BootID: e.Boot, Seq: e.Rec.Seq}
	}
}

// wallNanos maps a wall time onto the index's scale; times outside what
// int64 nanoseconds hold (the zero Time) clamp to its ends.
func wallNanos(t time.Time) int64 {
	switch {
	case t.Before(minNanosTime):
		return math.MinInt64
	case t.After(maxNanosTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var (
	minNanosTime = time.Unix(0, math.MinInt64)
	maxNanosTime = time.Unix(0, math.MaxInt64)
)

func segmentName(num uint64) string { return fmt.Sprintf("%010d.jsonl", num) }

// segmentNum reads a segment file's number; false for any other file.
func segmentNum(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, ".jsonl")
	if !ok || len(base) != 10 {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, 64)
	return n, err == nil
}

// scanSegment rebuilds a segment's index from its file. A line that does
// not decode (the torn last line of a crash, a power loss mid-write) is
// skipped and counted in corrupt.
func scanSegment(dir string, num uint64) (s *segment, corrupt int, err error) {
	s = &segment{num: num, path: filepath.Join(dir, segmentName(num))}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return nil, 0, err
	}
	var d lineDecoder
	var e Entry
	text := string(data)
	// Trusted if every line took the validating fast path, or is a gap
	// (which the fast path, trusted or not, leaves to encoding/json by its
	// shape): a line of another shape, a torn or damaged one, and the
	// segment is read validating every line, as at Open.
	s.trusted = true
	for off := 0; off < len(text); {
		line := text[off:]
		n := strings.IndexByte(line, '\n')
		if n < 0 {
			n = len(line)
		} else {
			line = line[:n]
			n++
		}
		if err := d.decode(line, &e); err != nil {
			corrupt++
			s.size += int64(n)
			s.trusted = false
		} else {
			s.note(&e, n)
			if d.rec == "" && e.Gap == nil {
				s.trusted = false
			}
		}
		off += n
	}
	return s, corrupt, nil
}

// eachLine calls fn with each line of data, without its '\n'.
func eachLine(data string, fn func(string) bool) {
	for len(data) > 0 {
		n := strings.IndexByte(data, '\n')
		var line string
		if n < 0 {
			line, data = data, ""
		} else {
			line, data = data[:n], data[n+1:]
		}
		if len(line) > 0 && !fn(line) {
			return
		}
	}
}

// eachLineBackward is eachLine from the last line to the first. The line
// ends are found first, forward (IndexByte is vectorised, LastIndexByte is
// a byte loop: a flood hour's query read most of its blocks so).
func eachLineBackward(data string, fn func(string) bool) {
	var starts []int
	eachLineBackwardIn(&starts, data, fn)
}

// eachLineBackwardIn is eachLineBackward keeping its line starts in
// *starts, which it grows: a flood hour's query made a list of a block's
// line starts anew for each of its blocks (a fifth of its garbage).
func eachLineBackwardIn(buf *[]int, data string, fn func(string) bool) {
	starts := (*buf)[:0]
	if cap(starts) == 0 {
		starts = make([]int, 0, len(data)/160+1)
	}
	defer func() { *buf = starts }()
	for i := 0; i < len(data); {
		starts = append(starts, i)
		n := strings.IndexByte(data[i:], '\n')
		if n < 0 {
			break
		}
		i += n + 1
	}
	end := len(data)
	for k := len(starts) - 1; k >= 0; k-- {
		line := strings.TrimSuffix(data[starts[k]:end], "\n")
		end = starts[k]
		if len(line) > 0 && !fn(line) {
			return
		}
	}
}
