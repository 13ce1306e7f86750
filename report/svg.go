package report

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"

	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/visible"
)

// The charts share one geometry: a viewBox 1000 units wide, labels on the
// left, the plot from plotX0 to plotX1, so that one instant has the same x in
// every chart of the page.
const (
	svgWidth   = 1000
	plotX0     = 130
	plotX1     = 985
	axisH      = 18  // tick labels under a chart
	maxRows    = 40  // process lifelines drawn; the table lists all
	maxMarkers = 500 // event markers drawn
	maxLanes   = 64  // GPUs drawn
)

// axis maps times to x.
type axis struct{ start, end time.Time }

func (a axis) span() time.Duration { return a.end.Sub(a.start) }

func (a axis) x(t time.Time) float64 {
	f := float64(t.Sub(a.start)) / float64(a.span())
	return plotX0 + math.Max(0, math.Min(1, f))*(plotX1-plotX0)
}

// ms is t's offset from the axis start in milliseconds: the data-t of a
// marker, which the browser test checks against its x.
func (a axis) ms(t time.Time) int64 { return t.Sub(a.start).Milliseconds() }

// esc makes bundle text safe inside SVG/HTML text and attributes, with
// control characters shown as escapes.
func esc(s string) string { return html.EscapeString(visible.Line(s)) }

func f1(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}

var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// offset formats d as the axis labels do: +1m30s, +250ms.
func offset(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	sign := "+"
	if d < 0 {
		sign, d = "−", -d
	}
	switch {
	case d < time.Second:
		return sign + d.Round(time.Millisecond).String()
	case d < time.Minute:
		return sign + f1(d.Seconds()) + "s"
	}
	d = d.Round(time.Second)
	h, m, sec := d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	out := sign
	if h > 0 {
		out += fmt.Sprintf("%dh", h)
	}
	if m > 0 {
		out += fmt.Sprintf("%dm", m)
	}
	if sec > 0 {
		out += fmt.Sprintf("%ds", sec)
	}
	return out
}

