package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kcrash/kcrash/internal/human"
)

var sparkRunes = []rune("▁▂▃▄▅▆▇█")

// sparkline draws s over the axis in width characters, each the highest
// sample of its stretch (a one-sample spike still shows), scaled to top;
// before the first sample and after the last it is blank.
func sparkline(s series, a axis, width int, top float64) string {
	cells := make([]float64, width)
	has := make([]bool, width)
	for _, p := range s.pts {
		i := int((a.x(p.t) - plotX0) / (plotX1 - plotX0) * float64(width))
		i = min(max(i, 0), width-1)
		if !has[i] || p.v > cells[i] {
			cells[i], has[i] = p.v, true
		}
	}
	// between two samples the value holds (a slow sampler leaves no holes)
	first, last := -1, -1
	for i := range has {
		if has[i] {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	for i := first + 1; first >= 0 && i < last; i++ {
		if !has[i] {
			cells[i], has[i] = cells[i-1], true
		}
	}
	var b strings.Builder
	for i := range cells {
		if !has[i] {
			b.WriteByte(' ')
			continue
		}
		k := 0
		if top > 0 {
			k = int(math.Round(cells[i] / top * float64(len(sparkRunes)-1)))
		}
		b.WriteRune(sparkRunes[min(max(k, 0), len(sparkRunes)-1)])
	}
	return b.String()
}

// Sparklines is what `kcrash show` prints under the verdict: each GPU's
// VRAM and the host's and cgroup's memory as a sparkline over the run, with
// the exact peak, when it came and against what total. Empty when the
// bundle has no samples.
func Sparklines(in *Input, width int) []string {
	m := build(in)
	if m.start.IsZero() {
		return nil
	}
	a := axis{m.start, m.end}
	var out []string
	at := func(t time.Time) string { return offset(t.Sub(a.start)) }
	for i, l := range m.gpus {
		p, ok := l.used.peak()
		if !ok {
			continue
		}
		head := "      "
		if i == 0 {
			head = "VRAM  "
		}
		top := l.total
		of := ""
		if top > 0 {
			of = fmt.Sprintf(" of %s (%.0f%%)", human.Bytes(int64(top)), p.v/top*100)
		} else {
			top = p.v
		}
		out = append(out, fmt.Sprintf("%s%-8s %s  peak %s%s at %s", head, clip(l.label, 8), sparkline(l.used, a, width, top), human.Bytes(int64(p.v)), of, at(p.t)))
	}
	top := max(m.hostTotal, m.limit)
	for i, s := range m.host {
		p, ok := s.peak()
		if !ok {
			continue
		}
		head := "      "
		if i == 0 {
			head = "Mem   "
		}
		name := map[string]string{"host": "host", "cg": "cgroup", "rss": "tree RSS"}[s.class]
		t := top
		if t <= 0 {
			t = p.v
		}
		of := ""
		switch {
		case s.class == "cg" && m.limit > 0:
			of = " of limit " + human.Bytes(int64(m.limit))
		case s.class == "host" && m.hostTotal > 0:
			of = " of " + human.Bytes(int64(m.hostTotal))
		}
		out = append(out, fmt.Sprintf("%s%-8s %s  peak %s%s at %s", head, name, sparkline(s, a, width, t), human.Bytes(int64(p.v)), of, at(p.t)))
	}
	if len(out) > 0 {
		out = append(out, fmt.Sprintf("      %-8s %s", "", axisLine(a, width)))
	}
	return out
}

// axisLine labels a sparkline's ends: 0 and the run's length.
func axisLine(a axis, width int) string {
	end := offset(a.span())
	pad := width - 1 - len([]rune(end))
	if pad < 1 {
		return "0 " + end
	}
	return "0" + strings.Repeat(" ", pad) + end
}
