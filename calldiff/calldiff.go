// Package calldiff compares the kernel-API call sequences of two runs (two
// crash bundles, two logs, or one of each): per process, the last calls
// before each run's end are aligned with a real sequence diff on API names,
// and the whole-run call counts are compared. It reports the first
// divergence, the calls one run made and the other did not (a missing
// expected call is a wrong code path), argument shape/dtype differences
// between aligned calls, and at level 5 statistics that turn non-finite or
// jump by orders of magnitude.
//
// The logs are streamed: memory is the two windows and the count tables,
// whatever the size of the logs.
package calldiff

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/kcrash/kcrash/kernelapi"
	"github.com/kcrash/kcrash/software"
)

// Options tune the comparison; zero values take the defaults.
type Options struct {
	// Window is how many of each process's last calls are aligned.
	Window int
	// MaxEdits bounds the alignment's work and memory (D² ints): windows that
	// differ by more edits are reported as not aligned.
	MaxEdits int
	// Magnitude is the factor between aligned statistics reported as a jump.
	Magnitude float64
	// MaxLogBytes caps what a .gz log decompresses to (gzcap.Default when 0).
	MaxLogBytes int64
}

// Defaults.
const (
	DefaultWindow    = 2000
	DefaultMaxEdits  = 2000
	DefaultMagnitude = 100
	maxList          = 20 // entries kept in each reported list
	maxHunkCalls     = 8  // calls shown of one hunk
)

// Result is the comparison of two runs.
type Result struct {
	A      *Side  `json:"a"`
	B      *Side  `json:"b"`
	Window int    `json:"window"`
	Pairs  []Pair `json:"pairs"`
	// Processes of one run that have no counterpart in the other.
	OnlyA []ProcRef `json:"only_in_a,omitempty"`
	OnlyB []ProcRef `json:"only_in_b,omitempty"`
	// Software lines up the two bundles' software (packages, driver and
	// runtime versions, libraries built differently), when both have it.
	Software []software.Row `json:"software,omitempty"`
}

// ProcRef names a process of a run.
type ProcRef struct {
	File   string `json:"file"`
	Pid    int    `json:"pid,omitempty"`
	Calls  int64  `json:"calls"`
	Window int    `json:"window_calls"`
	Cut    bool   `json:"window_cut"` // calls before the window were not aligned
}

// CallRef is one call of a window.
type CallRef struct {
	API       string `json:"api"`
	Line      int    `json:"line"`
	Returned  bool   `json:"returned"`
	Exception string `json:"exception,omitempty"`
}

// Pair is the comparison of one process of A with one of B.
type Pair struct {
	A       ProcRef `json:"a"`
	B       ProcRef `json:"b"`
	Aligned bool    `json:"aligned"`
	Note    string  `json:"note,omitempty"`
	// FirstDivergence is the first place the aligned windows differ.
	FirstDivergence *Hunk `json:"first_divergence"`
	// Hunks are the places where one window has calls the other lacks.
	Hunks      []Hunk `json:"hunks"`
	HunksTotal int    `json:"hunks_total"`
	// Missing: APIs called in one whole run and never in the other.
	Missing []Count `json:"missing"`
	// CountChanges: APIs both runs called, a different number of times.
	CountChanges []Count `json:"count_changes"`
	// ArgDiffs: aligned calls whose arguments differ in shape or dtype.
	ArgDiffs      []ArgDiff `json:"arg_diffs"`
	ArgDiffsTotal int       `json:"arg_diffs_total"`
	// StatDiffs: level-5 statistics of aligned calls that turned non-finite
	// or jumped by orders of magnitude.
	StatDiffs      []StatDiff `json:"stat_diffs"`
	StatDiffsTotal int        `json:"stat_diffs_total"`
	// End says how the two windows end relative to each other.
	End *Ending `json:"end,omitempty"`
}

