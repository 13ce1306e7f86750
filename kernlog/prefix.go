package kernlog

import (
	"strings"
	"time"
)

// rec is the parser's own view of a line. It carries times by value so that
// reading a large log allocates nothing per line beyond the text itself; the
// public Line with its pointers is built only when a caller asks for one.
type rec struct {
	n       int
	raw     string
	text    string
	t       time.Time
	hasT    bool
	mono    time.Duration
	hasMono bool
	// cont marks a line that carries no prefix and starts with whitespace:
	// dmesg and journalctl print the later lines of a multi-line kernel record
	// that way.
	cont bool
}

func (r *rec) line() Line {
	l := Line{N: r.n, Text: r.text, Raw: r.raw}
	if r.hasT {
		t := r.t
		l.Time = &t
	}
	if r.hasMono {
		m := r.mono
		l.Mono = &m
	}
	return l
}

func recOf(l *Line) rec {
	if l.Text == "" && l.Raw != "" {
		// A Line built from raw text alone: split it here rather than
		// silently find nothing.
		r := splitPrefix(l.Raw, l.N, 0)
		if l.Time != nil {
			r.t, r.hasT = *l.Time, true
		}
		if l.Mono != nil {
			r.mono, r.hasMono = *l.Mono, true
		}
		return r
	}
	r := rec{n: l.N, raw: l.Raw, text: l.Text}
	if l.Time != nil {
		r.t, r.hasT = *l.Time, true
	}
	if l.Mono != nil {
		r.mono, r.hasMono = *l.Mono, true
	}
	r.cont = !r.hasT && !r.hasMono && len(l.Raw) > 0 && (l.Raw[0] == ' ' || l.Raw[0] == '\t')
	return r
}

// SplitPrefix recognises the prefix forms kernel messages reach kcrash in:
//
//	[  12.345678] msg                         dmesg
//	[Mon Jan  2 15:04:05 2006] msg            dmesg -T / --ctime
//	[  12.345678 <    0.000010>] msg          dmesg -d
//	2024-05-01T12:00:00,123456+00:00 msg      dmesg --time-format=iso
//	kern  :warn  : <any of the above> msg     dmesg --decode
//	Jan  2 15:04:05 host kernel: msg          syslog / journalctl (year from the year argument)
//	2024-05-01T12:00:00+0000 host kernel: msg journalctl -o short-iso
//	6,1234,5678901,-;msg                      /dev/kmsg record
//	<6>msg                                    console level prefix (dmesg -r)
//	2024-05-01T12:00:00.1Z stdout F msg       CRI (Kubernetes) container log
//	> msg, `msg`                              markdown quoting of pasted logs
//	svc  | msg                                docker compose
//
// Prefixes nest (a syslog line may carry a dmesg uptime, a pasted ctime line a
// markdown quote) and are peeled until none is left. Absolute times are
// normalised to UTC; forms without a zone (ctime, syslog) are taken as UTC
// because the zone of the host that wrote them is not in the text. Syslog
// forms carry no year: year supplies it; with a year outside 1970-9999 (0 for
// "unknown") Time stays nil.
func SplitPrefix(raw string, n int, year int) Line {
	r := splitPrefix(raw, n, year)
	return r.line()
}

func splitPrefix(raw string, n, year int) rec {
	r := rec{n: n, raw: raw}
	s := raw
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	peeled := false
	// Each pass removes one prefix; the bound keeps hostile input linear.
	for range 8 {
		next, ok := r.peel(s, year)
		if !ok {
			break
		}
		s, peeled = next, true
	}
	r.text = s
	r.cont = !peeled && len(s) > 0 && (s[0] == ' ' || s[0] == '\t')
	return r
}

// peel removes one prefix from s, recording any time it carries.
func (r *rec) peel(s string, year int) (string, bool) {
	if s == "" {
		return s, false
	}
	switch c := s[0]; {
	case c == '>':
		if strings.HasPrefix(s, "> ") {
			return s[2:], true
		}
	case c == '`':
		return strings.TrimSuffix(s[1:], "`"), true
	case c == '[':
		return r.peelBracket(s)
	case c == '<':
		return peelLevel(s)
	case isDigit(c):
		if rest, ok := r.peelKmsg(s); ok {
			return rest, true
		}
		if rest, ok := r.peelISO(s); ok {
			return rest, true
		}
	case isUpper(c):
		if rest, ok := r.peelSyslog(s, year); ok {
			return rest, true
		}
	case isLower(c):
		if rest, ok := peelDecode(s); ok {
			return rest, true
		}
	}
	return peelCompose(s)
}

