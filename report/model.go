package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/kernelapi"
)

// point is one sample of a series.
type point struct {
	t time.Time
	v float64
}

// series is one line of a chart; peak is its exact maximum, kept whatever
// the drawing drops.
type series struct {
	name  string
	class string // css class of the line
	pts   []point
}

func (s *series) peak() (point, bool) {
	if len(s.pts) == 0 {
		return point{}, false
	}
	p := s.pts[0]
	for _, q := range s.pts[1:] {
		if q.v > p.v {
			p = q
		}
	}
	return p, true
}

func (s *series) last() (point, bool) {
	if len(s.pts) == 0 {
		return point{}, false
	}
	return s.pts[len(s.pts)-1], true
}

// gpuLane is one GPU of the VRAM chart.
type gpuLane struct {
	label string
	used  series
	total float64 // 0 when unknown
	child []span  // the run's own processes on this GPU
}

// span is a value held over a stretch of time (a process's VRAM).
type span struct {
	from, to time.Time
	v, peak  float64
	label    string
}

// proc is one lifeline.
type proc struct {
	pid, ppid      int
	name, cmd      string
	from, to       time.Time
	exited         bool
	code           *int
	signal         string
	core           bool
	root, faulting bool
}

// ending is how the process ended, as the lifelines and the table say it.
func (p *proc) ending() string {
	switch {
	case p.signal != "":
		if p.core {
			return "killed by " + p.signal + " (core dumped)"
		}
		return "killed by " + p.signal
	case p.code != nil:
		return fmt.Sprintf("exit %d", *p.code)
	case p.exited:
		return "exited"
	}
	return "running at collection"
}

// event is one marker: a kernel event, an evidence line with a time, the
// hang detector, a snapshot, the exit.
type event struct {
	t      time.Time
	kind   string // css class: fault, xid, oom, reset, hang, exit, other
	label  string
	text   string
	source string
}

// apiSecond is the kernel-API calls logged in one second.
type apiSecond struct {
	t     time.Time
	calls int
	apis  map[string]int
}

// model is everything the page draws.
type model struct {
	start, end time.Time
	man        *bundle.Manifest
	triage     triageDoc
	gpus       []gpuLane
	gpuErrs    []string
	host       []series // host used, tree RSS, cgroup usage
	hostTotal  float64
	limit      float64
	limitPath  string
	oomKills   uint64
	procs      []proc
	events     []event
	api        []apiSecond
	apiMarks   []event
	notes      []string
}

// triageDoc is SPEC §5's object as the page reads it.
type triageDoc struct {
	Verdict struct {
		Kind       string `json:"kind"`
		Confidence string `json:"confidence"`
		Summary    string `json:"summary"`
	} `json:"verdict"`
	Findings  []evidence.Finding `json:"findings"`
	KernelAPI *kernelapi.Report  `json:"kernel_api"`
	NextSteps []string           `json:"next_steps"`
}

func build(in *Input) *model {
	m := &model{start: in.Manifest.StartTime, end: in.Manifest.EndTime, man: &in.Manifest}
	if len(in.Manifest.Triage) > 0 && string(in.Manifest.Triage) != "null" {
		if err := json.Unmarshal(in.Manifest.Triage, &m.triage); err != nil {
			m.notes = append(m.notes, "manifest.json triage: "+err.Error())
		}
	}
	in.parseKept()
	m.readGPU(in.tl.gpu)
	m.readMemory(in.tl.mem)
	m.readProcesses(in.tl.procs)
	m.readEvents(in)
	m.readKernelAPI(in.file("kernel-api.log"))
	m.fixAxis()
	return m
}

// readable notes what stopped a streamed file; it is drawn up to there
// when it had anything.
func (m *model) readable(file string, err error, read int) bool {
	switch {
	case err == nil:
		return true
	case read == 0:
		m.bad(file, err)
		return false
	}
	m.notes = append(m.notes, fmt.Sprintf("%s: %v (drawn up to there)", file, err))
	return true
}

func (m *model) bad(file string, err error) {
	m.notes = append(m.notes, fmt.Sprintf("%s: %v (not drawn)", file, err))
}

// axisSlack is how far outside the manifest's start and end a sample may
// widen the axis: a clock gone wrong (or a crafted bundle) must not stretch
// it over centuries.
const axisSlack = 24 * time.Hour

// maxAxis is the longest axis drawn.
const maxAxis = 90 * 24 * time.Hour