// Hunk is a run of calls present in one window and absent in the other,
// after the last call both share (After; nil at the start of the windows).
type Hunk struct {
	After  *CallRef  `json:"after"`
	AfterB *CallRef  `json:"after_b,omitempty"`
	A      []CallRef `json:"a"` // calls only in A (at most maxHunkCalls)
	B      []CallRef `json:"b"`
	ACount int       `json:"a_count"`
	BCount int       `json:"b_count"`
}

// Count is one API's whole-run call count in each run.
type Count struct {
	API string `json:"api"`
	A   int64  `json:"a"`
	B   int64  `json:"b"`
}

// ArgDiff is one argument that differs between two aligned calls.
type ArgDiff struct {
	API   string `json:"api"`
	Arg   string `json:"arg"`
	Field string `json:"field"` // "shape", "dtype", "missing"
	A     string `json:"a"`
	B     string `json:"b"`
	LineA int    `json:"line_a"`
	LineB int    `json:"line_b"`
}

// StatDiff is a level-5 statistic that differs between two aligned calls.
type StatDiff struct {
	API   string `json:"api"`
	Arg   string `json:"arg"`
	What  string `json:"what"` // "nonfinite_in_a", "nonfinite_in_b", "magnitude"
	A     string `json:"a"`
	B     string `json:"b"`
	LineA int    `json:"line_a"`
	LineB int    `json:"line_b"`
}

// Ending: which window ended first, at which aligned call, and how many
// calls the other went on with.
type Ending struct {
	Side       string    `json:"side"` // the one that ended first: "a" or "b"; "" when both end together
	At         *CallRef  `json:"at"`   // its last call
	Unfinished bool      `json:"unfinished"`
	Other      *CallRef  `json:"other_at"` // the other's call aligned with it
	OtherMore  int       `json:"other_more"`
	OtherNext  []CallRef `json:"other_next,omitempty"`
}

// Compare reads both runs and compares them.
func Compare(pathA, pathB string, o Options) (*Result, error) {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MaxEdits <= 0 {
		o.MaxEdits = DefaultMaxEdits
	}
	if o.Magnitude <= 1 {
		o.Magnitude = DefaultMagnitude
	}
	a, err := read(pathA, o.Window, o.MaxLogBytes)
	if err != nil {
		return nil, err
	}
	b, err := read(pathB, o.Window, o.MaxLogBytes)
	if err != nil {
		return nil, err
	}
	return CompareSides(a, b, o), nil
}

// CompareSides compares two runs already read.
func CompareSides(a, b *Side, o Options) *Result {
	if o.MaxEdits <= 0 {
		o.MaxEdits = DefaultMaxEdits
	}
	if o.Magnitude <= 1 {
		o.Magnitude = DefaultMagnitude
	}
	r := &Result{A: a, B: b, Window: o.Window, Pairs: []Pair{}}
	if a.Software != nil && b.Software != nil {
		r.Software = software.Compare(a.Software, b.Software)
	}
	pa, pb, onlyA, onlyB := pairUp(a.Processes, b.Processes)
	for i := range pa {
		r.Pairs = append(r.Pairs, comparePair(pa[i], pb[i], o))
	}
	for _, p := range onlyA {
		r.OnlyA = append(r.OnlyA, ref(p))
	}
	for _, p := range onlyB {
		r.OnlyB = append(r.OnlyB, ref(p))
	}
	return r
}

func ref(p *Process) ProcRef {
	return ProcRef{File: p.File, Pid: p.Pid, Calls: p.Calls, Window: len(p.ring), Cut: p.Cut()}
}