// peelBracket handles "[ 12.345678] ", "[ 12.3 <  0.1>] ", "[  +0.000010] ",
// "[Sun Feb 23 16:24:18 2025] " and kubectl's "[pod/name/container] ".
func (r *rec) peelBracket(s string) (string, bool) {
	end := strings.IndexByte(s, ']')
	if end < 0 || end > 40 {
		return s, false
	}
	in := strings.TrimSpace(s[1:end])
	rest := strings.TrimPrefix(s[end+1:], " ")
	if in == "" {
		return s, false
	}
	if lt := strings.IndexByte(in, '<'); lt > 0 {
		in = strings.TrimSpace(in[:lt]) // dmesg -d appends the delta
	}
	switch {
	case isDigit(in[0]):
		d, ok := parseUptime(in)
		if !ok {
			return s, false
		}
		if !r.hasMono {
			r.mono, r.hasMono = d, true
		}
		return rest, true
	case in[0] == '+':
		if _, ok := parseUptime(in[1:]); ok {
			return rest, true
		}
	case strings.HasPrefix(in, "pod/"):
		return rest, true
	case isUpper(in[0]):
		if t, ok := parseCtime(in); ok {
			r.setTime(t)
			return rest, true
		}
	}
	return s, false
}

// plausibleYear bounds the years accepted from text or from the caller, so
// a stray "0000-01-01" never becomes a timestamp.
func plausibleYear(y int) bool { return y >= 1970 && y <= 9999 }

func (r *rec) setTime(t time.Time) {
	if !r.hasT {
		r.t, r.hasT = t, true
	}
}

// parseUptime reads "12345.678901" (seconds.micro), the only shape dmesg
// prints; integers alone are rejected so OOM task-table rows "[  32415]" are
// not mistaken for timestamps.
func parseUptime(s string) (time.Duration, bool) {
	sec, rest := leadingDigits(s)
	if sec == "" || len(sec) > 10 || !strings.HasPrefix(rest, ".") {
		return 0, false
	}
	frac, rest := leadingDigits(rest[1:])
	if frac == "" || rest != "" || len(frac) > 9 {
		return 0, false
	}
	d := time.Duration(atoiSmall(sec)) * time.Second
	ns := atoiSmall(frac)
	for i := len(frac); i < 9; i++ {
		ns *= 10
	}
	return d + time.Duration(ns), true
}

// atoiSmall converts a digit string already bounded by the caller.
func atoiSmall(s string) int64 {
	var v int64
	for i := 0; i < len(s); i++ {
		v = v*10 + int64(s[i]-'0')
	}
	return v
}

// num2 reads exactly two digits, the first of which may be a space (ctime
// and syslog pad the day that way).
func num2(s string, i int) (int, bool) {
	if i+2 > len(s) {
		return 0, false
	}
	a, b := s[i], s[i+1]
	if a == ' ' {
		a = '0'
	}
	if !isDigit(a) || !isDigit(b) {
		return 0, false
	}
	return int(a-'0')*10 + int(b-'0'), true
}

var months = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

func month(s string) (time.Month, bool) {
	if len(s) < 3 {
		return 0, false
	}
	for i, m := range months {
		if s[:3] == m {
			return time.Month(i + 1), true
		}
	}
	return 0, false
}

// clock reads "hh:mm:ss" at s[i:].
func clock(s string, i int) (h, m, sec int, ok bool) {
	if i+8 > len(s) || s[i+2] != ':' || s[i+5] != ':' {
		return 0, 0, 0, false
	}
	h, ok1 := num2(s, i)
	m, ok2 := num2(s, i+3)
	sec, ok3 := num2(s, i+6)
	if !ok1 || !ok2 || !ok3 || s[i] == ' ' || s[i+3] == ' ' || s[i+6] == ' ' || h > 23 || m > 59 || sec > 60 {
		return 0, 0, 0, false
	}
	return h, m, sec, true
}