// see widens the axis to take in a sample's time t.
func (m *model) see(t time.Time) {
	if t.IsZero() {
		return
	}
	ms, me := m.man.StartTime, m.man.EndTime
	if !ms.IsZero() && t.Before(ms.Add(-axisSlack)) || !me.IsZero() && t.After(me.Add(axisSlack)) {
		return
	}
	if m.start.IsZero() || t.Before(m.start) {
		m.start = t
	}
	if m.end.IsZero() || t.After(m.end) {
		m.end = t
	}
}

type gpuSample struct {
	Time time.Time `json:"time"`
	GPUs []struct {
		Index       int      `json:"index"`
		BusID       string   `json:"bus_id"`
		Name        string   `json:"name"`
		UsedBytes   *uint64  `json:"vram_used_bytes"`
		TotalBytes  *uint64  `json:"vram_total_bytes"`
		UsedPercent *float64 `json:"vram_used_percent"`
		MIG         string   `json:"mig"`
	} `json:"gpus"`
}

func (m *model) readGPU(d *gpuRead) {
	if d == nil {
		return
	}
	if !m.readable("gpu.json", d.err, d.samples) {
		return
	}
	lanes := map[string]*gpuLane{}
	reduced := 0
	for _, k := range d.order {
		l := d.lanes[k]
		pts, cut := l.used.points()
		if cut {
			reduced = max(reduced, len(pts))
		}
		lanes[k] = &gpuLane{label: l.label, used: series{name: "used", class: "used", pts: pts}, total: l.total}
	}
	for _, p := range d.spans {
		key, ok := d.busOf[strings.ToLower(p.gpu)]
		if !ok {
			key, ok = d.busOf[normBus(p.gpu)]
		}
		if !ok {
			continue
		}
		lanes[key].child = append(lanes[key].child, p.sp)
	}
	if d.spansLeft > 0 {
		m.notes = append(m.notes, fmt.Sprintf("gpu.json: %d of the run's processes on the GPUs drawn, %d more left out", len(d.spans), d.spansLeft))
	}
	if len(d.extra) > 0 {
		more := fmt.Sprint(len(d.extra))
		if len(d.extra) == maxLaneKeys {
			more = "at least " + more
		}
		m.notes = append(m.notes, fmt.Sprintf("gpu.json: %s more GPUs than the first %d drawn", more, maxLanes))
	}
	if reduced > 0 {
		m.notes = append(m.notes, fmt.Sprintf("gpu.json: %d samples, at most %d points drawn per GPU (each stretch's first, lowest, highest and last: every spike stays)", d.samples, reduced))
	}
	for _, k := range d.order {
		l := lanes[k]
		for _, p := range l.used.pts {
			m.see(p.t)
		}
		sort.SliceStable(l.used.pts, func(i, j int) bool { return l.used.pts[i].t.Before(l.used.pts[j].t) })
		m.gpus = append(m.gpus, *l)
	}
	m.gpuErrs = append(m.gpuErrs, d.toolErrs...)
	if d.errsLeft > 0 {
		m.gpuErrs = append(m.gpuErrs, fmt.Sprintf("%d more tool errors left out", d.errsLeft))
	}
}

// normBus turns nvidia-smi's 8-digit domain (00000000:17:00.0) into the
// 4-digit one sysfs and the samples use.
func normBus(b string) string {
	b = strings.ToLower(b)
	if len(b) == 16 && strings.HasPrefix(b, "0000") {
		return b[4:]
	}
	return b
}

type memSample struct {
	Time             time.Time         `json:"time"`
	Meminfo          map[string]uint64 `json:"meminfo"`
	TreeRSSBytes     uint64            `json:"tree_rss_bytes"`
	TreeProcs        int               `json:"tree_procs"`
	CgroupUsageBytes *uint64           `json:"cgroup_usage_bytes"`
}

func (m *model) readMemory(d *memRead) {
	if d == nil {
		return
	}
	if !m.readable("memory.json", d.err, d.samples) {
		return
	}
	m.hostTotal = max(m.hostTotal, d.hostTotal)
	if c := d.cgroup; c != nil {
		switch {
		case c.EffectiveLimitBytes != nil:
			m.limit, m.limitPath = float64(*c.EffectiveLimitBytes), clipText(c.EffectiveLimitPath, maxTextKept)
		case c.End != nil && c.End.LimitBytes != nil:
			m.limit, m.limitPath = float64(*c.End.LimitBytes), clipText(c.Path, maxTextKept)
		}
		if c.OOMKillDelta != nil {
			m.oomKills = *c.OOMKillDelta
		}
	}
	reduced := 0
	for _, l := range []struct {
		dec         *decimator
		name, class string
	}{{&d.used, "host used (MemTotal − MemAvailable)", "host"}, {&d.cg, "cgroup usage", "cg"}, {&d.rss, "process tree RSS", "rss"}} {
		pts, cut := l.dec.points()
		if len(pts) == 0 {
			continue
		}
		if cut {
			reduced = max(reduced, len(pts))
		}
		for _, p := range pts {
			m.see(p.t)
		}
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].t.Before(pts[j].t) })
		m.host = append(m.host, series{name: l.name, class: l.class, pts: pts})
	}
	if reduced > 0 {
		m.notes = append(m.notes, fmt.Sprintf("memory.json: %d samples, at most %d points drawn per line (each stretch's first, lowest, highest and last: every spike stays)", d.samples, reduced))
	}
}

