package triage

import (
	"regexp"
	"strings"
)

// Text arrives damaged by the way it travelled: a container runtime splits
// long lines into partial records, chat tools and log shippers drop the space
// after "error:". Each line is repaired once here, before any signature or
// parser looks at it, so that no rule has to allow for it.

// lsCRIRe is a CRI (containerd, CRI-O, Kubernetes node) log record's header:
// time, stream, and F (full, ends a line) or P (partial, more follows).
var lsCRIRe = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) (stdout|stderr) )([FP]) `)

// lsMaxCRIPartial bounds the text held back for one line: the runtime splits
// at 16 KiB, and a line past the scanner's segment limit is cut anyway.
const lsMaxCRIPartial = lsMaxSegment

// joinCRIPartial returns the line to look at, or false while a CRI line is
// still incomplete. A partial record's text is held per stream and put in
// front of the text of the record that completes it, under that record's
// header, so that the prefixes and the error split across records are one
// line again.
func (st *scanState) joinCRIPartial(raw string) (string, bool) {
	if !lsDateAt(raw) || raw[10] != 'T' {
		return raw, true
	}
	w := raw
	if len(w) > lsPrefixWindow {
		w = w[:lsPrefixWindow]
	}
	m := lsCRIRe.FindStringSubmatchIndex(w)
	if m == nil {
		return raw, true
	}
	stream, tag, body := raw[m[4]:m[5]], raw[m[6]:m[7]], raw[m[1]:]
	pending := st.criPartial[stream]
	if tag == "P" {
		if st.criPartial == nil {
			st.criPartial = map[string]string{}
		}
		if len(pending)+len(body) <= lsMaxCRIPartial {
			st.criPartial[stream] = pending + body
		}
		return "", false
	}
	if pending == "" {
		return raw, true
	}
	delete(st.criPartial, stream)
	return raw[:m[6]] + "F " + pending + body, true
}

// lsUnglue puts back the space after "Error:", "failure:", "Warning:"...
// when something removed it ("RuntimeError:CUDA error:an illegal memory
// access"): the signatures spell the message as the runtime prints it.
func lsUnglue(s string) string {
	var b *strings.Builder
	last := 0
	for i := strings.IndexByte(s, ':'); i >= 0; {
		if i+1 < len(s) && lsLetter(s[i+1]) && lsGlueWord(s[:i]) {
			if b == nil {
				b = &strings.Builder{}
				b.Grow(len(s) + 8)
			}
			b.WriteString(s[last : i+1])
			b.WriteByte(' ')
			last = i + 1
		}
		j := strings.IndexByte(s[i+1:], ':')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if b == nil {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func lsLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// lsGlueWord: the text before a colon ends with a word that introduces a
// message (RuntimeError, error, failure, Exception, Warning, FATAL).
func lsGlueWord(before string) bool {
	k := len(before)
	for k > 0 && lsLetter(before[k-1]) {
		k--
	}
	w := strings.ToLower(before[k:])
	for _, suf := range []string{"error", "failure", "exception", "warning", "fatal"} {
		if strings.HasSuffix(w, suf) {
			return true
		}
	}
	return false
}

// lsStripMarkdown removes what a Markdown paste adds around log text: one
// inline-code backtick opening the line (not a ``` fence) and bold markers
// (`**Watchdog caught collective operation timeout:**`), which split the
// words a signature spells out.
func lsStripMarkdown(s string) string {
	if u, ok := lsUnInlineCode(s); ok {
		s = u
	} else if strings.HasPrefix(s, "`") && !strings.HasPrefix(s, "``") {
		s = s[1:]
	}
	if strings.Contains(s, "**") {
		s = lsDropBold(s)
	}
	return s
}

// lsDropBold removes each `**` that is exactly two stars: longer runs are
// the program's own (Slurm's `*** STEP 12 CANCELLED ***`).
func lsDropBold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] != '*' {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '*' {
			j++
		}
		if j-i != 2 {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}

// lsUnInlineCode drops the inline-code marks a Markdown paste put around a
// whole line after its indent (“  `File "x.py", line 3, in f`”), keeping the
// indent: a traceback's or a dump's frames are told by it. Only a line whose
// two backticks are its first and last characters past the indent.
func lsUnInlineCode(s string) (string, bool) {
	body := strings.TrimLeft(s, " \t")
	body = strings.TrimRight(body, " \t")
	if len(body) < 3 || body[0] != '`' || body[len(body)-1] != '`' || body[1] == '`' || strings.Count(body, "`") != 2 {
		return s, false
	}
	indent := s[:len(s)-len(strings.TrimLeft(s, " \t"))]
	return indent + body[1:len(body)-1], true
}
