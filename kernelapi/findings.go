package kernelapi

// Findings: what the buffers of the calls become in the report.

import (
	"bytes"
	"fmt"
	"sort"
	"time"
)

func (a *analyzer) addJump(s *stream, c *callBuf, name, from, to []byte) {
	j := &a.jumps[a.rep.ShapeJumpsTotal%maxJumps]
	a.rep.ShapeJumpsTotal++
	j.api = append(j.api[:0], c.api...)
	j.arg = append(j.arg[:0], name...)
	j.from = append(j.from[:0], from...)
	j.to = append(j.to[:0], to...)
	j.line, j.key, j.hasTS, j.s = c.line, c.key, c.hasTS, s
}

func (a *analyzer) addDump(d DumpDir) {
	for _, x := range a.rep.DumpDirs {
		if x.Path == d.Path {
			return
		}
	}
	if len(a.rep.DumpDirs) >= maxDumpDirs {
		// The newest matter most: the crash is at the end.
		copy(a.rep.DumpDirs, a.rep.DumpDirs[1:])
		a.rep.DumpDirs = a.rep.DumpDirs[:len(a.rep.DumpDirs)-1]
	}
	a.rep.DumpDirs = append(a.rep.DumpDirs, d)
}

func argOf(e *elemBuf) Arg {
	return Arg{Name: string(e.name), Type: string(e.typ), Shape: string(e.shape), Stride: string(e.stride),
		Dtype: string(e.dtype), Device: string(e.device), Value: string(e.value),
		NanCount: e.nan, InfCount: e.inf, Min: string(e.min), Max: string(e.max), Mean: string(e.mean),
		Stats: string(e.stats)}
}

func (a *analyzer) call(s *stream, c *callBuf) Call {
	r := Call{API: string(c.api), Format: formatNames[c.format], Pid: s.pid, File: s.name, Line: int(c.line),
		Finished: c.finished, Exception: string(c.exc), DumpDir: string(c.dumpDir)}
	if c.hasTS {
		t := a.timeOf(c.key)
		r.Time = &t
	}
	if c.nIn > 0 {
		r.Args = make([]Arg, c.nIn)
		for i := 0; i < c.nIn; i++ {
			r.Args[i] = argOf(&c.in[i])
		}
	}
	return r
}

// finish turns what the pass kept into the report. The order matters: the
// dump check needs the dirs of the unfinished calls, and the times need every
// reported call in place.
func (a *analyzer) finish() {
	for _, s := range a.streams {
		// A header on a file's last line opened its call after the file ended.
		s.tellCall(a, s.last)
	}
	a.finishTotals()
	a.finishUnfinished()
	a.finishJumps()
	a.finishExceptions()
	a.checkDumps()
	a.finishTimes()
}

// finishTotals: counts, warnings, level, format and the last call.
func (a *analyzer) finishTotals() {
	rep := a.rep
	var last *stream
	for _, s := range a.streams {
		rep.Lines += s.lineNo
		rep.Bytes += s.bytes
		if s.err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: line %d: %v", s.name, s.lineNo, s.err))
		}
		for f := range nFormats {
			if a.formats[f] {
				rep.Level = max(rep.Level, normLevel(s.level[f]))
			}
		}
		if s.last != nil && (last == nil || s.last.seq > last.last.seq) {
			last = s
		}
		if s.last != nil && len(a.streams) > 1 {
			rep.LastCalls = append(rep.LastCalls, a.call(s, s.last))
		}
	}
	switch {
	case a.formats[fmtSGLang] && a.formats[fmtFlashInfer]:
		rep.Format = "mixed"
	case a.formats[fmtSGLang]:
		rep.Format = "sglang"
	case a.formats[fmtFlashInfer]:
		rep.Format = "flashinfer"
	}
	if last != nil {
		c := a.call(last, last.last)
		rep.LastCall = &c
	}
}