func (m *model) readProcesses(d *procRead) {
	if d == nil {
		return
	}
	if !m.readable("processes.json", d.err, d.total) {
		return
	}
	faulting := map[int]bool{}
	for _, f := range m.triage.Findings {
		if f.Pid > 0 && f.Source != evidence.SourceExit && f.Attribution != "unrelated" {
			faulting[f.Pid] = true
		}
	}
	for _, k := range d.kept {
		p := k.p
		from := p.StartTime
		if from.IsZero() {
			from = p.FirstSeen
		}
		pr := proc{pid: int(p.Pid), ppid: int(p.PPid), name: p.Name, cmd: strings.Join(p.Cmdline, " "), from: from,
			exited: p.Exited, code: p.ExitCode, signal: p.ExitSignal, core: p.CoreDumped,
			root: int(p.Pid) == d.rootPid, faulting: faulting[int(p.Pid)]}
		if p.Exited {
			pr.to = p.LastSeen
		}
		m.procs = append(m.procs, pr)
	}
	if len(d.kept) < d.total {
		m.notes = append(m.notes, fmt.Sprintf("processes.json: %d processes, %d processes shown (the run's root, those that ended abnormally, then the largest by RSS); %d left out", d.total, len(d.kept), d.total-len(d.kept)))
	}
}

// eventKind sorts a finding into a marker class.
func eventKind(f evidence.Finding) string {
	low := strings.ToLower(f.Text)
	switch {
	case f.Xid != 0:
		return "xid"
	case f.Kind == evidence.HostOOM:
		return "oom"
	case f.Kind == evidence.GPUHang || strings.Contains(low, "reset"):
		return "reset"
	case f.Kind == evidence.GPUPageFault || f.Kind == evidence.GPUIllegalMemoryAccess || f.Kind == evidence.GPUDeviceAssert || f.Kind == evidence.GPUHardwareError:
		return "fault"
	case f.Kind == evidence.Hang:
		return "hang"
	}
	return "other"
}