// pairUp matches the processes of the two runs. Pids differ between runs, so
// processes are matched by what they called: greedily, the pair whose
// whole-run counts overlap most first.
func pairUp(as, bs []*Process) (pa, pb, onlyA, onlyB []*Process) {
	if len(as) == 1 && len(bs) == 1 {
		return as, bs, nil, nil
	}
	type cand struct {
		i, j  int
		score int64
	}
	var cands []cand
	for i, p := range as {
		for j, q := range bs {
			var s int64
			for api, n := range p.Counts {
				s += min(n, q.Counts[api])
			}
			cands = append(cands, cand{i, j, s})
		}
	}
	sort.SliceStable(cands, func(x, y int) bool { return cands[x].score > cands[y].score })
	usedA, usedB := map[int]bool{}, map[int]bool{}
	type pr struct{ i, j int }
	var prs []pr
	for _, c := range cands {
		if usedA[c.i] || usedB[c.j] || c.score == 0 {
			continue
		}
		usedA[c.i], usedB[c.j] = true, true
		prs = append(prs, pr{c.i, c.j})
	}
	sort.Slice(prs, func(x, y int) bool { return prs[x].i < prs[y].i })
	for _, p := range prs {
		pa, pb = append(pa, as[p.i]), append(pb, bs[p.j])
	}
	for i, p := range as {
		if !usedA[i] {
			onlyA = append(onlyA, p)
		}
	}
	for j, q := range bs {
		if !usedB[j] {
			onlyB = append(onlyB, q)
		}
	}
	return pa, pb, onlyA, onlyB
}

func callRef(e *Entry) CallRef {
	return CallRef{API: e.API, Line: e.Line, Returned: e.Returned, Exception: e.Exc}
}

func comparePair(pa, pb *Process, o Options) Pair {
	p := Pair{A: ref(pa), B: ref(pb), Hunks: []Hunk{}, Missing: []Count{}, CountChanges: []Count{},
		ArgDiffs: []ArgDiff{}, StatDiffs: []StatDiff{}}
	p.Missing, p.CountChanges = compareCounts(pa.Counts, pb.Counts)

	wa, wb := pa.Window(), pb.Window()
	ids := map[string]int32{}
	tok := func(w []Entry) []int32 {
		t := make([]int32, len(w))
		for i := range w {
			id, ok := ids[w[i].API]
			if !ok {
				id = int32(len(ids))
				ids[w[i].API] = id
			}
			t[i] = id
		}
		return t
	}
	ops, ok := align(tok(wa), tok(wb), o.MaxEdits)
	if !ok {
		p.Note = fmt.Sprintf("the last %d and %d calls differ in more than %d places: not aligned (the whole-run counts still compare)", len(wa), len(wb), o.MaxEdits)
		return p
	}
	p.Aligned = true
	firstEq, lastEq := -1, -1
	for i, x := range ops {
		if x.kind == opEq {
			if firstEq < 0 {
				firstEq = i
			}
			lastEq = i
		}
	}
	if firstEq < 0 {
		p.Aligned = false
		p.Note = "the two windows have no call in common (the whole-run counts still compare)"
		return p
	}
	// Before the first shared call, a cut window's extra calls only say
	// where the window began.
	lo := 0
	for lo < firstEq {
		x := ops[lo]
		if x.kind == opDel && !pa.Cut() || x.kind == opIns && !pb.Cut() {
			break
		}
		lo++
	}
	// After the last shared call: one run ended, the other went on (that
	// is the crash, not a divergence), unless both have calls there.
	hi := len(ops)
	var tailA, tailB int
	for _, x := range ops[lastEq+1:] {
		if x.kind == opDel {
			tailA++
		} else {
			tailB++
		}
	}
	if tailA == 0 || tailB == 0 {
		hi = lastEq + 1
		p.End = ending(ops, lastEq, wa, wb, tailA, tailB)
		// At level 1 no call is seen returning: "never returned" would say
		// more than the log does.
		if p.End.Side == "a" && pa.Returns == 0 || p.End.Side != "a" && pb.Returns == 0 {
			p.End.Unfinished = false
		}
	}

	var cur *Hunk
	var lastA, lastB *Entry
	flush := func() {
		if cur == nil {
			return
		}
		if p.FirstDivergence == nil {
			h := *cur
			p.FirstDivergence = &h
		}
		p.HunksTotal++
		if len(p.Hunks) < maxList {
			p.Hunks = append(p.Hunks, *cur)
		}
		cur = nil
	}
	for _, x := range ops[lo:hi] {
		switch x.kind {
		case opEq:
			flush()
			ea, eb := &wa[x.a], &wb[x.b]
			lastA, lastB = ea, eb
			compareArgs(&p, ea, eb, o)
		default:
			if cur == nil {
				cur = &Hunk{A: []CallRef{}, B: []CallRef{}}
				if lastA != nil {
					ra, rb := callRef(lastA), callRef(lastB)
					cur.After, cur.AfterB = &ra, &rb
				}
			}
			if x.kind == opDel {
				cur.ACount++
				if len(cur.A) < maxHunkCalls {
					cur.A = append(cur.A, callRef(&wa[x.a]))
				}
			} else {
				cur.BCount++
				if len(cur.B) < maxHunkCalls {
					cur.B = append(cur.B, callRef(&wb[x.b]))
				}
			}
		}
	}
	flush()
	return p
}