// parseCtime reads "Sun Feb 23 16:24:18 2025".
func parseCtime(s string) (time.Time, bool) {
	if len(s) != 24 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ' {
		return time.Time{}, false
	}
	mon, ok := month(s[4:])
	if !ok {
		return time.Time{}, false
	}
	day, ok := num2(s, 8)
	if !ok || day < 1 || day > 31 {
		return time.Time{}, false
	}
	h, m, sec, ok := clock(s, 11)
	if !ok {
		return time.Time{}, false
	}
	y, rest := leadingDigits(s[20:])
	if len(y) != 4 || rest != "" || !plausibleYear(int(atoiSmall(y))) {
		return time.Time{}, false
	}
	return time.Date(int(atoiSmall(y)), mon, day, h, m, sec, 0, time.UTC), true
}

// peelLevel strips the "<6>" console level prefix of dmesg -r.
func peelLevel(s string) (string, bool) {
	d, rest := leadingDigits(s[1:])
	if d == "" || len(d) > 3 || !strings.HasPrefix(rest, ">") {
		return s, false
	}
	return rest[1:], true
}

// peelKmsg strips a /dev/kmsg record header "PRIO,SEQ,USEC,FLAGS[,...];".
func (r *rec) peelKmsg(s string) (string, bool) {
	semi := strings.IndexByte(s, ';')
	if semi < 0 || semi > 80 {
		return s, false
	}
	f := strings.Split(s[:semi], ",")
	if len(f) < 4 {
		return s, false
	}
	for _, x := range f[:3] {
		if d, rest := leadingDigits(x); d == "" || rest != "" || len(d) > 20 {
			return s, false
		}
	}
	if len(f[2]) > 18 {
		return s, false
	}
	if !r.hasMono {
		r.mono, r.hasMono = time.Duration(atoiSmall(f[2]))*time.Microsecond, true
	}
	return s[semi+1:], true
}

// peelISO strips "2024-05-01T12:00:00[,.]frac[Z|+hh:mm|+hhmm] " and what
// journalctl or the CRI runtime put after it.
func (r *rec) peelISO(s string) (string, bool) {
	t, n, ok := parseISO(s)
	if !ok {
		return s, false
	}
	rest := s[n:]
	if rest != "" && rest[0] != ' ' {
		return s, false
	}
	r.setTime(t)
	rest = strings.TrimPrefix(rest, " ")
	rest = peelCRI(rest)
	return peelKernelTag(rest, false), true
}

func parseISO(s string) (time.Time, int, bool) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') {
		return time.Time{}, 0, false
	}
	y, rest := leadingDigits(s[:4])
	if len(y) != 4 || rest != "" || !plausibleYear(int(atoiSmall(y))) {
		return time.Time{}, 0, false
	}
	mo, ok1 := num2(s, 5)
	day, ok2 := num2(s, 8)
	if !ok1 || !ok2 || s[5] == ' ' || s[8] == ' ' || mo < 1 || mo > 12 || day < 1 || day > 31 {
		return time.Time{}, 0, false
	}
	h, m, sec, ok := clock(s, 11)
	if !ok {
		return time.Time{}, 0, false
	}
	i := 19
	var ns int64
	if i < len(s) && (s[i] == '.' || s[i] == ',') {
		frac, _ := leadingDigits(s[i+1:])
		if frac == "" {
			return time.Time{}, 0, false
		}
		i += 1 + len(frac)
		if len(frac) > 9 {
			frac = frac[:9]
		}
		ns = atoiSmall(frac)
		for k := len(frac); k < 9; k++ {
			ns *= 10
		}
	}
	t := time.Date(int(atoiSmall(y)), time.Month(mo), day, h, m, sec, int(ns), time.UTC)
	off, n, ok := zoneOffset(s[i:])
	if !ok {
		return time.Time{}, 0, false
	}
	return t.Add(-off), i + n, true
}

// zoneOffset reads "Z", "+hh:mm", "+hhmm" or nothing.
func zoneOffset(s string) (time.Duration, int, bool) {
	if s == "" || s[0] == ' ' {
		return 0, 0, true
	}
	if s[0] == 'Z' {
		return 0, 1, true
	}
	if s[0] != '+' && s[0] != '-' {
		return 0, 0, false
	}
	h, ok := num2(s, 1)
	if !ok || s[1] == ' ' {
		return 0, 0, false
	}
	n, mi := 3, 3
	if len(s) > 3 && s[3] == ':' {
		n, mi = 6, 4
	} else {
		n = 5
	}
	m, ok := num2(s, mi)
	if !ok || s[mi] == ' ' || h > 14 || m > 59 {
		return 0, 0, false
	}
	off := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	if s[0] == '-' {
		off = -off
	}
	return off, n, true
}