func (m *model) readEvents(in *Input) {
	seen := map[string]bool{}
	dropped := 0
	add := func(f evidence.Finding) {
		if f.Time == nil {
			return
		}
		if len(m.events) >= maxEvents {
			dropped++
			return
		}
		k := f.Time.String() + "\x00" + f.Text
		if seen[k] {
			return
		}
		seen[k] = true
		label := string(f.Kind)
		if f.Xid != 0 {
			label = fmt.Sprintf("Xid %d", f.Xid)
		}
		kind := eventKind(f)
		if f.Attribution == "unrelated" {
			// another process's, shown for context, never as this run's cause
			kind, label = "unrelated", label+" (not this run's)"
		}
		m.events = append(m.events, event{t: *f.Time, kind: kind, label: label, text: f.Text, source: location(f)})
	}
	for _, f := range m.triage.Findings {
		add(f)
	}
	if d := in.tl.kmsg; d != nil {
		m.readable("raw/kmsg-findings.json", d.err, len(d.findings))
		for _, f := range d.findings {
			add(f)
		}
		if d.left > 0 {
			m.notes = append(m.notes, fmt.Sprintf("raw/kmsg-findings.json: the first %d findings with a time drawn, %d more left out", len(d.findings), d.left))
		}
	}
	if dropped > 0 {
		m.notes = append(m.notes, fmt.Sprintf("%d events drawn, %d more left out", maxEvents, dropped))
	}
	man := in.Manifest
	end := man.EndTime
	switch man.Mode {
	case "hang":
		m.events = append(m.events, event{t: end, kind: "hang", label: "hang declared", text: orText(man.Exit.Reason, "kcrash's hang detector fired"), source: "manifest.json"})
	case "snapshot": // --snapshot-signal
		m.events = append(m.events, event{t: end, kind: "hang", label: "snapshot", text: orText(man.Exit.Reason, "snapshot of the live run"), source: "manifest.json"})
	}
	if ex := exitText(man); (man.Exit.Code != nil || man.Exit.Signal != nil) && !end.IsZero() {
		m.events = append(m.events, event{t: end, kind: "exit", label: "exit", text: ex, source: "manifest.json"})
	}
	sort.SliceStable(m.events, func(i, j int) bool { return m.events[i].t.Before(m.events[j].t) })
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// location is "file:line" of a finding, or its source.
func location(f evidence.Finding) string {
	switch {
	case f.File != "" && f.Line > 0:
		return fmt.Sprintf("%s:%d", f.File, f.Line)
	case f.File != "":
		return f.File
	}
	return f.Source
}

// apiWindow is how far before the end of the kernel-API log its calls are drawn.
const apiWindow = 30 * time.Second

// readKernelAPI counts the kernel-API calls of the log's last seconds. The
// log's timestamps are the server's local time without a zone: the triage
// in the manifest read them in that zone, so its last call's time anchors
// them (the last header of the tail is that call).
func (m *model) readKernelAPI(b []byte) {
	ka := m.triage.KernelAPI
	if ka != nil {
		if c := ka.UnfinishedCall; c != nil && c.Time != nil {
			m.apiMarks = append(m.apiMarks, event{t: *c.Time, kind: "fault", label: "unfinished call", text: c.API + " started and never returned", source: fmt.Sprintf("%s:%d", c.File, c.Line)})
		}
		if n := ka.FirstNonfinite; n != nil && n.Call.Time != nil {
			m.apiMarks = append(m.apiMarks, event{t: *n.Call.Time, kind: "nonfinite", label: "first non-finite", text: fmt.Sprintf("%s %s nan_count=%d inf_count=%d", n.Call.API, n.Arg.Name, n.Arg.NanCount, n.Arg.InfCount), source: fmt.Sprintf("%s:%d", n.Call.File, n.Call.Line)})
		}
	}
	if len(b) == 0 {
		return
	}
	type hdr struct {
		ts  time.Time
		api string
	}
	var hs []hdr
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ln := sc.Bytes()
		if len(ln) < 22 || ln[0] != '[' || ln[20] != ']' || ln[21] != ' ' {
			continue
		}
		rest := string(ln[22:])
		api, ok := strings.CutPrefix(rest, "SGLang Kernel API Call: ")
		if !ok {
			api, ok = strings.CutPrefix(rest, "FlashInfer API Call: ")
		}
		if !ok {
			continue
		}
		t, err := time.Parse("2006-01-02 15:04:05", string(ln[1:20]))
		if err != nil {
			continue
		}
		hs = append(hs, hdr{t, api})
	}
	if len(hs) == 0 {
		return
	}
	last := hs[0].ts
	for _, h := range hs {
		if h.ts.After(last) {
			last = h.ts
		}
	}
	// the zone: the triage's End is the log's last timestamp, with its zone
	shift := time.Duration(0)
	if ka != nil && ka.End != nil {
		shift = ka.End.Sub(last)
	}
	per := map[int64]*apiSecond{}
	var keys []int64
	for _, h := range hs {
		if last.Sub(h.ts) > apiWindow {
			continue
		}
		t := h.ts.Add(shift)
		s := per[t.Unix()]
		if s == nil {
			s = &apiSecond{t: t, apis: map[string]int{}}
			per[t.Unix()] = s
			keys = append(keys, t.Unix())
		}
		s.calls++
		s.apis[h.api]++
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		m.api = append(m.api, *per[k])
	}
}

// fixAxis makes the axis run from the run's start to collection, and never
// zero wide.
func (m *model) fixAxis() {
	for _, l := range m.gpus {
		for _, p := range l.used.pts {
			m.see(p.t)
		}
	}
	if m.start.IsZero() && m.end.IsZero() {
		return
	}
	if m.start.IsZero() {
		m.start = m.end
	}
	if !m.end.After(m.start) {
		m.end = m.start.Add(time.Second)
	}
	if m.end.Sub(m.start) > maxAxis {
		m.notes = append(m.notes, fmt.Sprintf("the times span %s to %s: the axis shows the last %s", m.start.UTC().Format(time.RFC3339), m.end.UTC().Format(time.RFC3339), maxAxis))
		m.start = m.end.Add(-maxAxis)
	}
}

func exitText(man bundle.Manifest) string {
	e := man.Exit
	switch {
	case e.Signal != nil && e.CoreDumped:
		return "killed by " + *e.Signal + " (core dumped)"
	case e.Signal != nil:
		return "killed by " + *e.Signal
	case e.Code != nil:
		return fmt.Sprintf("exit status %d", *e.Code)
	case e.Reason != "":
		return e.Reason
	}
	return ""
}