// ticks draws the grid and the time labels of a chart whose plot spans y0..y1.
func (a axis) ticks(b *strings.Builder, y0, y1 float64) {
	step := a.span()/8 + 1 // beyond a day (a clock gone wrong): eight plain steps
	for _, s := range tickSteps {
		if a.span()/s <= 8 {
			step = s
			break
		}
	}
	b.WriteString(`<g class="grid">`)
	for k := 0; k <= 16; k++ {
		d := time.Duration(k) * step
		if d > a.span() || d < 0 {
			break
		}
		x := a.x(a.start.Add(d))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/><text x="%s" y="%s" text-anchor="middle">%s</text>`,
			f1(x), f1(y0), f1(x), f1(y1), f1(x), f1(y1+13), offset(d))
	}
	b.WriteString(`</g>`)
}

// downsample keeps, for each unit of x, the lowest and the highest sample in
// time order: the drawn line keeps every spike and every dip (the exact peak
// among them), with at most two points per unit however long the run.
func downsample(pts []point, a axis) []point {
	if len(pts) <= 2*(plotX1-plotX0) {
		return pts
	}
	out := make([]point, 0, 2*(plotX1-plotX0)+2)
	i := 0
	for i < len(pts) {
		col := int(a.x(pts[i].t))
		lo, hi := i, i
		j := i
		for j < len(pts) && int(a.x(pts[j].t)) == col {
			if pts[j].v < pts[lo].v {
				lo = j
			}
			if pts[j].v > pts[hi].v {
				hi = j
			}
			j++
		}
		switch {
		case lo == hi:
			out = append(out, pts[lo])
		case lo < hi:
			out = append(out, pts[lo], pts[hi])
		default:
			out = append(out, pts[hi], pts[lo])
		}
		i = j
	}
	return out
}

// polyline draws pts scaled so that top is at y0 and 0 at y1.
func polyline(b *strings.Builder, pts []point, a axis, y0, y1, top float64, class string, area bool) {
	if len(pts) == 0 || top <= 0 {
		return
	}
	y := func(v float64) float64 { return y1 - math.Min(v/top, 1)*(y1-y0) }
	var p strings.Builder
	for i, q := range pts {
		if i > 0 {
			p.WriteByte(' ')
		}
		p.WriteString(f1(a.x(q.t)))
		p.WriteByte(',')
		p.WriteString(f1(y(q.v)))
	}
	if area {
		fmt.Fprintf(b, `<polygon class="area %s" points="%s,%s %s %s,%s"/>`, class, f1(a.x(pts[0].t)), f1(y1), p.String(), f1(a.x(pts[len(pts)-1].t)), f1(y1))
	}
	if len(pts) == 1 {
		fmt.Fprintf(b, `<circle class="dot %s" cx="%s" cy="%s" r="2.5"/>`, class, f1(a.x(pts[0].t)), f1(y(pts[0].v)))
		return
	}
	fmt.Fprintf(b, `<polyline class="line %s" points="%s"/>`, class, p.String())
}

// peakMark labels a series' exact peak.
func peakMark(b *strings.Builder, p point, a axis, y0, y1, top float64, class, what string) {
	y := y1 - math.Min(p.v/top, 1)*(y1-y0)
	fmt.Fprintf(b, `<circle class="peak %s" cx="%s" cy="%s" r="3" data-t="%d"><title>%s peak %s at %s</title></circle>`,
		class, f1(a.x(p.t)), f1(y), a.ms(p.t), esc(what), human.Bytes(int64(p.v)), offset(p.t.Sub(a.start)))
}

// markers draws the vertical lines of the events every chart shows (faults,
// Xids, OOM kills, resets, hang, exit) over a plot spanning y0..y1.
func markers(b *strings.Builder, evs []event, a axis, y0, y1 float64) {
	for i, e := range evs {
		if i == maxMarkers {
			return
		}
		if e.kind == "other" || e.kind == "unrelated" {
			continue
		}
		x := a.x(e.t)
		fmt.Fprintf(b, `<line class="vmark k-%s" x1="%s" y1="%s" x2="%s" y2="%s" data-t="%d"><title>%s %s: %s</title></line>`,
			e.kind, f1(x), f1(y0), f1(x), f1(y1), a.ms(e.t), offset(e.t.Sub(a.start)), esc(e.label), esc(e.text))
	}
}

func svgOpen(b *strings.Builder, name, label string, h float64) {
	fmt.Fprintf(b, `<svg class="tl" data-timeline="%s" viewBox="0 0 %d %s" role="img" aria-label="%s">`, name, svgWidth, f1(h), esc(label))
}

// vramSVG draws one lane per GPU: used VRAM against the GPU's total, the
// run's own processes' share as bands.
func vramSVG(m *model, a axis) string {
	if len(m.gpus) == 0 {
		return ""
	}
	const laneH, gap, top = 46.0, 8.0, 6.0
	h := top + float64(len(m.gpus))*(laneH+gap) + axisH
	var b strings.Builder
	svgOpen(&b, "vram", "VRAM per GPU over the run", h)
	y := top
	for i, l := range m.gpus {
		y0, y1 := y, y+laneH
		scale := l.total
		if scale <= 0 {
			if p, ok := l.used.peak(); ok {
				scale = p.v * 1.1
			}
		}
		fmt.Fprintf(&b, `<g class="lane" data-gpu="%d">`, i)
		if p, ok := l.used.peak(); ok {
			last, _ := l.used.last()
			fmt.Fprintf(&b, `<title>%s: peak %s at %s, last %s, %d samples</title>`, esc(l.label), human.Bytes(int64(p.v)), offset(p.t.Sub(a.start)), human.Bytes(int64(last.v)), len(l.used.pts))
		}
		fmt.Fprintf(&b, `<rect class="frame" x="%d" y="%s" width="%d" height="%s"/>`, plotX0, f1(y0), plotX1-plotX0, f1(laneH))
		total := "total unknown"
		if l.total > 0 {
			total = human.Bytes(int64(l.total))
		}
		fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%s">%s</text><text class="sub" x="%d" y="%s">of %s</text>`, plotX0-6, f1(y0+16), esc(l.label), plotX0-6, f1(y0+30), total)
		for _, c := range l.child {
			from, to := c.from, c.to
			if to.Before(from) {
				to = from
			}
			x0, x1 := a.x(from), a.x(to)
			hh := math.Min(c.v/scale, 1) * laneH
			fmt.Fprintf(&b, `<rect class="child" x="%s" y="%s" width="%s" height="%s"><title>%s: %s (peak %s)</title></rect>`,
				f1(x0), f1(y1-hh), f1(math.Max(x1-x0, 1)), f1(hh), esc(c.label), human.Bytes(int64(c.v)), human.Bytes(int64(c.peak)))
		}
		polyline(&b, downsample(l.used.pts, a), a, y0, y1, scale, "used", true)
		if p, ok := l.used.peak(); ok {
			peakMark(&b, p, a, y0, y1, scale, "used", l.label+" used")
		}
		b.WriteString(`</g>`)
		y += laneH + gap
	}
	markers(&b, m.events, a, top, y-gap)
	a.ticks(&b, top, y-gap)
	b.WriteString(`</svg>`)
	return b.String()
}