// peelCRI strips the "stdout F " stream/tag pair of a CRI container log.
func peelCRI(s string) string {
	for _, p := range [...]string{"stdout F ", "stderr F ", "stdout P ", "stderr P "} {
		if strings.HasPrefix(s, p) {
			return s[len(p):]
		}
	}
	return s
}

// peelSyslog strips "Jan  2 15:04:05[.frac] " and the host/tag after it.
func (r *rec) peelSyslog(s string, year int) (string, bool) {
	if len(s) < 16 || s[3] != ' ' {
		return s, false
	}
	mon, ok := month(s)
	if !ok {
		return s, false
	}
	day, ok := num2(s, 4)
	if !ok || day < 1 || day > 31 || s[6] != ' ' {
		return s, false
	}
	h, m, sec, ok := clock(s, 7)
	if !ok {
		return s, false
	}
	i := 15
	var ns int64
	if i < len(s) && s[i] == '.' {
		frac, _ := leadingDigits(s[i+1:])
		i += 1 + len(frac)
		if len(frac) > 9 {
			frac = frac[:9]
		}
		ns = atoiSmall(frac)
		for k := len(frac); k < 9; k++ {
			ns *= 10
		}
	}
	if i < len(s) && s[i] != ' ' {
		return s, false
	}
	if plausibleYear(year) {
		r.setTime(time.Date(year, mon, day, h, m, sec, int(ns), time.UTC))
	}
	return peelKernelTag(strings.TrimPrefix(s[i:], " "), true), true
}

// peelKernelTag removes "host kernel: " (or "kernel: ") after a syslog or
// journal timestamp. With anyTag, any "host tag[pid]: " is removed too: after a
// month-name timestamp the next words are always host and tag, while after an
// ISO stamp they may be message text ("amdgpu 0000:0e:00.0: ...").
func peelKernelTag(s string, anyTag bool) string {
	w1, rest1, ok := cutWord(s)
	if !ok {
		return s
	}
	// "NVRM:" opens the NVIDIA driver's own message, never a tag: a journal
	// pasted without host and tag ("Sep 18 20:07:01 NVRM: Xid ...") keeps it.
	if w1 == "kernel:" || (anyTag && strings.HasSuffix(w1, ":") && w1 != "NVRM:") {
		return rest1
	}
	w2, rest2, ok := cutWord(rest1)
	if !ok {
		return s
	}
	if w2 == "kernel:" || (anyTag && strings.HasSuffix(w2, ":")) {
		return rest2
	}
	return s
}

// cutWord splits off the first space-delimited word; the word must be
// followed by a space so that a bare "kernel:" at the end is left alone.
func cutWord(s string) (word, rest string, ok bool) {
	i := strings.IndexByte(s, ' ')
	if i <= 0 || i > 64 {
		return "", s, false
	}
	return s[:i], strings.TrimLeft(s[i+1:], " "), true
}

var (
	facilities = map[string]bool{"kern": true, "user": true, "mail": true, "daemon": true, "auth": true,
		"syslog": true, "lpr": true, "news": true, "uucp": true, "cron": true, "authpriv": true, "ftp": true,
		"local0": true, "local1": true, "local2": true, "local3": true, "local4": true, "local5": true,
		"local6": true, "local7": true}
	levels = map[string]bool{"emerg": true, "alert": true, "crit": true, "err": true, "warn": true,
		"notice": true, "info": true, "debug": true}
)

// peelDecode strips dmesg --decode's "kern  :warn  : ".
func peelDecode(s string) (string, bool) {
	c1 := strings.IndexByte(s, ':')
	if c1 < 0 || c1 > 10 {
		return s, false
	}
	c2 := strings.IndexByte(s[c1+1:], ':')
	if c2 < 0 || c2 > 8 {
		return s, false
	}
	c2 += c1 + 1
	if !facilities[strings.TrimRight(s[:c1], " ")] || !levels[strings.TrimRight(s[c1+1:c2], " ")] {
		return s, false
	}
	return strings.TrimPrefix(s[c2+1:], " "), true
}

// peelCompose strips docker compose's "service  | " prefix.
func peelCompose(s string) (string, bool) {
	i := 0
	for i < len(s) && i < 64 && (isLower(s[i]) || isUpper(s[i]) || isDigit(s[i]) || s[i] == '_' || s[i] == '-' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return s, false
	}
	j := i
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if j == i || !strings.HasPrefix(s[j:], "| ") {
		return s, false
	}
	return s[j+2:], true
}
