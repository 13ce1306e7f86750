package collectors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/execx"
	"github.com/kcrash/kcrash/internal/kmsg"
	"github.com/kcrash/kcrash/internal/wake"
	"github.com/kcrash/kcrash/kernlog"
)

func init() {
	Register(Info{
		Name:        "kmsg",
		Description: "kernel messages of the run window from /dev/kmsg (dmesg or journalctl -k where it cannot be read), attributed to the run",
		Default:     true,
	}, func() Collector { return &kmsgCollector{buf: newKmsgBuffer()} })
}

// kmsgCollector follows /dev/kmsg from the run's start and, at collection,
// writes the window's records to kmsg.log and its kernel findings, each
// attributed to the run or not, to the Env.
//
// The watcher and the collector each read through their own descriptor: the
// watcher closes its one when the run ends, the collector opens a fresh one
// (which starts at the oldest record) and skips what the watcher already
// has by sequence number. So nothing is lost between the two as long as the
// ring still holds it, and a collector that runs without a watcher (`kcrash
// collect`) takes the same path.
type kmsgCollector struct {
	mu        sync.Mutex
	buf       *kmsgBuffer
	ready     bool
	boot      time.Time // wall time of the printk clock's zero
	since     time.Time // window start
	watched   bool      // the watcher read at least once
	scopes    attrScopes
	memcgs    map[string]bool // memory cgroups the tree's processes were seen in
	collected bool            // the collector owns the buffer now; a late watcher adds nothing
}

// kmsgPollInterval is the shortest period between looks at the tree.
const kmsgPollInterval = 100 * time.Millisecond

func (k *kmsgCollector) setup(env *Env) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ready {
		return
	}
	k.ready = true
	k.boot = kmsg.BootTime()
	k.since = env.Since
	if k.since.IsZero() {
		k.since = env.Start
	}
	if !k.since.IsZero() {
		k.buf.setWindow(max(k.since.Sub(k.boot), 0))
	}
}

func (k *kmsgCollector) add(r kmsgRecord) {
	k.mu.Lock()
	if !k.collected {
		k.buf.add(r)
	}
	k.mu.Unlock()
}

func (k *kmsgCollector) malformed() {
	k.mu.Lock()
	if !k.collected {
		k.buf.malformed++
	}
	k.mu.Unlock()
}