// memorySVG draws host memory in use, the cgroup's usage and the tree's RSS
// against MemTotal and the cgroup limit.
func memorySVG(m *model, a axis) string {
	if len(m.host) == 0 {
		return ""
	}
	const y0, y1 = 10.0, 170.0
	// The scale is what the run used and its limit, with room above; the
	// host's total only when it is near (a 2 TB host would flatten a 50 GB
	// run to its floor): above the scale it is named, not drawn.
	top := m.limit
	for _, s := range m.host {
		if p, ok := s.peak(); ok {
			top = math.Max(top, p.v)
		}
	}
	top *= 1.15
	if m.hostTotal > 0 && m.hostTotal <= 2*top {
		top = math.Max(top, m.hostTotal)
	}
	if top <= 0 {
		top = 1
	}
	var b strings.Builder
	svgOpen(&b, "memory", "host and cgroup memory over the run", y1+axisH+4)
	fmt.Fprintf(&b, `<rect class="frame" x="%d" y="%s" width="%d" height="%s"/>`, plotX0, f1(y0), plotX1-plotX0, f1(y1-y0))
	level := func(v float64, class, label string) {
		y := y1 - math.Min(v/top, 1)*(y1-y0)
		fmt.Fprintf(&b, `<line class="level %s" x1="%d" y1="%s" x2="%d" y2="%s"><title>%s %s</title></line><text class="lbl %s" x="%d" y="%s">%s %s</text>`,
			class, plotX0, f1(y), plotX1, f1(y), label, human.Bytes(int64(v)), class, plotX0-6, f1(y+4), label, human.Bytes(int64(v)))
	}
	switch {
	case m.hostTotal > 0 && m.hostTotal <= top:
		level(m.hostTotal, "memtotal", "MemTotal")
	case m.hostTotal > 0:
		fmt.Fprintf(&b, `<text class="lbl memtotal" x="%d" y="%s">MemTotal %s ↑</text>`, plotX0-6, f1(y0+8), human.Bytes(int64(m.hostTotal)))
	}
	if m.limit > 0 {
		level(m.limit, "limit", "cgroup limit")
	}
	for i, s := range m.host {
		polyline(&b, downsample(s.pts, a), a, y0, y1, top, s.class, i == 0)
		if p, ok := s.peak(); ok {
			peakMark(&b, p, a, y0, y1, top, s.class, s.name)
		}
	}
	markers(&b, m.events, a, y0, y1)
	a.ticks(&b, y0, y1)
	b.WriteString(`</svg>`)
	return b.String()
}