func ending(ops []op, lastEq int, wa, wb []Entry, tailA, tailB int) *Ending {
	x := ops[lastEq]
	ea, eb := &wa[x.a], &wb[x.b]
	ra, rb := callRef(ea), callRef(eb)
	e := &Ending{}
	switch {
	case tailA == 0 && tailB == 0:
		e.At, e.Other = &ra, &rb
		e.Unfinished = !eb.Returned
	case tailA > 0: // B ended first
		e.Side, e.At, e.Other, e.OtherMore = "b", &rb, &ra, tailA
		e.Unfinished = !eb.Returned
		for _, y := range ops[lastEq+1:] {
			if len(e.OtherNext) == maxHunkCalls {
				break
			}
			e.OtherNext = append(e.OtherNext, callRef(&wa[y.a]))
		}
	default:
		e.Side, e.At, e.Other, e.OtherMore = "a", &ra, &rb, tailB
		e.Unfinished = !ea.Returned
		for _, y := range ops[lastEq+1:] {
			if len(e.OtherNext) == maxHunkCalls {
				break
			}
			e.OtherNext = append(e.OtherNext, callRef(&wb[y.b]))
		}
	}
	return e
}

func compareCounts(a, b map[string]int64) (missing, changed []Count) {
	missing, changed = []Count{}, []Count{}
	for api, n := range a {
		m := b[api]
		switch {
		case m == 0:
			missing = append(missing, Count{api, n, 0})
		case m != n:
			changed = append(changed, Count{api, n, m})
		}
	}
	for api, m := range b {
		if a[api] == 0 {
			missing = append(missing, Count{api, 0, m})
		}
	}
	sort.Slice(missing, func(i, j int) bool {
		if x, y := max(missing[i].A, missing[i].B), max(missing[j].A, missing[j].B); x != y {
			return x > y
		}
		return missing[i].API < missing[j].API
	})
	// The largest relative change first.
	rel := func(c Count) float64 { return math.Abs(math.Log(float64(c.A) / float64(c.B))) }
	sort.Slice(changed, func(i, j int) bool {
		if x, y := rel(changed[i]), rel(changed[j]); x != y {
			return x > y
		}
		return changed[i].API < changed[j].API
	})
	if len(missing) > maxList {
		missing = missing[:maxList]
	}
	if len(changed) > maxList {
		changed = changed[:maxList]
	}
	return missing, changed
}

