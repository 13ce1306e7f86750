package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/software"
	"github.com/kcrash/kcrash/triage"
)

// How much of the logs the page shows.
const (
	outputLines = 200
	kmsgLines   = 300
	tableRows   = 500
)

type kv struct{ K, V string }

type findingRow struct {
	N                       int
	Role, Kind, Where, When string
	Text                    string
}

type row []string

// stepPart is a piece of a next step: text, or a `code` span.
type stepPart struct {
	Text string
	Code bool
}

// codeSpans splits a next step at its backquotes (the triage writes
// commands as Markdown code spans).
func codeSpans(s string) []stepPart {
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 { // an unpaired backquote: plain text
		return []stepPart{{Text: s}}
	}
	var out []stepPart
	for i, p := range parts {
		if p != "" {
			out = append(out, stepPart{Text: p, Code: i%2 == 1})
		}
	}
	return out
}

type table struct {
	Title, Note string
	Folded      bool // shown as a <details> the reader opens
	Head        []string
	Rows        []row
}

type chartView struct {
	Name, Title, Note string
	SVG               template.HTML
}

type pageData struct {
	Title      string
	Kind       string
	Confidence string
	Summary    string
	Meta       []kv
	Findings   []findingRow
	Suspect    []kv
	NextSteps  [][]stepPart
	AxisNote   string
	Charts     []chartView
	NoCharts   []string
	Tables     []table
	Output     string
	OutputNote string
	Kmsg       string
	KmsgNote   string
	Collectors []row
	// Stack is software.json in a line, with the GPU-serving packages and
	// runtime versions below it and the build problems it found.
	Stack       string
	StackRows   []row
	StackIssues []string
	Notes       []string
	Footer      string
}

// Write renders in's page to w.
func Write(w io.Writer, in *Input) error {
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, view(in)); err != nil {
		return err
	}
	// Each piece of bundle text is made visible (v) where it is placed; the
	// page as a whole is too, so that a cell that missed it still shows an
	// escape rather than acting on a terminal that cats the file. The
	// page's own markup holds no control character.
	_, err := w.Write(visible.Bytes(buf.Bytes()))
	return err
}

// v makes bundle text printable: control characters and invalid UTF-8 as
// escapes (html/template then escapes it for HTML).
func v(s string) string { return visible.String(s) }