// shownProcs picks the lifelines worth a row when there are too many: the
// root, the faulting and the dying first, then the longest lived.
func shownProcs(ps []proc, end time.Time) []proc {
	if len(ps) <= maxRows {
		return ps
	}
	score := func(p proc) float64 {
		s := 0.0
		if p.root {
			s += 4e12
		}
		if p.faulting {
			s += 3e12
		}
		if p.signal != "" {
			s += 2e12
		}
		if p.code != nil && *p.code != 0 {
			s += 1e12
		}
		to := p.to
		if !p.exited {
			to = end
		}
		return s + to.Sub(p.from).Seconds()
	}
	idx := make([]int, len(ps))
	for i := range idx {
		idx[i] = i
	}
	// a partial selection keeps the original (pid) order of the chosen rows
	chosen := make([]bool, len(ps))
	for n := 0; n < maxRows; n++ {
		best := -1
		for i := range ps {
			if !chosen[i] && (best < 0 || score(ps[i]) > score(ps[best])) {
				best = i
			}
		}
		chosen[best] = true
	}
	out := make([]proc, 0, maxRows)
	for i, p := range ps {
		if chosen[i] {
			out = append(out, p)
		}
	}
	return out
}

// processSVG draws the tree as lifelines: birth, exit (signal deaths
// marked), the faulting pid highlighted.
func processSVG(m *model, a axis) (string, int) {
	if len(m.procs) == 0 {
		return "", 0
	}
	rows := shownProcs(m.procs, m.end)
	const rowH, top = 15.0, 6.0
	h := top + float64(len(rows))*rowH + axisH + 4
	var b strings.Builder
	svgOpen(&b, "processes", "process lifelines", h)
	for i, p := range rows {
		y := top + float64(i)*rowH + rowH/2
		cls := "life"
		switch {
		case p.faulting:
			cls += " faulting"
		case p.root:
			cls += " root"
		}
		to := p.to
		if !p.exited || to.IsZero() {
			to = a.end
		}
		end := p.ending()
		name := fmt.Sprintf("%d %s", p.pid, p.name)
		fmt.Fprintf(&b, `<g class="%s" data-pid="%d"><title>pid %d (parent %d) %s: %s → %s, %s</title>`,
			cls, p.pid, p.pid, p.ppid, esc(p.cmd), offset(p.from.Sub(a.start)), offset(to.Sub(a.start)), esc(end))
		fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%s">%s</text>`, plotX0-6, f1(y+4), esc(clip(name, 18)))
		x0, x1 := a.x(p.from), a.x(to)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/><circle class="birth" cx="%s" cy="%s" r="2.5" data-t="%d"/>`,
			f1(x0), f1(y), f1(math.Max(x1, x0+1)), f1(y), f1(x0), f1(y), a.ms(p.from))
		switch {
		case p.signal != "":
			fmt.Fprintf(&b, `<path class="death sig" d="M%s %sl6 6m0 -6l-6 6" data-t="%d"/><text class="sig" x="%s" y="%s">%s</text>`,
				f1(x1-3), f1(y-3), a.ms(to), f1(math.Min(x1+5, plotX1-60)), f1(y+4), esc(p.signal))
		case p.code != nil && *p.code != 0:
			fmt.Fprintf(&b, `<circle class="death bad" cx="%s" cy="%s" r="3" data-t="%d"/><text class="sig" x="%s" y="%s">exit %d</text>`,
				f1(x1), f1(y), a.ms(to), f1(math.Min(x1+5, plotX1-60)), f1(y+4), *p.code)
		case p.exited:
			fmt.Fprintf(&b, `<line class="death" x1="%s" y1="%s" x2="%s" y2="%s" data-t="%d"/>`, f1(x1), f1(y-4), f1(x1), f1(y+4), a.ms(to))
		}
		b.WriteString(`</g>`)
	}
	y1 := top + float64(len(rows))*rowH
	markers(&b, m.events, a, top, y1)
	a.ticks(&b, top, y1)
	b.WriteString(`</svg>`)
	return b.String(), len(rows)
}

// eventsSVG draws the kernel events, the evidence with a time, the hang or
// snapshot and the exit as numbered markers (the events table has the
// numbers), and the kernel-API calls of the log's last seconds as bars.
func eventsSVG(m *model, a axis) string {
	if len(m.events) == 0 && len(m.api) == 0 && len(m.apiMarks) == 0 {
		return ""
	}
	const y0, y1 = 6.0, 44.0
	h := y1 + axisH + 4
	apiY0, apiY1 := 0.0, 0.0
	if len(m.api) > 0 || len(m.apiMarks) > 0 {
		apiY0, apiY1 = y1+10, y1+58
		h = apiY1 + axisH + 4
	}
	var b strings.Builder
	svgOpen(&b, "events", "kernel events, evidence and kernel-API calls", h)
	fmt.Fprintf(&b, `<rect class="frame" x="%d" y="%s" width="%d" height="%s"/><text class="lbl" x="%d" y="%s">events</text>`,
		plotX0, f1(y0), plotX1-plotX0, f1(y1-y0), plotX0-6, f1((y0+y1)/2+4))
	for i, e := range m.events {
		if i == maxMarkers {
			break // the events table says how many more
		}
		x := a.x(e.t)
		fmt.Fprintf(&b, `<g class="ev k-%s" data-t="%d"><title>#%d %s %s: %s (%s)</title><path d="M%s %sl5 9h-10z"/><text x="%s" y="%s" text-anchor="middle">%d</text></g>`,
			e.kind, a.ms(e.t), i+1, offset(e.t.Sub(a.start)), esc(e.label), esc(e.text), esc(e.source),
			f1(x), f1(y0+14), f1(x), f1(y0+34), i+1)
	}
	end := y1
	if apiY1 > 0 {
		end = apiY1
		fmt.Fprintf(&b, `<rect class="frame" x="%d" y="%s" width="%d" height="%s"/><text class="lbl" x="%d" y="%s">kernel-API</text><text class="sub" x="%d" y="%s">calls/s</text>`,
			plotX0, f1(apiY0), plotX1-plotX0, f1(apiY1-apiY0), plotX0-6, f1(apiY0+18), plotX0-6, f1(apiY0+32))
		most := 1
		for _, s := range m.api {
			most = max(most, s.calls)
		}
		w := math.Max(a.x(a.start.Add(time.Second))-a.x(a.start), 1.5)
		for _, s := range m.api {
			hh := float64(s.calls) / float64(most) * (apiY1 - apiY0 - 4)
			top := ""
			for api, n := range s.apis {
				if top == "" || n > s.apis[top] || n == s.apis[top] && api < top {
					top = api
				}
			}
			fmt.Fprintf(&b, `<rect class="apibar" x="%s" y="%s" width="%s" height="%s" data-t="%d"><title>%s: %d calls (most: %s)</title></rect>`,
				f1(math.Min(a.x(s.t), plotX1-w)), f1(apiY1-hh), f1(w), f1(hh), a.ms(s.t), offset(s.t.Sub(a.start)), s.calls, esc(top))
		}
		for _, e := range m.apiMarks {
			x := a.x(e.t)
			fmt.Fprintf(&b, `<g class="apimark k-%s" data-t="%d"><title>%s %s: %s (%s)</title><line x1="%s" y1="%s" x2="%s" y2="%s"/><text x="%s" y="%s" text-anchor="end">%s</text></g>`,
				e.kind, a.ms(e.t), offset(e.t.Sub(a.start)), esc(e.label), esc(e.text), esc(e.source),
				f1(x), f1(apiY0), f1(x), f1(apiY1), f1(math.Max(x-3, plotX0+80)), f1(apiY0+12), esc(e.label))
		}
	}
	markers(&b, m.events, a, y0, end)
	a.ticks(&b, y0, end)
	b.WriteString(`</svg>`)
	return b.String()
}

