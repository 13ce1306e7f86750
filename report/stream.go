package report

import (
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/kcrash/kcrash/internal/jsonstream"
)

// A timeline is read as a stream, one sample at a time, never whole: a
// bundle may hold a gigabyte of samples and the reader must stay within a
// few MiB whatever it holds (the README promises 64 MiB for any bundle).
// valueMax bounds one decoded value (a sample, a process, a string): far
// above a real one (a process's cmdline is at most 2 MiB).
const valueMax = 4 << 20

type stream = jsonstream.Stream

func newStream(r io.Reader) *stream { return jsonstream.New(r, valueMax, jsonMax) }

// readErr says what stopped a stream, for a note on the page.
func readErr(err error) error {
	switch {
	case errors.Is(err, jsonstream.ErrFileTooLarge):
		return fmt.Errorf("larger than %d MiB", jsonMax>>20)
	case errors.Is(err, jsonstream.ErrValueTooLarge):
		return fmt.Errorf("a value larger than %d MiB", valueMax>>20)
	}
	return err
}

// lineGroups is how many groups one line keeps (each group is at most four
// points: first, lowest, highest, last), and allGroups what the lines of one
// chart share: 8 GPUs keep 2048 groups each, enough for about three hours
// of one-second samples drawn whole, 64 GPUs 256 each.
const (
	lineGroups = 2048
	allGroups  = 16384
	minGroups  = 256
)

// pointGroup summarizes consecutive samples: its first, lowest, highest
// and last point, with their positions in the stream to keep their order.
type pointGroup struct {
	n                       int
	first, lo, hi, last     point
	iFirst, iLo, iHi, iLast int
}

func (g *pointGroup) add(p point, i int) {
	if g.n == 0 {
		g.first, g.lo, g.hi, g.last = p, p, p, p
		g.iFirst, g.iLo, g.iHi, g.iLast = i, i, i, i
		g.n = 1
		return
	}
	g.n++
	if p.v < g.lo.v {
		g.lo, g.iLo = p, i
	}
	if p.v > g.hi.v {
		g.hi, g.iHi = p, i
	}
	g.last, g.iLast = p, i
}

func (g *pointGroup) merge(h *pointGroup) {
	if h.n == 0 {
		return
	}
	if h.lo.v < g.lo.v {
		g.lo, g.iLo = h.lo, h.iLo
	}
	if h.hi.v > g.hi.v {
		g.hi, g.iHi = h.hi, h.iHi
	}
	g.last, g.iLast = h.last, h.iLast
	g.n += h.n
}

// decimator keeps a line of any length within a bound of groups of equal
// width: when they are too many, neighbours merge and the width doubles.
// Every spike stays (each group keeps its extremes), as do the first and
// last samples.
type decimator struct {
	groups []pointGroup
	cur    pointGroup
	width  int // samples per group
	seen   int
}

// add appends p; the line keeps at most 2·limit groups.
func (d *decimator) add(p point, limit int) {
	if d.width == 0 {
		d.width = 1
	}
	d.cur.add(p, d.seen)
	d.seen++
	if d.cur.n < d.width {
		return
	}
	d.groups = append(d.groups, d.cur)
	d.cur = pointGroup{}
	for len(d.groups) >= 2*limit {
		n := len(d.groups) / 2
		for i := range n {
			g := d.groups[2*i]
			g.merge(&d.groups[2*i+1])
			d.groups[i] = g
		}
		if len(d.groups)%2 == 1 {
			// the odd one out, with what came after it, becomes the
			// current group, filled up to the new width
			g := d.groups[len(d.groups)-1]
			g.merge(&d.cur)
			d.cur = g
		}
		d.groups = d.groups[:n]
		d.width *= 2
	}
}

// points returns the kept points in stream order, and whether any were
// dropped.
func (d *decimator) points() ([]point, bool) {
	gs := d.groups
	if d.cur.n > 0 {
		gs = append(gs[:len(gs):len(gs)], d.cur)
	}
	var out []point
	for _, g := range gs {
		last := -1
		for _, c := range sortedCorners(&g) {
			if c.i != last {
				out = append(out, c.p)
				last = c.i
			}
		}
	}
	return out, len(out) < d.seen
}

type corner struct {
	p point
	i int
}

func sortedCorners(g *pointGroup) [4]corner {
	cs := [4]corner{{g.first, g.iFirst}, {g.lo, g.iLo}, {g.hi, g.iHi}, {g.last, g.iLast}}
	for i := 1; i < 4; i++ {
		for j := i; j > 0 && cs[j].i < cs[j-1].i; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
	return cs
}

// clip bounds a piece of bundle text kept for the page.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
