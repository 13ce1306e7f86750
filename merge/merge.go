// Package merge lines up the bundles of one distributed job (SPEC §6): each
// rank's verdict and first abnormal evidence on one timeline, and the rank
// whose root-cause evidence came first. In a collective job one rank's fault
// makes every other rank fail too (collective timeouts, a sigquit from a
// dying child), usually with louder logs and sometimes with earlier exits, so
// the first failure is the first root cause, not the first exit.
package merge

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/visible"
)

// Result is `kcrash merge --json` (SPEC §6).
type Result struct {
	FirstFailure *FirstFailure `json:"first_failure"`
	Ranks        []*Rank       `json:"ranks"`

	// Timeline is every timed finding and exit of every rank, in time order,
	// for the human view.
	Timeline []Event `json:"-"`
	// Skipped lists the bundles that could not be read.
	Skipped []error `json:"-"`
}

// FirstFailure is the rank whose root-cause evidence came first.
type FirstFailure struct {
	Rank    *int       `json:"rank"`
	Host    string     `json:"host"`
	Bundle  string     `json:"bundle"`
	Time    *time.Time `json:"time"`
	Verdict string     `json:"verdict"`

	Summary string `json:"-"`
}

// Rank is one bundle's line of the merge.
type Rank struct {
	Rank              *int        `json:"rank"`
	Host              string      `json:"host"`
	Bundle            string      `json:"bundle"`
	Exit              bundle.Exit `json:"exit"`
	Verdict           string      `json:"verdict"`
	FirstEvidenceTime *time.Time  `json:"first_evidence_time"`
	// Secondary: the verdict is a symptom of another rank's failure.
	Secondary bool `json:"secondary"`

	Summary string    `json:"-"`
	Start   time.Time `json:"-"` // the run's start (manifest start_time), for drawing
	End     time.Time `json:"-"`
	class   class
}

// Event is one line of the merged timeline.
type Event struct {
	Time   time.Time
	Rank   *int
	Host   string
	Kind   string // a verdict kind, or "exit"
	Source string
	Text   string
}

type class int

const (
	classOK        class = iota // clean exit: not a failure
	classRootCause              // its own failure
	classSymptom                // reports a failure that may be another's
)

// symptomKinds can only report another failure: a rank times out in a
// collective because a peer stopped; a process is killed, declared hung or
// dies without evidence because something else went wrong first.
var symptomKinds = map[string]bool{
	string(evidence.CollectiveTimeout): true,
	string(evidence.Killed):            true,
	string(evidence.Hang):              true,
	string(evidence.Unknown):           true,
}

// triage is the part of SPEC §5's object merge reads.
type triage struct {
	Verdict struct {
		Kind    string `json:"kind"`
		Summary string `json:"summary"`
	} `json:"verdict"`
	Findings []struct {
		Kind        string         `json:"kind"`
		Source      string         `json:"source"`
		Text        string         `json:"text"`
		Time        *time.Time     `json:"time"`
		Attribution string         `json:"attribution"`
		Details     map[string]any `json:"details"`
	} `json:"findings"`
}

// Paths expands the command line: bundle files as given, directories
// searched (recursively: one directory per node is a common layout) for
// kcrash-*.tar.gz. Only regular files (or links to them) are taken from a
// directory: a FIFO named like a bundle would block the reader. A
// subdirectory that cannot be read is noted in skipped, not fatal.
func Paths(args []string) (paths []string, skipped []error, err error) {
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, nil, err
		}
		if !st.IsDir() {
			add(a)
			continue
		}
		n := len(paths)
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == a {
					return err
				}
				skipped = append(skipped, err)
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			name := d.Name()
			if d.IsDir() || !strings.HasPrefix(name, "kcrash-") || !strings.HasSuffix(name, ".tar.gz") {
				return nil
			}
			if !d.Type().IsRegular() {
				fi, err := os.Stat(p) // a link to a bundle is fine
				if err != nil || !fi.Mode().IsRegular() {
					skipped = append(skipped, fmt.Errorf("%s: not a regular file", p))
					return nil
				}
			}
			add(p)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		if len(paths) == n {
			return nil, skipped, fmt.Errorf("%s: no kcrash bundles (kcrash-*.tar.gz) in it", a)
		}
	}
	return paths, skipped, nil
}