func view(in *Input) *pageData {
	m := build(in)
	man := in.Manifest
	a := axis{m.start, m.end}
	d := &pageData{Kind: v(orText(m.triage.Verdict.Kind, "unknown")), Confidence: v(m.triage.Verdict.Confidence), Summary: v(m.triage.Verdict.Summary)}
	d.Title = "kcrash: " + d.Kind
	if in.Name != "" {
		d.Title += " — " + v(in.Name)
	}
	add := func(k, val string) {
		if val != "" {
			d.Meta = append(d.Meta, kv{k, v(val)})
		}
	}
	add("Command", shellJoin(man.Command))
	add("Exit", exitText(man))
	if man.Exit.Reason != "" && exitText(man) != man.Exit.Reason {
		add("Reason", man.Exit.Reason)
	}
	add("Mode", man.Mode)
	host := man.Host.Hostname
	if man.Host.Kernel != "" {
		host += " (Linux " + man.Host.Kernel + ")"
	}
	add("Host", host)
	if len(man.Host.GPUs) > 0 {
		add("GPUs", strings.Join(man.Host.GPUs, "; "))
	}
	if j := man.Job; j != nil {
		s := j.Scheduler
		if j.JobID != "" {
			s += " job " + j.JobID
		}
		if j.StepID != "" {
			s += " step " + j.StepID
		}
		if j.Rank != nil {
			s += fmt.Sprintf(" rank %d", *j.Rank)
		}
		if j.WorldSize != nil {
			s += fmt.Sprintf(" of %d", *j.WorldSize)
		}
		if j.Node != "" {
			s += " on " + j.Node
		}
		add("Job", s)
	}
	if !man.StartTime.IsZero() {
		add("Start", man.StartTime.UTC().Format(time.RFC3339Nano))
	}
	if !man.EndTime.IsZero() {
		add("End", man.EndTime.UTC().Format(time.RFC3339Nano))
		if !man.StartTime.IsZero() {
			add("Duration", human.Duration(man.EndTime.Sub(man.StartTime)))
		}
	}
	add("Bundle", in.Name)
	add("kcrash", man.KcrashVersion)

	for i, f := range m.triage.Findings {
		role := f.Details.Text(detail.VerdictRole)
		if role == triage.RoleIgnored {
			continue
		}
		r := findingRow{N: i + 1, Role: v(strings.ReplaceAll(role, "_", " ")), Kind: v(string(f.Kind)), Where: v(f.Source + " " + location(f)), Text: v(f.Text)}
		if f.Time != nil {
			r.When = f.Time.UTC().Format("15:04:05.000") + " (" + offset(f.Time.Sub(a.start)) + ")"
		}
		d.Findings = append(d.Findings, r)
	}
	if ka := m.triage.KernelAPI; ka != nil {
		c := ka.UnfinishedCall
		what := "started and never returned"
		if c == nil && ka.LastCall != nil {
			c, what = ka.LastCall, "the last call logged"
		}
		if c != nil {
			d.Suspect = append(d.Suspect, kv{"Call", v(c.API)}, kv{"State", what}, kv{"Where", v(fmt.Sprintf("%s:%d", c.File, c.Line))})
			for _, arg := range c.Args {
				d.Suspect = append(d.Suspect, kv{v(arg.Name), v(strings.TrimSpace(strings.Join([]string{arg.Type, arg.Shape, arg.Dtype, arg.Device, arg.Value}, " ")))})
			}
		}
		if n := ka.FirstNonfinite; n != nil {
			d.Suspect = append(d.Suspect, kv{"First non-finite", v(fmt.Sprintf("%s %s nan_count=%d inf_count=%d (%s:%d)", n.Call.API, n.Arg.Name, n.Arg.NanCount, n.Arg.InfCount, n.Call.File, n.Call.Line))})
		}
	}
	for _, s := range m.triage.NextSteps {
		d.NextSteps = append(d.NextSteps, codeSpans(v(s)))
	}

	if !a.start.IsZero() {
		d.AxisNote = fmt.Sprintf("One time axis for every chart: %s (0) to %s (%s), UTC. Hover a line or marker for its exact value; the tables below give them all.",
			a.start.UTC().Format("2006-01-02 15:04:05.000"), a.end.UTC().Format("15:04:05.000"), offset(a.span()))
		d.charts(m, a, in)
	}
	d.tables(m, a)
	d.logs(in)
	for _, c := range man.Collectors {
		d.Collectors = append(d.Collectors, row{v(c.Name), v(c.Status), fmt.Sprintf("%d ms", c.DurationMS), v(c.Error), v(strings.Join(c.Files, ", "))})
	}
	d.software(in)
	for _, n := range append(append([]string{}, man.Notes...), m.notes...) {
		d.Notes = append(d.Notes, v(n))
	}
	if len(man.Truncated) > 0 {
		d.Notes = append(d.Notes, v("cut to fit the bundle's size budget: "+strings.Join(man.Truncated, ", ")))
	}
	d.Footer = fmt.Sprintf("Made by kcrash %s from the bundle's files (redacted as the bundle is). The page is self-contained: it loads nothing and needs no JavaScript.", v(orText(man.KcrashVersion, "?")))
	return d
}

func (d *pageData) charts(m *model, a axis, in *Input) {
	if s := vramSVG(m, a); s != "" {
		d.Charts = append(d.Charts, chartView{Name: "vram", Title: "VRAM per GPU", Note: "Used VRAM against each GPU's total; bands are the run's own processes where the smi reports them; dots mark each GPU's peak.", SVG: template.HTML(s)})
	} else {
		d.NoCharts = append(d.NoCharts, "VRAM: "+v(orText(collectorWhy(in, "gpu"), "no GPU samples in the bundle")))
	}
	if s := memorySVG(m, a); s != "" {
		note := "Host memory in use (MemTotal − MemAvailable, filled), the run's cgroup usage and the process tree's RSS."
		if m.limit > 0 {
			note += " The red line is the cgroup limit."
		}
		if m.oomKills > 0 {
			note += fmt.Sprintf(" The cgroup counted %d OOM kill(s) during the run.", m.oomKills)
		}
		d.Charts = append(d.Charts, chartView{Name: "memory", Title: "Host and cgroup memory", Note: note, SVG: template.HTML(s)})
	} else {
		d.NoCharts = append(d.NoCharts, "Memory: "+v(orText(collectorWhy(in, "memory"), "no memory samples in the bundle")))
	}
	if s, rows := processSVG(m, a); s != "" {
		note := "Each process of the tree from birth to exit; × is a death by signal, the highlighted line the process the evidence names."
		if rows < len(m.procs) {
			note += fmt.Sprintf(" %d of %d processes drawn (the root, the failing and the longest lived); the table lists them all.", rows, len(m.procs))
		}
		d.Charts = append(d.Charts, chartView{Name: "processes", Title: "Processes", Note: note, SVG: template.HTML(s)})
	} else {
		d.NoCharts = append(d.NoCharts, "Processes: "+v(orText(collectorWhy(in, "processes"), "no process tree in the bundle")))
	}
	if s := eventsSVG(m, a); s != "" {
		note := "Kernel events and evidence with a time (numbers as in the events table), the hang or snapshot, the exit."
		if len(m.api) > 0 {
			note += fmt.Sprintf(" Below: the kernel-API calls per second of the log's last %s (1 s resolution, as the log writes them).", apiWindow)
		}
		d.Charts = append(d.Charts, chartView{Name: "events", Title: "Events and kernel-API calls", Note: note, SVG: template.HTML(s)})
	}
	if s := apiSVG(m, a); s != "" {
		d.Charts = append(d.Charts, chartView{Name: "kernel-api", Title: "Kernel-API calls, close-up", Note: fmt.Sprintf("The last %s of the kernel-API log on their own axis (labels are offsets from the run's start): calls per second, the call that never returned, the first non-finite value, and the events of those seconds.", apiWindow), SVG: template.HTML(s)})
	}
}