// Watch follows /dev/kmsg until ctx is done. It starts at the oldest record
// of the ring and skips those before the window, so the margin before the
// run's start is covered too.
func (k *kmsgCollector) Watch(ctx context.Context, env *Env) {
	k.setup(env)
	k.observeTree(env)
	path := filepath.Join(env.DevRoot, "kmsg")
	buf := make([]byte, kmsg.ReadBuf)
	for ctx.Err() == nil {
		fd, err := kmsg.Open(path)
		if err != nil {
			// Collect finds the same and asks the agent or falls back; the
			// tree is still watched, for attribution.
			env.Logger.Debug("kmsg: cannot follow kernel messages", "err", err)
			k.observeUntil(ctx, env)
			return
		}
		k.mu.Lock()
		k.watched = true
		k.mu.Unlock()
		err = k.follow(ctx, env, fd, buf)
		fd.Close()
		if err == nil || ctx.Err() != nil || errors.Is(err, io.EOF) {
			// At EOF the device is not the ring (/dev/null in its place)
			// and polling it would spin; Collect says so and falls back.
			return
		}
		// Not an overwrite (kmsg.Read rides those out): start over on a new
		// descriptor, which skips what was read by sequence number. The
		// pause keeps a persistent error from spinning.
		env.Logger.Warn("kmsg: read failed, reopening", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (k *kmsgCollector) follow(ctx context.Context, env *Env, fd kmsg.FD, buf []byte) error {
	// Sleep in poll until a record arrives, the run ends (the waker), or it
	// is time to look at the tree again: no timer ticking while all is quiet.
	// While the ring floods, records gather between passes (kmsg.Pacer): a
	// run's attribution comes from the tree it watches, not from a look at
	// /proc when a record is read, and the ring keeps what a pause leaves
	// for the next pass or the collection's final read.
	wk, err := wake.New(ctx)
	if err != nil {
		return err
	}
	defer wk.Close()
	period := max(env.SampleInterval, kmsgPollInterval)
	lastObserved := time.Now()
	var pace kmsg.Pacer
	add := func(r kmsg.Record) {
		pace.Count(r)
		k.add(r)
	}
	gather := time.NewTimer(time.Hour)
	gather.Stop()
	defer gather.Stop()
	for {
		began := time.Now()
		pace.Begin()
		if err := kmsg.Read(ctx, fd, buf, add, k.malformed); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if time.Since(lastObserved) >= period {
			k.observeTree(env)
			lastObserved = time.Now()
		}
		untilObserve := period - time.Since(lastObserved)
		if batch := pace.End(began); batch > 0 {
			gather.Reset(max(min(batch, untilObserve), 0))
			select {
			case <-ctx.Done():
				return nil
			case <-gather.C:
			}
			continue
		}
		if err := fd.Wait(wk, untilObserve); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// observeUntil looks at the tree every period until ctx is done: when the
// ring cannot be followed, records come later (from the agent, dmesg), and
// attributing them needs what the tree's processes were while they lived.
func (k *kmsgCollector) observeUntil(ctx context.Context, env *Env) {
	t := time.NewTicker(max(env.SampleInterval, kmsgPollInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.observeTree(env)
		}
	}
}

// observeTree reads, while they are alive, the environment of the processes
// of the tree not seen yet: it says which GPUs they may use.
func (k *kmsgCollector) observeTree(env *Env) {
	pids := []int{}
	if env.RootPid > 0 {
		pids = append(pids, env.RootPid)
	}
	if env.Tree != nil {
		for _, p := range env.Tree.Processes() {
			if !p.Exited {
				pids = append(pids, int(p.Pid))
			}
		}
	}
	fs := env.ProcFS()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, pid := range pids {
		// The root is read every time: a job step or a wrapper script often
		// moves itself into its cgroup after it started.
		if !k.scopes.seen[pid] || pid == env.RootPid {
			for _, cg := range attrMemcgs(fs, pid) {
				if k.memcgs == nil {
					k.memcgs = map[string]bool{}
				}
				k.memcgs[cg] = true
			}
		}
		if k.scopes.seen[pid] {
			continue
		}
		// nil for a process gone or not ours to read, and for an empty
		// environment (a kernel thread, a zombie): tried again next time.
		if vars, _ := fs.Environ(pid); vars != nil {
			k.scopes.add(pid, attrScope(env, vars))
		}
	}
}

// Collect drains what the ring holds beyond what the watcher read, or falls
// back to dmesg and journalctl, then writes kmsg.log, the findings and
// raw/kmsg-findings.json.
func (k *kmsgCollector) Collect(ctx context.Context, env *Env, out *Output) error {
	k.setup(env)
	path := filepath.Join(env.DevRoot, "kmsg")

	var notes []string
	fd, openErr := kmsg.Open(path)
	if openErr == nil {
		readErr := kmsg.Read(ctx, fd, make([]byte, kmsg.ReadBuf), k.add, k.malformed)
		fd.Close()
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			notes = append(notes, fmt.Sprintf("reading %s at collection stopped: %v", path, readErr))
		}
	}
	// The window ends after the drain: a GPU reset printed while it ran is
	// still the run's.
	end := time.Now()
	k.mu.Lock()
	k.collected = true
	b, boot, since, scope, watched := k.buf, k.boot, k.since, k.scopes.scope(), k.watched
	k.mu.Unlock()

	if openErr == nil && b.ringStart == nil {
		// A readable device without a single record is not the kernel's
		// ring (containers bind /dev/null there).
		openErr = fmt.Errorf("%s: no records", path)
	}
	rep := kmsgReport{Window: kmsgWindow{From: since, To: end}}
	var lines []kmsgLine
	switch {
	case openErr == nil || watched && b.ringStart != nil:
		if openErr != nil {
			notes = append(notes, fmt.Sprintf("%v at collection: records after seq %d may be missing", openErr, b.lastSeq))
		}
		rep.Source = "/dev/kmsg"
		rep.BootTime = boot
		lines = kmsgLines(b, boot)
		rep.Records, rep.Dropped, rep.Older, rep.Malformed = b.totalCount, b.dropped, b.older, b.malformed
		rep.Gaps, rep.Lost = b.gaps, b.lost
		notes = append(kmsgNotes(b, boot, since), notes...)
	case k.fromAgent(ctx, env, since, end, &rep, &notes, openErr):
		// fromAgent filled a buffer of its own
		k.mu.Lock()
		b, boot = k.buf, k.boot
		k.mu.Unlock()
		lines = kmsgLines(b, boot)
		rep.BootTime = boot
		rep.Records, rep.Dropped, rep.Malformed = b.totalCount, b.dropped, b.malformed
		rep.Gaps, rep.Lost = b.gaps, b.lost
	default:
		src, fl, err := kmsgFallback(ctx, since, end)
		if err != nil {
			why := openErr.Error()
			if rep.Agent != "" {
				why += "; " + rep.Agent
			}
			return k.unavailable(env, out, rep, why+"; "+err.Error())
		}
		rep.Source = src
		notes = append(notes, fmt.Sprintf("fallback: %v", openErr))
		lines = fl
		for _, l := range lines {
			rep.Records += l.Count
		}
	}

	header := []string{fmt.Sprintf("kernel messages from %s, %s to %s", rep.Source, kmsgTime(since), kmsgTime(end))}
	header = append(header, notes...)
	for _, l := range lines {
		if l.Count > 1 {
			header = append(header, "identical consecutive records are one line ending in \"(repeated N times)\", N counting them all")
			break
		}
	}
	text, klines, counts := renderKmsg(header, lines)
	out.SetSource(rep.Source)
	if err := out.WriteFile("kmsg.log", text); err != nil {
		return err
	}

	findings := kernlog.Parse(klines)
	att := newAttributor(env, end, scope)
	k.mu.Lock()
	att.memcgs = k.memcgs
	k.mu.Unlock()
	for i := range findings {
		f := &findings[i]
		if f.Source == "" {
			f.Source = evidence.SourceDmesg
		}
		f.File = "kmsg.log"
		addRepeats(f, counts)
		f.Attribution = att.attribute(*f)
	}
	env.AddFinding(findings...)
	rep.Findings = findings
	return writeKmsgReport(out, rep)
}

// addRepeats counts the records folded into the finding's lines in
// kernlog's "repeat" (occurrences of a finding coalesced into one), so that
// a burst reads the same whether the buffer or the parser folded it. Over a
// coalesced range every folded line is counted: in a burst they are the
// burst's own lines.
func addRepeats(f *evidence.Finding, counts map[int]int) {
	if len(counts) == 0 {
		return
	}
	last := f.Line
	if v, ok := f.Details.Int(detail.LastLine); ok {
		last = int(v)
	}
	extra := int64(0)
	for n := f.Line; n <= last; n++ {
		if c := counts[n]; c > 1 {
			extra += int64(c - 1)
		}
	}
	if extra == 0 {
		return
	}
	if f.Details == nil {
		f.Details = map[string]any{}
	}
	rep, _ := f.Details.Int(detail.Repeat)
	f.Details.SetInt(detail.Repeat, max(rep, 1)+extra)
	if _, ok := f.Details[string(detail.LastLine)]; !ok {
		f.Details.SetInt(detail.LastLine, int64(last))
	}
}

// unavailable leaves the reason in the bundle, never an empty kmsg.log: a
// reader must tell "the kernel said nothing" from "kcrash could not ask".
//
// It is not evidence: the reason and its fix go to the summary's "Not seen"
// and next steps instead of the findings.
func (k *kmsgCollector) unavailable(env *Env, out *Output, rep kmsgReport, reason string) error {
	msg := "kernel messages unavailable: " + reason
	env.AddUnseen(evidence.Unseen{Source: UnseenKmsg, Why: reason, Fix: kmsgFix(env)})
	if err := out.WriteFile("kmsg.log", []byte("kcrash: "+msg+"\n")); err != nil {
		return err
	}
	rep.Unavailable = msg
	if err := writeKmsgReport(out, rep); err != nil {
		return err
	}
	return errors.New(msg)
}

type kmsgWindow struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// kmsgReport is raw/kmsg-findings.json: what was read, what was lost, and
// the findings with their attribution.
type kmsgReport struct {
	Source      string     `json:"source"`
	Window      kmsgWindow `json:"window"`
	BootTime    time.Time  `json:"boot_time,omitzero"`
	Records     int        `json:"records"`
	Dropped     int        `json:"dropped_oldest,omitempty"`
	Older       int        `json:"before_window,omitempty"`
	Malformed   int        `json:"malformed,omitempty"`
	Lost        uint64     `json:"lost,omitempty"`
	Gaps        []kmsgGap  `json:"gaps,omitempty"`
	Unavailable string     `json:"unavailable,omitempty"`
	// Agent is what the node agent said when it was asked: empty when it
	// was not asked (the ring was readable), else its answer or why none.
	Agent    string             `json:"agent,omitempty"`
	Withheld int                `json:"withheld,omitempty"` // records the agent did not give this user
	Findings []evidence.Finding `json:"findings"`
}

func writeKmsgReport(out *Output, rep kmsgReport) error {
	if rep.Findings == nil {
		rep.Findings = []evidence.Finding{}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return out.WriteFile("raw/kmsg-findings.json", append(b, '\n'))
}

// kmsgLine is one line of kmsg.log before rendering: a record, a line of a
// fallback tool, or kcrash's own note (a gap).
type kmsgLine struct {
	Time  *time.Time
	Mono  *time.Duration
	Tag   string // "user  :err   :"; empty for fallback lines, which carry neither
	Text  string
	Count int
	Note  string
}

func kmsgLines(b *kmsgBuffer, boot time.Time) []kmsgLine {
	live := b.live()
	lines := make([]kmsgLine, 0, len(live))
	for i := range live {
		e := &live[i]
		if e.gap != nil {
			lines = append(lines, kmsgLine{Note: e.gap.String()})
			continue
		}
		t := boot.Add(e.rec.Mono)
		mono := e.rec.Mono
		lines = append(lines, kmsgLine{Time: &t, Mono: &mono, Tag: fmt.Sprintf("%-6s:%-6s:", kmsg.Facility(e.rec.Facility), kmsg.Levels[e.rec.Level]),
			Text: e.rec.Text, Count: e.count})
	}
	return lines
}

func kmsgNotes(b *kmsgBuffer, boot, since time.Time) []string {
	var notes []string
	if b.dropped > 0 {
		notes = append(notes, fmt.Sprintf("dropped %d older records (kept at most %d records, %d MiB)", b.dropped, b.maxRecords, b.maxBytes>>20))
	}
	if b.lost > 0 {
		notes = append(notes, fmt.Sprintf("lost %d records in %d gaps: the kernel overwrote them before they were read (marked below)", b.lost, len(b.gaps)+b.moreGaps))
	}
	if rs := b.ringStart; rs != nil && rs.Seq > 0 && !since.IsZero() && !b.before(rs.Mono) {
		notes = append(notes, fmt.Sprintf("the ring began at seq %d (%s), after the window start: records of the window before it were overwritten before they were read",
			rs.Seq, kmsgTime(boot.Add(rs.Mono))))
	}
	if b.malformed > 0 {
		notes = append(notes, fmt.Sprintf("%d malformed records skipped", b.malformed))
	}
	return notes
}

// renderKmsg writes kmsg.log: kcrash's notes first, then one line per
// record, "2026-12-02T10:15:00.123456Z user  :err   : text": the time first
// so that the file sorts and merges with other logs, then facility and level
// as `dmesg -x` prints them, a form kernlog.SplitPrefix peels when triage
// reads the bundle again. It returns the lines for kernlog.Parse, numbered
// as in the file, and the repeat count of each line number that folds
// several records.
func renderKmsg(header []string, lines []kmsgLine) ([]byte, []kernlog.Line, map[int]int) {
	var w bytes.Buffer
	var kl []kernlog.Line
	counts := map[int]int{}
	n := 0
	put := func(s string) {
		w.WriteString(s)
		w.WriteByte('\n')
		n++
	}
	for _, h := range header {
		put("kcrash: " + h)
	}
	for _, l := range lines {
		if l.Note != "" {
			put("kcrash: " + l.Note)
			continue
		}
		prefix := ""
		if l.Time != nil {
			prefix = kmsgTime(*l.Time) + " "
		}
		if l.Tag != "" {
			prefix += l.Tag + " "
		}
		// The later lines of a multi-line message (an escaped newline in
		// the record) are indented under the first, without a prefix, as
		// dmesg prints them: kernlog joins such lines to the record they
		// continue ("GPU ... has fallen off the bus" spans three).
		parts := strings.Split(l.Text, "\n")
		for i, p := range parts {
			line := kernlog.Line{Text: p, Time: l.Time, Mono: l.Mono, Raw: prefix + p}
			if i > 0 {
				line = kernlog.Line{Text: p, Raw: strings.Repeat(" ", max(len(prefix), 1)) + p}
			}
			if i == len(parts)-1 && l.Count > 1 {
				line.Raw += fmt.Sprintf(" (repeated %d times)", l.Count)
				counts[n+1] = l.Count
			}
			put(line.Raw)
			line.N = n
			kl = append(kl, line)
		}
	}
	return w.Bytes(), kl, counts
}

func kmsgTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

// kmsgTool is a fallback source of kernel messages; each alternative argv is
// tried in turn (old util-linux lacks --time-format).
type kmsgTool struct {
	Name string
	Argv func(since time.Time) [][]string
}

// kmsgTools are tried in order when /dev/kmsg cannot be read
// (dmesg_restrict without CAP_SYSLOG, a container without the device).
// Tests replace them.
var kmsgTools = []kmsgTool{
	{Name: "dmesg", Argv: func(time.Time) [][]string {
		return [][]string{{"dmesg", "--time-format", "iso"}, {"dmesg", "-T"}}
	}},
	{Name: "journalctl", Argv: func(since time.Time) [][]string {
		at := "@" + strconv.FormatInt(since.Unix(), 10)
		return [][]string{
			{"journalctl", "-k", "--no-pager", "-o", "short-iso-precise", "--since", at},
			{"journalctl", "-k", "--no-pager", "-o", "short-iso", "--since", at},
		}
	}},
}

// kmsgFallback returns the window's lines from the first tool that works,
// and the command it ran; or every tool's reason for failing.
func kmsgFallback(ctx context.Context, since, end time.Time) (string, []kmsgLine, error) {
	var reasons []string
	for _, tool := range kmsgTools {
		var why string
		for _, argv := range tool.Argv(since) {
			lines, err := runKmsgTool(ctx, argv, since, end)
			if err == nil {
				return strings.Join(argv, " "), lines, nil
			}
			why = err.Error()
			if ctx.Err() != nil {
				break
			}
		}
		reasons = append(reasons, tool.Name+": "+why)
	}
	return "", nil, errors.New(strings.Join(reasons, "; "))
}

func runKmsgTool(ctx context.Context, argv []string, since, end time.Time) ([]kmsgLine, error) {
	res, err := execx.Run(ctx, nil, argv[0], argv[1:]...)
	if err != nil {
		return nil, err
	}
	stderr := kmsgFirstLine(res.Stderr)
	if res.ExitCode != 0 {
		if stderr == "" {
			stderr = "no message"
		}
		return nil, fmt.Errorf("exit %d: %s", res.ExitCode, stderr)
	}
	year := since.Year()
	if since.IsZero() {
		year = end.Year()
	}
	var lines []kmsgLine
	timed, keep := 0, false
	n := 0
	for raw := range strings.Lines(string(res.Stdout)) {
		raw = strings.TrimRight(raw, "\r\n")
		if raw == "" {
			continue
		}
		n++
		l := kernlog.SplitPrefix(raw, n, year)
		if l.Time != nil {
			timed++
			t := *l.Time
			// Sources with whole seconds print a time at or before the
			// real one; the window's margin before the run absorbs that.
			keep = (since.IsZero() || !t.Before(since)) && !t.After(end.Add(attrClockSlack))
		}
		// A line without a time continues the one before it.
		if !keep {
			continue
		}
		if k := len(lines) - 1; k >= 0 && lines[k].Text == l.Text {
			lines[k].Count++
			continue
		}
		lines = append(lines, kmsgLine{Time: l.Time, Mono: l.Mono, Text: l.Text, Count: 1})
	}
	// journalctl without a journal exits 0, says so on stderr and prints
	// nothing a reader could use.
	if timed == 0 && stderr != "" {
		return nil, errors.New(stderr)
	}
	return lines, nil
}

func kmsgFirstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Available: /dev/kmsg, else the dmesg or journalctl fallback.
func (c *kmsgCollector) Available(env *Env) (Availability, string) {
	restrict := readTrimmed(env.Proc("sys", "kernel", "dmesg_restrict"))
	dev := env.DevRoot
	f, err := os.Open(filepath.Join(dev, "kmsg"))
	if err == nil {
		f.Close()
		return Works, fmt.Sprintf("%s/kmsg is readable (dmesg_restrict=%s)", dev, restrict)
	}
	if pe, ok := err.(*os.PathError); ok {
		err = pe.Err
	}
	agent := kmsgAgentCheck(env)
	if agent.ok {
		return Works, fmt.Sprintf("%s/kmsg: %v (dmesg_restrict=%s); %s", dev, err, restrict, agent.why)
	}
	if p, lerr := exec.LookPath("dmesg"); lerr == nil {
		return WorksPartly, fmt.Sprintf("%s/kmsg: %v; %s; falling back to %s (dmesg_restrict=%s)", dev, err, agent.why, p, restrict)
	}
	if p, lerr := exec.LookPath("journalctl"); lerr == nil {
		return WorksPartly, fmt.Sprintf("%s/kmsg: %v; %s; falling back to %s -k", dev, err, agent.why, p)
	}
	return Unavailable, fmt.Sprintf("%s/kmsg: %v; %s; and neither dmesg nor journalctl is installed", dev, err, agent.why)
}