// Merge reads the bundles and lines them up. A bundle that cannot be read is
// reported in Skipped; it is an error only when none can be.
func Merge(paths []string) (*Result, error) {
	r := &Result{Ranks: []*Rank{}}
	for _, p := range paths {
		b, err := bundle.OpenManifest(p)
		if err != nil {
			r.Skipped = append(r.Skipped, err)
			continue
		}
		rk, events := rankOf(p, b)
		r.Ranks = append(r.Ranks, rk)
		r.Timeline = append(r.Timeline, events...)
	}
	if len(r.Ranks) == 0 {
		if len(r.Skipped) > 0 {
			return nil, r.Skipped[0]
		}
		return nil, fmt.Errorf("no bundles")
	}
	sort.SliceStable(r.Ranks, func(i, j int) bool { return rankLess(r.Ranks[i], r.Ranks[j]) })
	sort.SliceStable(r.Timeline, func(i, j int) bool {
		a, b := r.Timeline[i], r.Timeline[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		return intLess(a.Rank, b.Rank)
	})
	r.decide()
	return r, nil
}

// decide picks the first failure: the earliest root-cause evidence; when no
// rank has a root cause, the earliest evidence of any failing rank. The
// ranks whose verdict is a symptom are then secondary to it.
func (r *Result) decide() {
	var first *Rank
	for _, want := range []class{classRootCause, classSymptom} {
		for _, rk := range r.Ranks { // in time order
			if rk.class == want {
				first = rk
				break
			}
		}
		if first != nil {
			break
		}
	}
	if first == nil {
		return
	}
	r.FirstFailure = &FirstFailure{Rank: first.Rank, Host: first.Host, Bundle: first.Bundle,
		Time: first.FirstEvidenceTime, Verdict: first.Verdict, Summary: first.Summary}
	for _, rk := range r.Ranks {
		rk.Secondary = rk != first && rk.class == classSymptom
	}
}

var rankInName = regexp.MustCompile(`-r([0-9]+)$`)

func rankOf(p string, b *bundle.Bundle) (*Rank, []Event) {
	m := &b.Manifest
	rk := &Rank{Bundle: p, Host: m.Host.Hostname, Exit: m.Exit, Start: m.StartTime, End: m.EndTime}
	if m.Job != nil {
		rk.Rank = m.Job.Rank
		if rk.Host == "" {
			rk.Host = m.Job.Node
		}
	}
	if rk.Rank == nil {
		// Written on a host without a scheduler identity in the manifest,
		// but named by one (SPEC §4's -r<rank>).
		name := strings.TrimSuffix(filepath.Base(p), ".tar.gz")
		if sm := rankInName.FindStringSubmatch(name); sm != nil {
			if n, err := strconv.Atoi(sm[1]); err == nil {
				rk.Rank = &n
			}
		}
	}
	var t triage
	if len(m.Triage) > 0 && string(m.Triage) != "null" {
		_ = json.Unmarshal(m.Triage, &t) // a damaged triage reads as unknown
	}
	rk.Verdict, rk.Summary = t.Verdict.Kind, t.Verdict.Summary
	if rk.Verdict == "" {
		rk.Verdict = string(evidence.Unknown)
	}
	var events []Event
	sigquit := strings.Contains(strings.ToLower(rk.Summary), "sigquit")
	for _, f := range t.Findings {
		role := evidence.Details(f.Details).Text(detail.VerdictRole)
		if f.Attribution == "unrelated" || role == "ignored" || f.Kind == string(evidence.CleanExit) {
			continue
		}
		if role == "root_cause" && strings.Contains(strings.ToLower(f.Text), "sigquit") {
			sigquit = true
		}
		if f.Time == nil || f.Time.IsZero() {
			continue
		}
		ft := f.Time.UTC()
		if rk.FirstEvidenceTime == nil || ft.Before(*rk.FirstEvidenceTime) {
			rk.FirstEvidenceTime = &ft
		}
		events = append(events, Event{Time: ft, Rank: rk.Rank, Host: rk.Host, Kind: f.Kind, Source: f.Source, Text: f.Text})
	}
	switch {
	case rk.Verdict == string(evidence.CleanExit):
		rk.class = classOK
	case symptomKinds[rk.Verdict], rk.Verdict == string(evidence.PythonException) && sigquit:
		rk.class = classSymptom
	default:
		rk.class = classRootCause
	}
	if !m.EndTime.IsZero() {
		end := m.EndTime.UTC()
		if rk.FirstEvidenceTime == nil && rk.class != classOK {
			rk.FirstEvidenceTime = &end
		}
		events = append(events, Event{Time: end, Rank: rk.Rank, Host: rk.Host, Kind: "exit", Source: "exit", Text: ExitText(m.Exit)})
	}
	return rk, events
}

// rankLess orders by first evidence (none last), then rank, then bundle.
func rankLess(a, b *Rank) bool {
	at, bt := a.FirstEvidenceTime, b.FirstEvidenceTime
	switch {
	case at != nil && bt == nil:
		return true
	case at == nil && bt != nil:
		return false
	case at != nil && !at.Equal(*bt):
		return at.Before(*bt)
	}
	if !equalInt(a.Rank, b.Rank) {
		return intLess(a.Rank, b.Rank)
	}
	return a.Bundle < b.Bundle
}

func intLess(a, b *int) bool {
	switch {
	case a == nil:
		return false
	case b == nil:
		return true
	}
	return *a < *b
}

func equalInt(a, b *int) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// ExitText is a manifest exit for a human: "SIGSEGV (core dumped)", "exit 1", "unknown".
func ExitText(e bundle.Exit) string {
	switch {
	case e.Signal != nil:
		s := *e.Signal
		if e.CoreDumped {
			s += " (core dumped)"
		}
		return s
	case e.Code != nil:
		return "exit " + strconv.Itoa(*e.Code)
	}
	return "unknown"
}

func rankName(r *int) string {
	if r == nil {
		return "?"
	}
	return strconv.Itoa(*r)
}

// Line is the merge's verdict in one line (for a Kubernetes termination
// message, which is shown truncated: the cause comes first).
func (r *Result) Line() string {
	ff := r.FirstFailure
	if ff == nil {
		return fmt.Sprintf("no failure in %d bundle(s)", len(r.Ranks))
	}
	s := fmt.Sprintf("first failure: rank %s on %s: %s", rankName(ff.Rank), orUnknown(ff.Host), visible.Line(ff.Verdict))
	if ff.Time != nil {
		s += " at " + ff.Time.Format(time.RFC3339Nano)
	}
	if ff.Summary != "" {
		s += " (" + visible.Line(oneLine(ff.Summary)) + ")"
	}
	var sec []string
	for _, rk := range r.Ranks {
		if rk.Secondary {
			sec = append(sec, rankName(rk.Rank))
		}
	}
	if len(sec) > 0 {
		s += fmt.Sprintf("; secondary: rank %s", strings.Join(sec, ", "))
	}
	return s
}

// orUnknown is a host for a human: what a manifest says, shown, never
// interpreted by the terminal.
func orUnknown(s string) string {
	if s == "" {
		return "unknown host"
	}
	return visible.Line(s)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// timelineMax bounds the human timeline: a watchdog can log the same
// timeout for every collective in flight.
const timelineMax = 40

// WriteTable prints the merge for a human: the first failure, each rank on
// one line in time order, then the merged timeline, times relative to the
// first failure.
func (r *Result) WriteTable(w io.Writer) error {
	var t0 time.Time
	if ff := r.FirstFailure; ff != nil && ff.Time != nil {
		t0 = *ff.Time
	} else if len(r.Timeline) > 0 {
		t0 = r.Timeline[0].Time
	}
	rel := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		if t0.IsZero() {
			return t.Format(time.RFC3339)
		}
		d := t.Sub(t0)
		if d >= 0 {
			return "+" + relDuration(d)
		}
		return "-" + relDuration(-d)
	}
	fmt.Fprintln(w, r.Line())
	if ff := r.FirstFailure; ff != nil {
		fmt.Fprintf(w, "  bundle %s\n", visible.Line(ff.Bundle))
	}
	if !t0.IsZero() {
		fmt.Fprintf(w, "  times below are relative to %s\n", t0.Format(time.RFC3339Nano))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tHOST\tVERDICT\tFIRST EVIDENCE\tEXIT\tBUNDLE")
	anySecondary := false
	for _, rk := range r.Ranks {
		v := visible.Line(rk.Verdict)
		if rk.Secondary {
			v += " (secondary)"
			anySecondary = true
		}
		if r.FirstFailure != nil && rk.Bundle == r.FirstFailure.Bundle {
			v += " (first)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", rankName(rk.Rank), orUnknown(rk.Host), v, rel(rk.FirstEvidenceTime), visible.Line(ExitText(rk.Exit)), visible.Line(filepath.Base(rk.Bundle)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if anySecondary {
		fmt.Fprintln(w, "secondary: the verdict is a symptom (collective timeout, sigquit from a child, killed) of the first failure")
	}
	if len(r.Timeline) > 0 {
		fmt.Fprintln(w, "\ntimeline:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for i, e := range r.Timeline {
			if i == timelineMax {
				fmt.Fprintf(tw, "  ...\t%d more\t\t\t\n", len(r.Timeline)-i)
				break
			}
			src := e.Kind
			if e.Source != "" && e.Source != "exit" {
				src += " (" + e.Source + ")"
			}
			src = visible.Line(src)
			fmt.Fprintf(tw, "  %s\trank %s\t%s\t%s\t%s\n", rel(&e.Time), rankName(e.Rank), orUnknown(e.Host), src, visible.Line(clip(oneLine(e.Text), 120)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}

// relDuration prints an offset on the timeline to the millisecond ("1.522s",
// "2m3.004s"): enough to order ranks' events, short enough to read. Offsets
// under a millisecond keep microseconds, so that they do not all print as 0s.
func relDuration(d time.Duration) string {
	if d > 0 && d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