// collectorWhy is the collector's own reason for drawing nothing.
func collectorWhy(in *Input, name string) string {
	for _, c := range in.Manifest.Collectors {
		if c.Name == name && c.Error != "" {
			return c.Status + ": " + c.Error
		}
	}
	return ""
}

func (d *pageData) tables(m *model, a axis) {
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("15:04:05.000") + " (" + offset(t.Sub(a.start)) + ")"
	}
	bytesOf := func(f float64) string { return human.Bytes(int64(f)) }
	if len(m.gpus) > 0 {
		t := table{Title: "VRAM", Head: []string{"GPU", "total", "peak used", "at", "last", "run's processes (peak)"}}
		for _, l := range m.gpus {
			r := row{v(l.label), "unknown", "", "", "", ""}
			if l.total > 0 {
				r[1] = bytesOf(l.total)
			}
			if p, ok := l.used.peak(); ok {
				r[2], r[3] = bytesOf(p.v), at(p.t)
				if l.total > 0 {
					r[2] += fmt.Sprintf(" (%.0f%%)", p.v/l.total*100)
				}
			}
			if p, ok := l.used.last(); ok {
				r[4] = bytesOf(p.v)
			}
			var cs []string
			for _, c := range l.child {
				cs = append(cs, v(c.label)+" "+bytesOf(c.peak))
			}
			r[5] = strings.Join(cs, "; ")
			t.Rows = append(t.Rows, r)
		}
		d.Tables = append(d.Tables, t)
	}
	if len(m.host) > 0 {
		t := table{Title: "Memory", Head: []string{"series", "peak", "at", "last"}}
		for _, s := range m.host {
			p, _ := s.peak()
			l, _ := s.last()
			t.Rows = append(t.Rows, row{s.name, bytesOf(p.v), at(p.t), bytesOf(l.v)})
		}
		if m.hostTotal > 0 {
			t.Rows = append(t.Rows, row{"MemTotal", bytesOf(m.hostTotal), "", ""})
		}
		if m.limit > 0 {
			t.Rows = append(t.Rows, row{"cgroup limit " + v(m.limitPath), bytesOf(m.limit), "", ""})
		}
		d.Tables = append(d.Tables, t)
	}
	if t, ok := samplesTable(m, at); ok {
		d.Tables = append(d.Tables, t)
	}
	if len(m.events) > 0 || len(m.apiMarks) > 0 {
		t := table{Title: "Events", Head: []string{"#", "time", "what", "text", "source"}}
		for i, e := range m.events {
			if i == tableRows {
				t.Note = fmt.Sprintf("the first %d of %d events (%d drawn)", tableRows, len(m.events), min(len(m.events), maxMarkers))
				break
			}
			t.Rows = append(t.Rows, row{fmt.Sprint(i + 1), at(e.t), v(e.label), v(e.text), v(e.source)})
		}
		for _, e := range m.apiMarks {
			t.Rows = append(t.Rows, row{"", at(e.t), v(e.label), v(e.text), v(e.source)})
		}
		d.Tables = append(d.Tables, t)
	}
	if len(m.api) > 0 {
		t := table{Title: "Kernel-API calls per second", Head: []string{"second", "calls", "APIs"}}
		for _, s := range m.api {
			var parts []string
			for api, n := range s.apis {
				parts = append(parts, fmt.Sprintf("%s ×%d", api, n))
			}
			sortStrings(parts)
			t.Rows = append(t.Rows, row{at(s.t), fmt.Sprint(s.calls), v(strings.Join(parts, ", "))})
		}
		d.Tables = append(d.Tables, t)
	}
	if len(m.procs) > 0 {
		t := table{Title: "Processes", Head: []string{"pid", "parent", "name", "born", "ended", "how", "command line"}}
		for i, p := range m.procs {
			if i == tableRows {
				t.Note = fmt.Sprintf("the first %d of %d processes; processes.json has them all", tableRows, len(m.procs))
				break
			}
			how := v(p.ending())
			if p.faulting {
				how += " · named by the evidence"
			}
			end := ""
			if p.exited {
				end = at(p.to)
			}
			t.Rows = append(t.Rows, row{fmt.Sprint(p.pid), fmt.Sprint(p.ppid), v(p.name), at(p.from), end, how, v(clip(p.cmd, 300))})
		}
		d.Tables = append(d.Tables, t)
	}
}

