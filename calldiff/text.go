package calldiff

import (
	"fmt"
	"io"
	"strings"

	"github.com/kcrash/kcrash/software"
)

// WriteText prints the comparison for a person. Strings that come from the
// logs pass through clean, so that a log cannot drive the terminal.
func WriteText(w io.Writer, r *Result, clean func(string) string) {
	if clean == nil {
		clean = func(s string) string { return s }
	}
	side := func(tag string, s *Side) {
		fmt.Fprintf(w, "%s: %s (%s", tag, clean(s.Path), s.Kind)
		if s.Level > 0 {
			fmt.Fprintf(w, ", %s level %d", s.Format, s.Level)
		}
		fmt.Fprintf(w, ", %d calls in %d process(es))\n", s.Calls, len(s.Processes))
		if v := s.Verdict; v != nil {
			from := ""
			if v.FromLog {
				from = " [from the log alone]"
			}
			fmt.Fprintf(w, "   verdict %s (%s)%s: %s\n", v.Kind, v.Confidence, from, clean(v.Summary))
			if v.Suspect != "" {
				fmt.Fprintf(w, "   suspect call: %s\n", clean(v.Suspect))
			}
		}
		for _, x := range s.Warnings {
			fmt.Fprintf(w, "   warning: %s\n", clean(x))
		}
	}
	side("A", r.A)
	side("B", r.B)
	writeSoftware(w, r.Software, clean)
	if len(r.Pairs) == 0 {
		fmt.Fprintln(w, "\nno kernel-API calls to compare (no process of A called what a process of B called)")
	}
	call := func(c *CallRef) string {
		if c == nil {
			return "the start"
		}
		return fmt.Sprintf("%s (line %d)", clean(c.API), c.Line)
	}
	calls := func(cs []CallRef, n int) string {
		var parts []string
		for _, c := range cs {
			parts = append(parts, call(&c))
		}
		s := strings.Join(parts, ", ")
		if n > len(cs) {
			s += fmt.Sprintf(", … (%d calls)", n)
		}
		return s
	}
	for _, p := range r.Pairs {
		fmt.Fprintf(w, "\nprocess %s%s (%d calls) ↔ %s%s (%d calls); aligned the last %d and %d calls\n",
			clean(p.A.File), pidText(p.A.Pid), p.A.Calls, clean(p.B.File), pidText(p.B.Pid), p.B.Calls, p.A.Window, p.B.Window)
		if p.Note != "" {
			fmt.Fprintf(w, "  %s\n", p.Note)
		}
		if h := p.FirstDivergence; h != nil {
			fmt.Fprintf(w, "  first divergence, after %s in A / %s in B:\n", call(h.After), call(h.AfterB))
			if h.ACount > 0 {
				fmt.Fprintf(w, "    only in A: %s\n", calls(h.A, h.ACount))
			}
			if h.BCount > 0 {
				fmt.Fprintf(w, "    only in B: %s\n", calls(h.B, h.BCount))
			}
		} else if p.Aligned {
			fmt.Fprintln(w, "  the aligned windows make the same calls in the same order")
		}
		if p.HunksTotal > 1 {
			fmt.Fprintf(w, "  %d places in the windows where one run made calls the other did not\n", p.HunksTotal)
		}
		for _, c := range p.Missing {
			switch {
			case c.B == 0:
				fmt.Fprintf(w, "  missing in B: %s (called %d× in A, never in B)\n", clean(c.API), c.A)
			default:
				fmt.Fprintf(w, "  missing in A: %s (called %d× in B, never in A)\n", clean(c.API), c.B)
			}
		}
		for i, c := range p.CountChanges {
			if i == 5 {
				fmt.Fprintf(w, "  … %d more APIs called a different number of times\n", len(p.CountChanges)-5)
				break
			}
			fmt.Fprintf(w, "  count: %s %d× in A, %d× in B\n", clean(c.API), c.A, c.B)
		}
		if d := p.FirstShapeJump(); d != nil {
			fmt.Fprintf(w, "  first shape jump between the runs: %s %s %s in A (line %d), %s in B (line %d)\n",
				clean(d.API), clean(d.Arg), clean(d.A), d.LineA, clean(d.B), d.LineB)
		}
		for i, d := range p.ArgDiffs {
			if i == 5 {
				break
			}
			fmt.Fprintf(w, "    %s %s %s: %s in A, %s in B (lines %d/%d)\n", clean(d.API), clean(d.Arg), d.Field, clean(d.A), clean(d.B), d.LineA, d.LineB)
		}
		if p.ArgDiffsTotal > 5 {
			fmt.Fprintf(w, "    (%d argument differences in all)\n", p.ArgDiffsTotal)
		}
		for i, d := range p.StatDiffs {
			if i == 5 {
				fmt.Fprintf(w, "    (%d statistics differences in all)\n", p.StatDiffsTotal)
				break
			}
			what := map[string]string{"nonfinite_in_a": "non-finite in A only", "nonfinite_in_b": "non-finite in B only", "magnitude": "orders of magnitude apart"}[d.What]
			fmt.Fprintf(w, "  statistics %s: %s %s: A %s (line %d) / B %s (line %d)\n", what, clean(d.API), clean(d.Arg), clean(d.A), d.LineA, clean(d.B), d.LineB)
		}
		if e := p.End; e != nil && e.Side != "" {
			ended, other := "A", "B"
			if e.Side == "b" {
				ended, other = "B", "A"
			}
			state := ""
			switch {
			case e.Unfinished:
				state = ", which never returned"
			case e.At.Exception != "":
				state = ", which raised " + clean(e.At.Exception)
			case e.At.Returned:
				state = ", which returned"
			}
			fmt.Fprintf(w, "  %s ended at %s%s; %s went on with %d more calls: %s\n",
				ended, call(e.At), state, other, e.OtherMore, calls(e.OtherNext, e.OtherMore))
		}
	}
	for _, x := range r.OnlyA {
		fmt.Fprintf(w, "\nprocess only in A: %s%s (%d calls)\n", clean(x.File), pidText(x.Pid), x.Calls)
	}
	for _, x := range r.OnlyB {
		fmt.Fprintf(w, "\nprocess only in B: %s%s (%d calls)\n", clean(x.File), pidText(x.Pid), x.Calls)
	}
}

func pidText(pid int) string {
	if pid == 0 {
		return ""
	}
	return fmt.Sprintf(" [pid %d]", pid)
}

// writeSoftware prints the two bundles' software side by side: what
// differs first (a rebuilt extension, another torch or driver is often the
// whole story of "it worked yesterday"), then how much was the same.
func writeSoftware(w io.Writer, rows []software.Row, clean func(string) string) {
	if len(rows) == 0 {
		return
	}
	width := len("what")
	var differ []software.Row
	for _, r := range rows {
		if !r.Same {
			differ = append(differ, r)
			width = max(width, len(r.What))
		}
	}
	if len(differ) == 0 {
		fmt.Fprintf(w, "\nsoftware: the same in A and B (%d packages, versions and libraries compared)\n", len(rows))
		return
	}
	fmt.Fprintf(w, "\nsoftware that differs (%d of %d compared):\n", len(differ), len(rows))
	orNone := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return clean(s)
	}
	for _, r := range differ {
		fmt.Fprintf(w, "  %-*s  A %s  |  B %s\n", width, clean(r.What), orNone(r.A), orNone(r.B))
	}
}
