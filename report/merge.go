package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/kcrash/kcrash/merge"
)

// WriteMerge renders `kcrash merge --html`: every rank on one time axis
// (its run from start to end, its evidence as markers), the first failure
// marked, and the ranks and the merged timeline as tables.
func WriteMerge(w io.Writer, r *merge.Result) error {
	d := mergeData{Title: "kcrash merge: " + fmt.Sprint(len(r.Ranks)) + " bundles", Line: v(r.Line())}
	var start, end time.Time
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if start.IsZero() || t.Before(start) {
			start = t
		}
		if end.IsZero() || t.After(end) {
			end = t
		}
	}
	for _, rk := range r.Ranks {
		see(rk.Start)
		see(rk.End)
	}
	for _, e := range r.Timeline {
		see(e.Time)
	}
	if !start.IsZero() {
		if !end.After(start) {
			end = start.Add(time.Second)
		}
		a := axis{start, end}
		d.SVG = template.HTML(ranksSVG(r, a))
		d.AxisNote = fmt.Sprintf("One time axis: %s (0) to %s (%s), UTC.", start.UTC().Format("2006-01-02 15:04:05.000"), end.UTC().Format("15:04:05.000"), offset(a.span()))
		at := func(t *time.Time) string {
			if t == nil || t.IsZero() {
				return ""
			}
			return t.UTC().Format("15:04:05.000") + " (" + offset(t.Sub(start)) + ")"
		}
		for _, rk := range r.Ranks {
			role := ""
			switch {
			case r.FirstFailure != nil && rk.Bundle == r.FirstFailure.Bundle:
				role = "first failure"
			case rk.Secondary:
				role = "secondary"
			}
			d.Ranks = append(d.Ranks, row{rankLabel(rk.Rank), v(rk.Host), v(rk.Verdict), role, at(rk.FirstEvidenceTime), v(merge.ExitText(rk.Exit)), v(filepath.Base(rk.Bundle)), v(rk.Summary)})
		}
		for i, e := range r.Timeline {
			if i == tableRows {
				d.TimelineNote = fmt.Sprintf("the first %d of %d events", tableRows, len(r.Timeline))
				break
			}
			t := e.Time
			d.Timeline = append(d.Timeline, row{at(&t), rankLabel(e.Rank), v(e.Host), v(e.Kind), v(e.Source), v(clip(e.Text, 400))})
		}
	}
	for _, err := range r.Skipped {
		d.Skipped = append(d.Skipped, v(err.Error()))
	}
	var buf bytes.Buffer
	if err := mergeTmpl.Execute(&buf, d); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type mergeData struct {
	Title, Line, AxisNote, TimelineNote string
	SVG                                 template.HTML
	Ranks, Timeline                     []row
	Skipped                             []string
}

func rankLabel(r *int) string {
	if r == nil {
		return "?"
	}
	return fmt.Sprint(*r)
}

// ranksSVG draws one row per bundle: the run as a bar, its timed evidence as
// ticks, its exit, and a ring around the first failure's first evidence.
func ranksSVG(r *merge.Result, a axis) string {
	const rowH, top = 22.0, 6.0
	h := top + float64(len(r.Ranks))*rowH + axisH + 4
	var b strings.Builder
	svgOpen(&b, "ranks", "ranks on one time axis", h)
	for i, rk := range r.Ranks {
		y := top + float64(i)*rowH + rowH/2
		first := r.FirstFailure != nil && rk.Bundle == r.FirstFailure.Bundle
		cls := "rank"
		switch {
		case first:
			cls += " first"
		case rk.Secondary:
			cls += " secondary"
		}
		fmt.Fprintf(&b, `<g class="%s" data-rank="%s"><title>rank %s on %s: %s (%s)</title>`, cls, rankLabel(rk.Rank), rankLabel(rk.Rank), esc(rk.Host), esc(rk.Verdict), esc(merge.ExitText(rk.Exit)))
		fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%s">rank %s %s</text>`, plotX0-6, f1(y+4), rankLabel(rk.Rank), esc(clip(rk.Host, 12)))
		from, to := rk.Start, rk.End
		if from.IsZero() {
			from = a.start
		}
		if to.IsZero() {
			to = a.end
		}
		x0, x1 := a.x(from), a.x(to)
		fmt.Fprintf(&b, `<rect class="run" x="%s" y="%s" width="%s" height="8"/>`, f1(x0), f1(y-4), f1(math.Max(x1-x0, 1)))
		b.WriteString(`</g>`)
		for _, e := range r.Timeline {
			if !sameRank(e, rk) {
				continue
			}
			x := a.x(e.Time)
			kind := "ev"
			if e.Kind == "exit" {
				kind = "exit"
			}
			fmt.Fprintf(&b, `<line class="tick %s" x1="%s" y1="%s" x2="%s" y2="%s" data-t="%d"><title>%s rank %s: %s: %s</title></line>`,
				kind, f1(x), f1(y-8), f1(x), f1(y+8), a.ms(e.Time), offset(e.Time.Sub(a.start)), rankLabel(rk.Rank), esc(e.Kind), esc(clip(e.Text, 300)))
		}
		if first && r.FirstFailure.Time != nil {
			t := *r.FirstFailure.Time
			fmt.Fprintf(&b, `<g class="firstfail" data-t="%d"><title>first failure: rank %s %s at %s</title><circle cx="%s" cy="%s" r="7"/><text x="%s" y="%s">first failure</text></g>`,
				a.ms(t), rankLabel(rk.Rank), esc(r.FirstFailure.Verdict), offset(t.Sub(a.start)), f1(a.x(t)), f1(y), f1(math.Min(a.x(t)+10, plotX1-70)), f1(y-7))
		}
	}
	a.ticks(&b, top, top+float64(len(r.Ranks))*rowH)
	b.WriteString(`</svg>`)
	return b.String()
}

func sameRank(e merge.Event, rk *merge.Rank) bool {
	if (e.Rank == nil) != (rk.Rank == nil) || e.Host != rk.Host {
		return false
	}
	return e.Rank == nil || *e.Rank == *rk.Rank
}

var mergeTmpl = template.Must(template.New("merge").Parse(pageHTML[:strings.Index(pageHTML, "<body>")] + `<body>
<main>
<section id="verdict" class="verdict"><h1>{{.Line}}</h1></section>
{{if .SVG}}<h2>Ranks</h2><p class="note">{{.AxisNote}} A bar is a rank's run, ticks its evidence and exit; the ring marks the first failure's first evidence.</p>
{{.SVG}}{{end}}
<h3>Ranks</h3>
<table class="data" id="ranks"><tr><th>rank</th><th>host</th><th>verdict</th><th>role</th><th>first evidence</th><th>exit</th><th>bundle</th><th>summary</th></tr>
{{range .Ranks}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{if .Timeline}}<h3>Timeline</h3>{{if .TimelineNote}}<p class="note">{{.TimelineNote}}</p>{{end}}
<table class="data"><tr><th>time</th><th>rank</th><th>host</th><th>kind</th><th>source</th><th>text</th></tr>
{{range .Timeline}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{if .Skipped}}<h3>Skipped</h3><ul>{{range .Skipped}}<li>{{.}}</li>{{end}}</ul>{{end}}
<p class="note">Made by kcrash merge from the bundles' manifests. The page is self-contained: it loads nothing and needs no JavaScript.</p>
</main>
</body>
</html>
`))