func compareArgs(p *Pair, ea, eb *Entry, o Options) {
	cmp := func(as, bs []kernelapi.Arg) {
		for i := range as {
			x := &as[i]
			y := findArg(bs, x.Name, i)
			if y == nil {
				continue
			}
			if x.Shape != y.Shape && (x.Shape != "" || y.Shape != "") {
				p.addArg(ArgDiff{API: ea.API, Arg: x.Name, Field: "shape", A: orNone(x.Shape), B: orNone(y.Shape), LineA: ea.Line, LineB: eb.Line})
			}
			if x.Dtype != y.Dtype && (x.Dtype != "" || y.Dtype != "") {
				p.addArg(ArgDiff{API: ea.API, Arg: x.Name, Field: "dtype", A: orNone(x.Dtype), B: orNone(y.Dtype), LineA: ea.Line, LineB: eb.Line})
			}
			compareStats(p, ea, eb, x, y, o)
		}
	}
	cmp(ea.Args, eb.Args)
	cmp(ea.Outputs, eb.Outputs)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// findArg finds the argument named name, preferring the same position.
func findArg(args []kernelapi.Arg, name string, i int) *kernelapi.Arg {
	if i < len(args) && args[i].Name == name {
		return &args[i]
	}
	for j := range args {
		if args[j].Name == name {
			return &args[j]
		}
	}
	return nil
}

func (p *Pair) addArg(d ArgDiff) {
	p.ArgDiffsTotal++
	if len(p.ArgDiffs) < maxList {
		p.ArgDiffs = append(p.ArgDiffs, d)
	}
}

func (p *Pair) addStat(d StatDiff) {
	p.StatDiffsTotal++
	if len(p.StatDiffs) < maxList {
		p.StatDiffs = append(p.StatDiffs, d)
	}
}

func statText(a *kernelapi.Arg) string {
	if a.Stats != "" {
		return a.Stats
	}
	return fmt.Sprintf("min=%s max=%s mean=%s nan_count=%d inf_count=%d", a.Min, a.Max, a.Mean, a.NanCount, a.InfCount)
}

func nonfinite(a *kernelapi.Arg) bool {
	return a.NanCount > 0 || a.InfCount > 0 || isNonfinite(a.Min) || isNonfinite(a.Max) || isNonfinite(a.Mean)
}

func isNonfinite(s string) bool {
	s = strings.ToLower(s)
	return s == "nan" || s == "inf" || s == "-inf"
}

// magnitude is the largest absolute min/max; ok=false when not finite or
// not logged.
func magnitude(a *kernelapi.Arg) (float64, bool) {
	if a.Min == "" && a.Max == "" {
		return 0, false
	}
	m := 0.0
	for _, s := range []string{a.Min, a.Max} {
		if s == "" {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false
		}
		m = max(m, math.Abs(v))
	}
	return m, true
}

func compareStats(p *Pair, ea, eb *Entry, x, y *kernelapi.Arg, o Options) {
	nx, ny := nonfinite(x), nonfinite(y)
	switch {
	case ny && !nx && (x.Min != "" || x.Stats != ""):
		p.addStat(StatDiff{API: ea.API, Arg: x.Name, What: "nonfinite_in_b", A: statText(x), B: statText(y), LineA: ea.Line, LineB: eb.Line})
		return
	case nx && !ny && (y.Min != "" || y.Stats != ""):
		p.addStat(StatDiff{API: ea.API, Arg: x.Name, What: "nonfinite_in_a", A: statText(x), B: statText(y), LineA: ea.Line, LineB: eb.Line})
		return
	}
	mx, okx := magnitude(x)
	my, oky := magnitude(y)
	if !okx || !oky {
		return
	}
	// A tensor of zeros next to one of ones is not an order of magnitude.
	const floor = 1e-6
	lo, hi := max(min(mx, my), floor), max(mx, my)
	if hi/lo >= o.Magnitude && hi > floor {
		p.addStat(StatDiff{API: ea.API, Arg: x.Name, What: "magnitude", A: statText(x), B: statText(y), LineA: ea.Line, LineB: eb.Line})
	}
}

// FirstShapeJump is the first aligned call whose argument shapes differ
// between the runs (the batch that one run saw and the other did not).
func (p *Pair) FirstShapeJump() *ArgDiff {
	for i := range p.ArgDiffs {
		if p.ArgDiffs[i].Field == "shape" {
			return &p.ArgDiffs[i]
		}
	}
	return nil
}
