package triage

import (
	"fmt"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/human"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/kernelapi"
)

// SummaryMeta is what summary.md tells besides the triage result.
type SummaryMeta struct {
	Command    []string      // the child's argv; fills the next steps' command lines
	ExitText   string        // "killed by SIGABRT (core dumped)"; derived from the result when empty
	Duration   time.Duration // how long the run lasted; omitted when 0
	LastLines  []string      // the last lines of the child's output
	Host       string
	BundleName string
	// SlurmJob is the job's id when the bundle is of a Slurm job kcrash did
	// not start (the epilog, attach --slurm-job): a next step's run then
	// goes into the job's batch script under srun, not around the script
	// outside Slurm.
	SlurmJob string
}

const (
	summaryMaxEvidence  = 12
	summaryMaxLastLines = 40
	summaryMaxLineRunes = 400 // wider than the 250 columns a pty gets without a terminal
)

// Summary renders summary.md: the verdict, the evidence lines quoted with
// their source and line, the suspect kernel-API call with its shapes and
// dtypes, the next steps (with the child's command line put into them) and the
// last lines of output. The output depends only on its arguments.
func Summary(r Result, meta SummaryMeta) string {
	var b strings.Builder
	v := r.Verdict
	fmt.Fprintf(&b, "# kcrash: %s (%s confidence)\n\n", v.Kind, human.OrDash(v.Confidence))
	fmt.Fprintf(&b, "**Verdict:** %s\n\n", mdText(v.Summary))

	rows := [][2]string{}
	if len(meta.Command) > 0 {
		rows = append(rows, [2]string{"Command", mdCode(lsClip(shellJoin(meta.Command), 300))})
	}
	exit := meta.ExitText
	if exit == "" {
		for _, f := range r.Findings {
			if f.Source == evidence.SourceExit && f.Kind != evidence.Hang {
				exit = f.Text
				break
			}
		}
	}
	if exit != "" {
		rows = append(rows, [2]string{"Exit", mdText(exit)})
	}
	if meta.Duration > 0 {
		rows = append(rows, [2]string{"Duration", human.Duration(meta.Duration)})
	}
	if len(r.Backend) > 0 {
		rows = append(rows, [2]string{"Backend", backendText(r.Backend)})
	}
	if meta.Host != "" {
		rows = append(rows, [2]string{"Host", mdText(meta.Host)})
	}
	if meta.BundleName != "" {
		rows = append(rows, [2]string{"Bundle", mdCode(meta.BundleName)})
	}
	if len(rows) > 0 {
		b.WriteString("| | |\n|---|---|\n")
		for _, r := range rows {
			fmt.Fprintf(&b, "| %s | %s |\n", r[0], mdCell(r[1]))
		}
		b.WriteString("\n")
	}

	writeEvidence(&b, r.Findings)
	writeUnseen(&b, r.Unseen)
	writeKernelAPI(&b, r.KernelAPI, r.Verdict.Kind != evidence.CleanExit)

	if len(r.NextSteps) > 0 {
		b.WriteString("## Next steps\n\n")
		for i, s := range r.NextSteps {
			step := withCommand(s, meta.Command)
			if meta.SlurmJob != "" {
				step = inBatchScript(s, meta.Command, meta.SlurmJob)
			}
			fmt.Fprintf(&b, "%d. %s\n", i+1, mdText(step))
		}
		b.WriteString("\n")
	}

	if len(meta.LastLines) > 0 {
		lines := meta.LastLines
		if len(lines) > summaryMaxLastLines {
			lines = lines[len(lines)-summaryMaxLastLines:]
		}
		clean := make([]string, len(lines))
		for i, l := range lines {
			clean[i] = clipRunes(strings.TrimRight(terminalLine(l), " \t"), summaryMaxLineRunes)
		}
		fmt.Fprintf(&b, "## Last output lines\n\n")
		writeFenced(&b, "", clean)
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func writeEvidence(b *strings.Builder, fs []evidence.Finding) {
	var shown, ignored int
	var body strings.Builder
	for _, f := range fs {
		role := f.Details.Text(detail.VerdictRole)
		if role == RoleIgnored {
			ignored++
			continue
		}
		if role == RoleSuspect {
			continue // has its own section
		}
		if f.Source == evidence.SourceExit && role != RoleRootCause {
			continue // the table's Exit row says it; as "explained" evidence it is noise
		}
		if shown >= summaryMaxEvidence {
			shown++
			continue
		}
		shown++
		fmt.Fprintf(&body, "%d. **%s** · %s · %s\n", shown, roleText(role), f.Kind, location(f))
		writeFenced(&body, "   ", []string{lsClip(lsCleanControl([]byte(f.Text)), 600)})
	}
	if shown == 0 && ignored == 0 {
		return
	}
	b.WriteString("## Evidence\n\n")
	b.WriteString(body.String())
	var notes []string
	if shown > summaryMaxEvidence {
		notes = append(notes, fmt.Sprintf("%d more finding(s)", shown-summaryMaxEvidence))
	}
	if ignored > 0 {
		notes = append(notes, fmt.Sprintf("%d finding(s) attributed to other processes or devices", ignored))
	}
	if len(notes) > 0 {
		fmt.Fprintf(b, "\n%s: see `triage.findings` in manifest.json.\n", strings.Join(notes, "; "))
	}
	b.WriteString("\n")
}

func roleText(role string) string {
	switch role {
	case RoleRootCause:
		return "root cause"
	case RoleExplained:
		return "explained"
	case RoleAlsoFound:
		return "also found"
	}
	return human.OrDash(role)
}

// location is "source `file:line`" plus time and pid when known.
func location(f evidence.Finding) string {
	s := f.Source
	switch {
	case f.File != "" && f.Line > 0:
		s += " " + mdCode(fmt.Sprintf("%s:%d", f.File, f.Line))
	case f.File != "":
		s += " " + mdCode(f.File)
	case f.Line > 0:
		s += fmt.Sprintf(" line %d", f.Line)
	}
	var extra []string
	if f.Time != nil {
		extra = append(extra, f.Time.UTC().Format(time.RFC3339))
	}
	if f.Pid != 0 {
		extra = append(extra, fmt.Sprintf("pid %d", f.Pid))
	}
	if f.GPU != "" {
		extra = append(extra, "GPU "+f.GPU)
	}
	if f.Xid != 0 {
		extra = append(extra, fmt.Sprintf("Xid %d", f.Xid))
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

// writeKernelAPI writes the kernel-API section; withCall false (a run that
// exited cleanly) leaves out the suspect call: nothing failed to pin on it.
func writeKernelAPI(b *strings.Builder, ka *kernelapi.Report, withCall bool) {
	if ka == nil {
		return
	}
	call, unfinished := ka.UnfinishedCall, true
	if call == nil {
		call, unfinished = ka.LastCall, false
	}
	if !withCall {
		call = nil
	}
	if call == nil && ka.FirstNonfinite == nil && len(ka.ShapeJumps) == 0 {
		return
	}
	b.WriteString("## Suspect kernel-API call\n\n")
	if call != nil {
		state := "the last call logged; it returned (GPU errors are asynchronous, so the faulting kernel may be this one or an earlier one)"
		switch {
		case unfinished:
			state = "started and never returned"
		case !call.Finished:
			state = fmt.Sprintf("the last call logged (level %d records no returns)", ka.Level)
		}
		fmt.Fprintf(b, "%s — %s; %s", mdCode(call.API), state, mdCode(fmt.Sprintf("%s:%d", call.File, call.Line)))
		var extra []string
		if call.Time != nil {
			extra = append(extra, "at "+call.Time.Format("2006-01-02 15:04:05"))
		}
		if call.BeforeEnd > 0 {
			extra = append(extra, call.BeforeEnd.String()+" before the end of the log")
		}
		if call.Pid != 0 {
			extra = append(extra, fmt.Sprintf("pid %d", call.Pid))
		}
		if len(extra) > 0 {
			b.WriteString(" (" + strings.Join(extra, ", ") + ")")
		}
		b.WriteString(".\n\n")
		if len(call.Args) > 0 {
			writeArgs(b, call.Args)
		}
		if unfinished && len(ka.UnfinishedCalls) > 1 {
			var others []string
			for _, c := range ka.UnfinishedCalls[1:] {
				others = append(others, fmt.Sprintf("%s (%s:%d)", mdCode(c.API), path.Base(c.File), c.Line))
			}
			fmt.Fprintf(b, "Other calls that never returned: %s.\n\n", strings.Join(others, ", "))
		}
	}
	if nf := ka.FirstNonfinite; nf != nil {
		fmt.Fprintf(b, "First non-finite tensor: %s of %s (%s), nan_count=%d inf_count=%d, shape %s, dtype %s.\n\n",
			mdCode(nf.Arg.Name), mdCode(nf.Call.API), mdCode(fmt.Sprintf("%s:%d", nf.Call.File, nf.Call.Line)),
			nf.Arg.NanCount, nf.Arg.InfCount, human.OrDash(nf.Arg.Shape), human.OrDash(nf.Arg.Dtype))
	}
	if n := len(ka.ShapeJumps); n > 0 {
		j := ka.ShapeJumps[n-1]
		fmt.Fprintf(b, "Last shape jump: %s %s %s → %s (%s).\n\n", mdCode(j.API), mdCode(j.Arg), j.From, j.To, mdCode(fmt.Sprintf("%s:%d", j.File, j.Line)))
	}
}

func writeArgs(b *strings.Builder, args []kernelapi.Arg) {
	b.WriteString("| arg | type | shape | dtype | device | value |\n|---|---|---|---|---|---|\n")
	for i, a := range args {
		if i >= 16 {
			fmt.Fprintf(b, "| … %d more | | | | | |\n", len(args)-16)
			break
		}
		val := a.Value
		if a.NanCount > 0 || a.InfCount > 0 {
			val = strings.TrimSpace(fmt.Sprintf("%s nan_count=%d inf_count=%d", val, a.NanCount, a.InfCount))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", mdCell(a.Name), mdCell(a.Type), mdCell(a.Shape),
			mdCell(a.Dtype), mdCell(a.Device), mdCell(lsClip(val, 60)))
	}
	b.WriteString("\n")
}

var cmdTokenRe = regexp.MustCompile("-- " + cmdPlaceholder + "(\\s|`|$)")

// withCommand puts the child's command line where a next step says CMD.
func withCommand(step string, argv []string) string {
	if len(argv) == 0 {
		return step
	}
	cmd := shellJoin(argv)
	return cmdTokenRe.ReplaceAllStringFunc(step, func(m string) string {
		return "-- " + cmd + m[len("-- "+cmdPlaceholder):]
	})
}

// writeFenced writes lines as a fenced block that their own backticks cannot close.
func writeFenced(b *strings.Builder, indent string, lines []string) {
	fence := "```"
	for _, l := range lines {
		for strings.Contains(l, fence) {
			fence += "`"
		}
	}
	b.WriteString(indent + fence + "\n")
	for _, l := range lines {
		b.WriteString(indent + l + "\n")
	}
	b.WriteString(indent + fence + "\n")
}

// mdCode is an inline code span that survives backticks in s.
func mdCode(s string) string {
	if s == "" {
		return ""
	}
	ticks := "`"
	for strings.Contains(s, ticks) {
		ticks += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return ticks + " " + s + " " + ticks
	}
	return ticks + s + ticks
}

// mdText keeps a line of evidence from turning into markup without making it
// unreadable where it is read most, a terminal (`kcrash show`): no line
// breaks, and a word holding '<' (`<module>`, `<lambda>`) goes into a code
// span, where a renderer shows it as is; an HTML entity would print as
// "&lt;" in the terminal. An object's repr (`<pkg.Linear object at 0x…>`)
// holds spaces: the span runs to its closing '>', so that no part of it is
// left outside.
func mdText(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 {
		return s // an unpaired backtick: no code spans to keep apart
	}
	for i := 0; i < len(parts); i += 2 {
		if strings.Contains(parts[i], "<") {
			parts[i] = mdAngleSpans(parts[i])
		}
	}
	return strings.Join(parts, "`")
}

// mdAngleSpans puts each run of words that holds a '<' into a code span: from
// the start of the word with the '<' to the end of the word where its '>'
// closes (that same word when it never closes), less trailing punctuation.
func mdAngleSpans(s string) string {
	var b strings.Builder
	for {
		lt := strings.IndexByte(s, '<')
		if lt < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := strings.LastIndexByte(s[:lt], ' ') + 1
		end := lt + strings.IndexByte(s[lt:]+" ", ' ') // the word's end, if nothing closes
		depth := 0
		for j := lt; j < len(s); j++ {
			if s[j] == '<' {
				depth++
			} else if s[j] == '>' {
				if depth--; depth == 0 {
					end = j + strings.IndexByte(s[j:]+" ", ' ')
					break
				}
			}
		}
		core := strings.TrimRight(s[start:end], ";,.:)")
		if !strings.Contains(core, "<") {
			core = s[start:end]
		}
		b.WriteString(s[:start] + "`" + core + "`")
		s = s[start+len(core):]
	}
}

// terminalLine renders one line of output as a terminal shows it: a '\r'
// returns to the first column and what follows overwrites (a progress bar's
// last frame wins, the earlier ones are gone), backspace steps back, an
// erase-line escape (ESC [ K) clears to the end; other escapes (colour) and
// control characters are dropped.
func terminalLine(l string) string {
	if !strings.ContainsAny(l, "\r\b\x1b") {
		return lsCleanControl([]byte(l))
	}
	var buf []rune
	col := 0
	put := func(r rune) {
		if col < len(buf) {
			buf[col] = r
		} else {
			buf = append(buf, r)
		}
		col++
	}
	rs := []rune(strings.ToValidUTF8(l, "\uFFFD"))
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\r':
			col = 0
		case r == '\b':
			if col > 0 {
				col--
			}
		case r == 0x1b:
			if i+1 < len(rs) && rs[i+1] == '[' {
				j := i + 2
				for j < len(rs) && (rs[j] < 0x40 || rs[j] > 0x7e) {
					j++
				}
				if j < len(rs) && rs[j] == 'K' {
					params := string(rs[i+2 : j])
					switch params {
					case "", "0":
						buf = buf[:min(col, len(buf))]
					case "2":
						buf = buf[:0]
					}
				}
				i = j
			} else if i+1 < len(rs) {
				i++
			}
		case r == '\t':
			put(' ')
			for col%8 != 0 {
				put(' ')
			}
		case r < 0x20 || r == 0x7f:
		default:
			put(r)
		}
	}
	return string(buf)
}

// clipRunes cuts s to n characters, marking the cut.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func mdCell(s string) string {
	return strings.ReplaceAll(mdText(s), "|", "\\|")
}

// writeUnseen lists the sources kcrash could not read, so that a reader
// knows the evidence above is not all there was.
func writeUnseen(b *strings.Builder, us []evidence.Unseen) {
	if len(us) == 0 {
		return
	}
	b.WriteString("## Not seen\n\n")
	for _, u := range us {
		fmt.Fprintf(b, "- **%s**: %s\n", mdText(u.Source), mdText(u.Why))
	}
	b.WriteString("\n")
}

// inBatchScript turns a step's `kcrash run FLAGS -- CMD` into the same run
// inside the Slurm job's batch script: the job ran there, with its
// allocation and its environment, and the script run bare outside Slurm
// would not reproduce it.
func inBatchScript(step string, argv []string, job string) string {
	if !cmdTokenRe.MatchString(step) {
		return step
	}
	step = strings.ReplaceAll(step, "`kcrash run ", "`srun kcrash run ")
	step = cmdTokenRe.ReplaceAllStringFunc(step, func(m string) string {
		return "-- PROGRAM" + m[len("-- "+cmdPlaceholder):]
	})
	where := "the job's batch script (`scontrol show job " + job + "` names it; the bundle has it as raw/slurm-batch-script.sh)"
	resubmit := "`sbatch SCRIPT`"
	if len(argv) > 0 && !strings.HasPrefix(argv[0], "slurm-job:") {
		where = "job " + job + "'s batch script " + mdCode(argv[0])
		resubmit = mdCode("sbatch " + shellJoin(argv))
	}
	return strings.TrimRight(step, ". ") + ": in " + where + ", put it before the program the script runs (PROGRAM), and resubmit with " + resubmit + "."
}