// finishUnfinished: a call still open at the end of a file logged at level
// ≥3 never returned. The innermost open call of each file is the suspect
// there; over files, the earliest is where the failure started. Open calls
// whose level-10 dump has no outputs leave their dump dir at inputs_saved.
func (a *analyzer) finishUnfinished() {
	rep := a.rep
	type cand struct {
		c   Call
		key tsKey
		ts  bool
		seq int64
	}
	var cands []cand
	for _, s := range a.streams {
		for f := range nFormats {
			st := &s.stacks[f]
			if s.level[f] < 3 || st.n == 0 {
				continue
			}
			c := st.top()
			cands = append(cands, cand{a.call(s, c), c.key, c.hasTS, c.seq})
		}
		for f := range nFormats {
			st := &s.stacks[f]
			for i := st.n - 1; i >= 0; i-- {
				c := st.at(i)
				if len(c.dumpDir) > 0 && !c.dumpDone {
					a.addDump(DumpDir{Path: string(c.dumpDir), API: string(c.api), State: "inputs_saved", Source: "log"})
				}
			}
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].ts && cands[j].ts && cands[i].key != cands[j].key {
			return cands[i].key < cands[j].key
		}
		return cands[i].seq < cands[j].seq
	})
	for _, c := range cands {
		rep.UnfinishedCalls = append(rep.UnfinishedCalls, c.c)
	}
	if len(rep.UnfinishedCalls) > 0 {
		u := rep.UnfinishedCalls[0]
		rep.UnfinishedCall = &u
	}
}

// finishJumps lists the last shape jumps, oldest first.
func (a *analyzer) finishJumps() {
	rep := a.rep
	n := min(rep.ShapeJumpsTotal, maxJumps)
	for i := rep.ShapeJumpsTotal - n; i < rep.ShapeJumpsTotal; i++ {
		j := &a.jumps[i%maxJumps]
		sj := ShapeJump{API: string(j.api), Arg: string(j.arg), From: string(j.from), To: string(j.to),
			Dim: changedDim(j.from, j.to), Line: int(j.line), File: j.s.name, Pid: j.s.pid}
		if j.hasTS {
			t := a.timeOf(j.key)
			sj.Time = &t
		}
		rep.ShapeJumps = append(rep.ShapeJumps, sj)
	}
}

// finishExceptions lists the first exceptions and then the last ones.
func (a *analyzer) finishExceptions() {
	rep := a.rep
	rep.Exceptions = append(rep.Exceptions, a.excFirst...)
	if rest := rep.ExceptionsTotal - int64(len(a.excFirst)); rest > 0 {
		k := min(rest, maxExcLast)
		for i := rest - k; i < rest; i++ {
			rep.Exceptions = append(rep.Exceptions, a.excLast[i%maxExcLast])
		}
	}
}

// finishTimes sets Start and End, and dates the reported calls from the end
// of the logs (or Options.End).
func (a *analyzer) finishTimes() {
	rep := a.rep
	var end time.Time
	if a.hasTime {
		st, en := a.timeOf(a.minKey), a.timeOf(a.maxKey)
		rep.Start, rep.End = &st, &en
		end = en
	}
	if !a.opts.End.IsZero() {
		end = a.opts.End
	}
	if !end.IsZero() {
		setBefore := func(c *Call) {
			if c != nil && c.Time != nil {
				c.BeforeEnd = end.Sub(*c.Time)
			}
		}
		setBefore(rep.LastCall)
		setBefore(rep.UnfinishedCall)
		for i := range rep.UnfinishedCalls {
			setBefore(&rep.UnfinishedCalls[i])
		}
		for i := range rep.LastCalls {
			setBefore(&rep.LastCalls[i])
		}
		if rep.FirstNonfinite != nil {
			setBefore(&rep.FirstNonfinite.Call)
		}
		if rep.FirstStatsUnavailable != nil {
			setBefore(&rep.FirstStatsUnavailable.Call)
		}
	}
}

// normLevel maps what was seen to the documented levels: the logger's own
// thresholds are ≥3, ≥5 and ≥10.
func normLevel(l int) int {
	switch {
	case l >= 10:
		return 10
	case l >= 5:
		return 5
	case l >= 3:
		return 3
	case l >= 1:
		return 1
	}
	return 0
}

// changedDim compares two shape tuples such as "(1, 4096)" and "(288, 4096)".
func changedDim(from, to []byte) int {
	f := bytes.Split(bytes.Trim(from, "(),[] "), []byte(","))
	t := bytes.Split(bytes.Trim(to, "(),[] "), []byte(","))
	if len(f) != len(t) {
		return -1
	}
	for i := range f {
		if !bytes.Equal(bytes.TrimSpace(f[i]), bytes.TrimSpace(t[i])) {
			return i
		}
	}
	return -1
}