// samplesRows is how many sampled moments the samples table lists.
const samplesRows = 120

// samplesTable lists every series' value at up to samplesRows moments spread
// over the run (the sample at or before each): the exact numbers behind
// the lines, peaks aside (the tables above have those).
func samplesTable(m *model, at func(time.Time) string) (table, bool) {
	var cols []series
	var head = []string{"time"}
	for _, l := range m.gpus {
		cols = append(cols, l.used)
		head = append(head, l.label+" used")
	}
	for _, s := range m.host {
		cols = append(cols, s)
		head = append(head, s.name)
	}
	base := -1
	for i, c := range cols {
		if base < 0 || len(c.pts) > len(cols[base].pts) {
			base = i
		}
	}
	if base < 0 || len(cols[base].pts) == 0 {
		return table{}, false
	}
	pts := cols[base].pts
	t := table{Title: "Samples", Folded: true, Head: head}
	n := min(len(pts), samplesRows)
	t.Note = fmt.Sprintf("%d of %d sampled moments, evenly spread; each value is the sample at or before the moment", n, len(pts))
	for k := 0; k < n; k++ {
		i := k * (len(pts) - 1) / max(n-1, 1)
		when := pts[i].t
		r := row{at(when)}
		for _, c := range cols {
			j := sort.Search(len(c.pts), func(j int) bool { return c.pts[j].t.After(when) }) - 1
			if j < 0 {
				r = append(r, "")
				continue
			}
			r = append(r, human.Bytes(int64(c.pts[j].v)))
		}
		t.Rows = append(t.Rows, r)
	}
	return t, true
}

func (d *pageData) logs(in *Input) {
	if out := in.file("output.log"); len(out) > 0 {
		lines := triage.LastLines(out, outputLines)
		for i, l := range lines {
			lines[i] = visible.Line(strings.TrimRight(triage.TerminalLine(l), " \t"))
		}
		d.Output = strings.Join(lines, "\n")
		d.OutputNote = fmt.Sprintf("the last %d lines of output.log as a terminal shows them (carriage-return frames overwritten, colours dropped)", len(lines))
	}
	if k := in.file("kmsg.log"); len(k) > 0 {
		lines := triage.LastLines(k, kmsgLines)
		for i, l := range lines {
			lines[i] = visible.Line(l)
		}
		d.Kmsg = strings.Join(lines, "\n")
		d.KmsgNote = fmt.Sprintf("the last %d lines of kmsg.log (the run's window)", len(lines))
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// shellJoin quotes argv as a shell would need it.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

// software fills the page's stack section from software.json: what a ticket's
// first reply always asks ("which versions?").
func (d *pageData) software(in *Input) {
	raw, ok := in.File("software.json")
	if !ok {
		return
	}
	var rep software.Report
	if json.Unmarshal(raw, &rep) != nil {
		d.Notes = append(d.Notes, "software.json is not readable")
		return
	}
	d.Stack = v(software.Line(&rep))
	if len(rep.Python) > 0 {
		py := rep.Python[0]
		for _, p := range py.Packages {
			if !p.GPU && p.Editable == nil {
				continue
			}
			var build []string
			if p.CUDA != "" {
				build = append(build, "CUDA "+p.CUDA)
			}
			if p.HIP != "" {
				build = append(build, "HIP "+p.HIP)
			}
			install := "site-packages"
			if e := p.Editable; e != nil {
				install = "develop: " + e.Source
				if e.Stale {
					install += " (sources newer than its built .so files)"
				}
			}
			d.StackRows = append(d.StackRows, row{v(p.Name), v(p.Version), v(strings.Join(build, ", ")), v(install)})
		}
	}
	rt := rep.Runtime
	for _, r := range [][2]string{{"NVIDIA driver", rt.NVIDIADriver}, {"CUDA toolkit", rt.CUDA}, {"ROCm", rt.ROCm}, {"amdgpu", rt.AMDGPU}} {
		if r[1] != "" {
			d.StackRows = append(d.StackRows, row{v(r[0]), v(r[1]), "", "host"})
		}
	}
	for _, is := range rep.Issues {
		d.StackIssues = append(d.StackIssues, v(is.Text))
	}
}