// clip cuts s to n characters, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// apiZoom is the axis of the kernel-API close-up: the log's last seconds up
// to the end of the run (or of the log, when the run went on long after).
// ok is false when the shared axis already shows them readably.
func apiZoom(m *model, a axis) (axis, bool) {
	if len(m.api) == 0 || a.span() <= 4*apiWindow {
		return axis{}, false
	}
	end := m.api[len(m.api)-1].t.Add(time.Second)
	for _, e := range m.apiMarks {
		if e.t.After(end) {
			end = e.t.Add(time.Second)
		}
	}
	if m.end.After(end) && m.end.Sub(end) < apiWindow {
		end = m.end
	}
	return axis{end.Add(-apiWindow - time.Second), end}, true
}

// apiSVG is the close-up of the kernel-API calls of the log's last seconds
// on their own axis, with the unfinished call, the first non-finite value
// and the events of those seconds marked.
func apiSVG(m *model, shared axis) string {
	z, ok := apiZoom(m, shared)
	if !ok {
		return ""
	}
	const y0, y1 = 16.0, 86.0
	var b strings.Builder
	svgOpen(&b, "kernel-api", "kernel-API calls of the log's last seconds", y1+axisH+4)
	fmt.Fprintf(&b, `<rect class="frame" x="%d" y="%s" width="%d" height="%s"/><text class="lbl" x="%d" y="%s">kernel-API</text><text class="sub" x="%d" y="%s">calls/s</text>`,
		plotX0, f1(y0), plotX1-plotX0, f1(y1-y0), plotX0-6, f1(y0+18), plotX0-6, f1(y0+32))
	most := 1
	for _, s := range m.api {
		most = max(most, s.calls)
	}
	w := z.x(z.start.Add(time.Second)) - z.x(z.start) - 1
	for _, s := range m.api {
		if s.t.Before(z.start) {
			continue
		}
		hh := float64(s.calls) / float64(most) * (y1 - y0 - 4)
		fmt.Fprintf(&b, `<rect class="apibar" x="%s" y="%s" width="%s" height="%s" data-t="%d"><title>%s: %d calls</title></rect>`,
			f1(z.x(s.t)), f1(y1-hh), f1(w), f1(hh), z.ms(s.t), s.t.UTC().Format("15:04:05"), s.calls)
	}
	var in []event
	for _, e := range m.events {
		if !e.t.Before(z.start) && !e.t.After(z.end) {
			in = append(in, e)
		}
	}
	markers(&b, in, z, y0, y1)
	for _, e := range m.apiMarks {
		x := z.x(e.t)
		fmt.Fprintf(&b, `<g class="apimark k-%s" data-t="%d"><title>%s: %s (%s)</title><line x1="%s" y1="%s" x2="%s" y2="%s"/><text x="%s" y="%s" text-anchor="end">%s</text></g>`,
			e.kind, z.ms(e.t), esc(e.label), esc(e.text), esc(e.source), f1(x), f1(y0-10), f1(x), f1(y1), f1(math.Max(x-3, plotX0+80)), f1(y0-3), esc(e.label))
	}
	// the close-up's own ticks, as offsets from the shared axis's start
	step := 5 * time.Second
	for d := time.Duration(0); d <= z.span(); d += step { // a 31 s axis
		t := z.start.Add(d)
		x := z.x(t)
		fmt.Fprintf(&b, `<g class="grid"><line x1="%s" y1="%s" x2="%s" y2="%s"/><text x="%s" y="%s" text-anchor="middle">%s</text></g>`,
			f1(x), f1(y0), f1(x), f1(y1), f1(x), f1(y1+13), offset(t.Sub(shared.start)))
	}
	b.WriteString(`</svg>`)
	return b.String()
}
