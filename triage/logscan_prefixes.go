// A line as the rules read it: control characters and terminal escapes
// cleaned, the prefixes of loggers, launchers and container runtimes taken
// off (and kept as labels), and the evidence text quoted from it.

package triage

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// lsCleanControl drops ANSI escape sequences and control characters (tabs
// kept), and makes the text valid UTF-8 so that it can go into JSON as is.
func lsCleanControl(b []byte) string {
	var out []byte
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == 0x1b {
			if out == nil {
				out = append(make([]byte, 0, len(b)), b[:i]...)
			}
			i = lsSkipEscape(b, i)
			continue
		}
		if (c < 0x20 && c != '\t') || c == 0x7f {
			if out == nil {
				out = append(make([]byte, 0, len(b)), b[:i]...)
			}
			continue
		}
		if out != nil {
			out = append(out, c)
		}
	}
	s := string(b)
	if out != nil {
		s = string(out)
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}

// lsSkipEscape returns the index of the last byte of the escape sequence at i.
func lsSkipEscape(b []byte, i int) int {
	if i+1 >= len(b) {
		return i
	}
	switch b[i+1] {
	case '[': // CSI: parameters and intermediates, then one final byte
		j := i + 2
		for j < len(b) && (b[j] < 0x40 || b[j] > 0x7e) {
			j++
		}
		return j
	case ']': // OSC: up to BEL or ST
		for j := i + 2; j < len(b); j++ {
			if b[j] == 0x07 {
				return j
			}
			if b[j] == 0x1b && j+1 < len(b) && b[j+1] == '\\' {
				return j + 1
			}
		}
		return len(b) - 1
	}
	return i + 1
}

// prefixLabels is what line prefixes say about who wrote a line.
type prefixLabels struct {
	compose  string // docker compose service
	process  string // `(EngineCore_DP0 pid=374)`
	pid      int
	rank     int // torchrun `[rank3]:`; -1 when none
	parallel string
	time     *time.Time
}

func (l prefixLabels) stream() string {
	var parts []string
	if l.compose != "" {
		parts = append(parts, "compose:"+l.compose)
	}
	if l.process != "" {
		parts = append(parts, fmt.Sprintf("%s/%d", l.process, l.pid))
	}
	if l.rank >= 0 {
		parts = append(parts, "rank"+strconv.Itoa(l.rank))
	}
	return strings.Join(parts, " ")
}

func (l prefixLabels) apply(f *evidence.Finding) {
	if l.process != "" {
		f.Details.SetText(detail.Process, l.process)
		f.Pid = l.pid
	}
	if l.compose != "" {
		f.Details["container"] = l.compose
	}
	if l.rank >= 0 {
		f.Details["rank"] = int64(l.rank)
	}
	if l.parallel != "" {
		f.Details["parallel_rank"] = l.parallel
	}
	if l.time != nil {
		t := *l.time
		f.Time = &t
	}
}

type lsPrefixRule struct {
	// may is a cheap test of the first bytes; the regexp runs only when it passes.
	may   func(s string) bool
	re    *regexp.Regexp
	apply func(m []string, l *prefixLabels)
}

func lsDigit(c byte) bool { return c >= '0' && c <= '9' }

func lsDateAt(s string) bool {
	return len(s) > 20 && lsDigit(s[0]) && s[4] == '-' && s[7] == '-'
}

func lsHasAnyPrefix(s string, ps ...string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// lsPrefixWindow bounds the text a prefix regexp looks at: prefixes are
// short, and the backtracking matcher's cost grows with its input.
const lsPrefixWindow = 256

// lsPrefixRules strip, from the start of a line, what log shippers and
// frameworks put in front of the program's own text. They are tried over and
// over until none matches, because they stack: CRI, then `(Name pid=N)`, then
// a vLLM logging header.
var lsPrefixRules = []lsPrefixRule{
	{func(s string) bool { return lsDateAt(s) && s[10] == 'T' },
		regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) (?:stdout|stderr) [FP] `), lsSetTime},
	{func(s string) bool { return lsDateAt(s) && s[10] == 'T' },
		regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) `), lsSetTime},
	// A paste's line-number gutter: `[1824] ` (a viewer's bracketed numbers).
	{func(s string) bool { return s[0] == '[' && len(s) > 1 && lsDigit(s[1]) },
		regexp.MustCompile(`^\[\d{1,7}\](?: |$)`), nil},
	// A markdown quote (`> `), as logs pasted into issues and chat arrive.
	{func(s string) bool { return s[0] == '>' },
		regexp.MustCompile(`^> ?`), nil},
	{func(s string) bool { return s[0] == '(' },
		// vLLM's multiproc workers add their rank: `(VllmWorker rank=0 pid=N)`.
		regexp.MustCompile(`^\(([A-Za-z_][\w.:-]*)(?: rank=(\d+))? pid=(\d+)(?:, ip=[^)]*)?\) ?`), func(m []string, l *prefixLabels) {
			l.process = m[1]
			if m[2] != "" {
				l.rank, _ = strconv.Atoi(m[2])
			}
			l.pid, _ = strconv.Atoi(m[3])
		}},
	{func(s string) bool { return lsHasAnyPrefix(s, "[rank", "[default") },
		regexp.MustCompile(`^\[(?:rank|default)(\d+)\]: ?`), func(m []string, l *prefixLabels) { l.rank, _ = strconv.Atoi(m[1]) }},
	// SGLang: `[2025-02-21 22:59:28 TP0] `, `[2025-... DP0 TP3 EP3] `; also a bare bracketed time.
	{func(s string) bool { return s[0] == '[' && lsDateAt(s[1:]) },
		regexp.MustCompile(`^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?((?: [A-Z]{2,3}\d+)*)\] `), func(m []string, l *prefixLabels) {
			if p := strings.TrimSpace(m[1]); p != "" {
				l.parallel = p
			}
		}},
	// vLLM: `ERROR 01-28 03:21:01 engine.py:387] ` (V0), `ERROR 08-28 06:16:24 [async_llm.py:744] ` (V1).
	{func(s string) bool {
		return lsHasAnyPrefix(s, "DEBUG ", "INFO ", "WARNING ", "WARN ", "ERROR ", "CRITICAL ")
	},
		regexp.MustCompile(`^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:\[[^\]]*\]|[\w./-]+:\d+\]) ?`), nil},
	// glog and PyTorch's c10 logging: `[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] `, `E0626 06:24:44.903881 123 file.cc:616] `.
	{func(s string) bool {
		if s[0] == '[' {
			s = s[1:]
		}
		return len(s) > 2 && strings.IndexByte("IWEF", s[0]) >= 0 && lsDigit(s[1])
	}, regexp.MustCompile(`^\[?[IWEF]\d{3,4} \d\d:\d\d:\d\d\.\d+(?: +\d+)? [\w.-]+:\d+\] ?`), nil},
	// syslog/journal: `Oct  7 12:58:23 host prog[123]: `.
	{func(s string) bool { return len(s) > 16 && s[0] >= 'A' && s[0] <= 'Z' && s[3] == ' ' && s[6] == ' ' },
		regexp.MustCompile(`^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^:\s]+(?:\[\d+\])?: `), nil},
	// Python logging's common `2025-01-02 03:04:05,678 - name - ERROR - `.
	{func(s string) bool { return lsDateAt(s) && s[10] == ' ' },
		regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - [\w.]+ - [A-Z]+ - `), nil},
	// docker compose: `ollama  | `.
	{func(s string) bool {
		if len(s) > 80 {
			s = s[:80]
		}
		return strings.Contains(s, " | ")
	}, regexp.MustCompile(`^([A-Za-z0-9][\w.-]*)\s+\| `), func(m []string, l *prefixLabels) { l.compose = m[1] }},
}

func lsSetTime(m []string, l *prefixLabels) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700"} {
		if t, err := time.Parse(layout, m[1]); err == nil {
			t = t.UTC()
			l.time = &t
			return
		}
	}
}

func lsStripPrefixes(s string) (string, prefixLabels) {
	l := prefixLabels{rank: -1}
	for iter := 0; iter < 8 && s != ""; iter++ {
		c := s[0]
		if !(c == '[' || c == '(' || c == '>' || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
			break
		}
		matched := false
		for i, r := range lsPrefixRules {
			// A compose-style `name | ` prefix only ever comes first; later it
			// would eat table cells of the program's own output.
			if (i == len(lsPrefixRules)-1 && iter > 0) || !r.may(s) {
				continue
			}
			w := s
			if len(w) > lsPrefixWindow {
				w = w[:lsPrefixWindow]
			}
			m := r.re.FindStringSubmatch(w)
			if m == nil {
				continue
			}
			if r.apply != nil {
				r.apply(m, &l)
			}
			s = s[len(m[0]):]
			matched = true
			break
		}
		if !matched {
			break
		}
	}
	return s, l
}

// lsEvidenceText is the line as evidence: the whole cleaned line when short,
// else a window starting near the match, because a tqdm bar can put a
// kilobyte of block characters before the error.
func lsEvidenceText(raw, content string, at int) string {
	s := strings.TrimRight(raw, " \t")
	if len(s) <= lsMaxText {
		return s
	}
	off := len(raw) - len(content) + at // content is a suffix of raw
	if off < 0 || off > len(s) {
		off = 0
	}
	start := 0
	if off >= 80 {
		start = off
	}
	for start > 0 && !utf8.RuneStart(s[start]) {
		start--
	}
	end := start + lsMaxText
	if end > len(s) {
		end = len(s)
	}
	for end < len(s) && end > start && !utf8.RuneStart(s[end]) {
		end--
	}
	out := s[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(s) {
		out += "…"
	}
	return out
}

// ---- details ----------------------------------------------------------------------
