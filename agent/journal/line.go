package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/internal/jsonfast"
)

// appendLine appends e as one JSON line, as encoding/json would write it
// with HTML escaping off (kernel text is full of "->" and "<...>", and each
// \u003e costs the reader a slow path). A record and its time are written
// by hand: this runs for every record the kernel prints. A gap or a time
// json must refuse go through encoding/json.
func appendLine(b []byte, e *Entry) ([]byte, error) {
	start := len(b)
	slow := func() ([]byte, error) {
		// A copy for encoding/json, which makes what it is given escape:
		// e itself stays where its caller keeps it (Append's, on the
		// stack for each record of the ring).
		c := *e
		return appendJSON(b[:start], &c)
	}
	if e.Gap != nil {
		return slow()
	}
	b = append(b, `{"boot":`...)
	b = jsonfast.AppendString(b, e.Boot)
	b = append(b, `,"wall":`...)
	var ok bool
	if b, ok = api.AppendTime(b, e.Wall); !ok {
		return slow()
	}
	b = append(b, `,"rec":`...)
	b = e.Rec.AppendJSON(b)
	if e.Subject.Procs != nil || e.Subject.Devices != nil || e.Subject.Inherited { // omitzero
		b = appendSubject(append(b, `,"subject":`...), &e.Subject)
	}
	return append(b, "}\n"...), nil
}

// appendSubject appends s as encoding/json writes it: a record naming a
// process is one in eight of a flood's, and reflection was most of what
// writing its line cost.
func appendSubject(b []byte, s *Subject) []byte {
	b = append(b, '{')
	comma := false
	field := func(name string) {
		if comma {
			b = append(b, ',')
		}
		comma = true
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
	}
	if len(s.Procs) > 0 {
		field("procs")
		b = append(b, '[')
		for i, p := range s.Procs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendOwner(b, p.Pid, p.UID, p.Cgroup)
		}
		b = append(b, ']')
	}
	if len(s.Devices) > 0 {
		field("devices")
		b = append(b, '[')
		for i, d := range s.Devices {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"bdf":`...)
			b = jsonfast.AppendString(b, d.BDF)
			if len(d.Holders) > 0 {
				b = append(b, `,"holders":[`...)
				for k, h := range d.Holders {
					if k > 0 {
						b = append(b, ',')
					}
					b = appendOwner(b, h.Pid, h.UID, h.Cgroup)
				}
				b = append(b, ']')
			}
			if len(d.Nodes) > 0 {
				b = append(b, `,"nodes":[`...)
				for k, n := range d.Nodes {
					if k > 0 {
						b = append(b, ',')
					}
					b = jsonfast.AppendString(b, n)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if s.Inherited {
		field("inherited")
		b = append(b, "true"...)
	}
	return append(b, '}')
}

// appendOwner appends a Proc or a Holder: `{"pid":N,"uid":N[,"cgroup":S]}`.
func appendOwner(b []byte, pid, uid int, cgroup string) []byte {
	b = append(b, `{"pid":`...)
	b = jsonfast.AppendInt(b, int64(pid))
	b = append(b, `,"uid":`...)
	b = jsonfast.AppendInt(b, int64(uid))
	if cgroup != "" {
		b = append(b, `,"cgroup":`...)
		b = jsonfast.AppendString(b, cgroup)
	}
	return append(b, '}')
}

// appendJSON appends v and a newline as json.Encoder writes them with HTML
// escaping off.
func appendJSON(b []byte, v any) ([]byte, error) {
	w := bytes.NewBuffer(b)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return w.Bytes(), nil
}

// lineDecoder decodes journal lines. A query of an hour under a kernel flood
// decodes tens of thousands of lines, so the shape appendLine writes for a
// record, with its subject or none, is read by hand, and anything else (a
// gap, a line from another writer) goes through encoding/json, which the
// fast path must agree with (FuzzJournalLine). Texts without escapes are
// substrings of the line.
type lineDecoder struct {
	boot string // the last boot id read: every record of a boot shares one string
	// rec is the record's JSON in the last line decoded, as
	// api.Record.AppendJSON writes it ("" when the line took the slow
	// path): an answer copies it instead of encoding the record again.
	rec string
	// noSubject: a line's subject is skipped, not read (Entry.Subject
	// stays empty); the rest of the line is read as ever.
	noSubject bool
	// trusted: the lines are the journal's own (a segment it wrote, or
	// read through at Open with every line the fast path's): the record's
	// strings are not checked again for what appendLine never writes
	// (api.ScanRecordSpans). A line failing any other check still goes to
	// encoding/json.
	trusted bool
	// spans are where the fields of rec are, when rec is not "".
	spans api.RecordSpans
	// bootRaw is boot's JSON text between its quotes: a line whose boot
	// is the same text is the same boot, without reading it again.
	bootRaw string
	// hour is the "2006-01-02T15" of the last UTC wall read, and hourAt
	// that hour's start: a flood's walls share a few hours, and making a
	// Time from its fields was a good part of reading one.
	hour   string
	hourAt time.Time
	// arena holds the records' texts that have escapes, unescaped: one
	// allocation for many (its chunks are never written again, so an
	// Entry that Query hands out may keep its strings).
	arena api.StrArena
}

var errLine = errors.New("journal: malformed line")

// decode fills e from line (without its '\n').
func (d *lineDecoder) decode(line string, e *Entry) error {
	if d.fast(line, e) {
		return nil
	}
	*e = Entry{}
	d.rec = ""
	if err := json.Unmarshal([]byte(line), e); err != nil {
		return err
	}
	return nil
}

// fast reads `{"boot":S,"wall":S,"rec":{"seq":N,"mono_ns":N,"level":N,
// "facility":N,"text":S[,"dict":S]}[,"subject":{...}]}` exactly, the subject
// as encoding/json writes it (no empty list, no field out of order); false
// for anything else.
func (d *lineDecoder) fast(line string, e *Entry) bool {
	p := parser{Scanner: jsonfast.Scanner{S: line}}
	if !p.Lit(`{"boot":`) {
		return false
	}
	var boot string
	bootAt := p.I + 1
	if n := len(d.bootRaw); n > 0 && len(line) > bootAt+n && line[p.I] == '"' && line[bootAt+n] == '"' && line[bootAt:bootAt+n] == d.bootRaw {
		// The text Str read into d.boot, up to the same closing quote.
		boot, p.I = d.boot, bootAt+n+1
	} else {
		var ok bool
		if boot, ok = p.Str(); !ok {
			return false
		}
	}
	bootEnd := p.I - 1
	if !p.Lit(`,"wall":`) {
		return false
	}
	wall, ok := p.RawStr()
	if !ok || !p.Lit(`,"rec":`) {
		return false
	}
	var r Entry
	// The lists of e's last subject are filled again: a scan that reuses
	// one Entry for every line (ScanNewest) allocates no subject's lists
	// after its first; a fresh Entry has none to give.
	r.Subject.Procs, r.Subject.Devices = e.Subject.Procs[:0], e.Subject.Devices[:0]
	if r.Wall, ok = d.wall(wall); !ok {
		return false
	}
	recStart := p.I
	if !api.ScanRecordSpans(&p.Scanner, &r.Rec, d.trusted, &d.spans, &d.arena) {
		return false
	}
	rec := line[recStart:p.I]
	if p.Lit(`,"subject":{`) {
		if d.noSubject {
			// The subject is the line's last field: it ends where the
			// line's object does.
			if !strings.HasSuffix(line[p.I:], "}}") {
				return false
			}
			p.I = len(line) - 1
		} else if !p.subject(&r.Subject) || !p.Lit(`}`) {
			return false
		}
	}
	if !p.Lit(`}`) || !p.Done() {
		return false
	}
	if len(r.Subject.Procs) == 0 {
		r.Subject.Procs = nil
	}
	if len(r.Subject.Devices) == 0 {
		r.Subject.Devices = nil
	}
	if boot != d.boot {
		d.boot = string([]byte(boot)) // its own copy: the line's memory is not kept for it
		d.bootRaw = string([]byte(line[bootAt:bootEnd]))
	}
	r.Boot = d.boot
	*e = r
	d.rec = rec
	return true
}

// subject reads a Subject's fields, after its '{' and up to its '}'.
func (p *parser) subject(s *Subject) bool {
	n := 0
	field := func(key string) bool { // key: `"name":`
		if n > 0 && !p.Lit(`,`) {
			return false
		}
		if p.Lit(key) {
			n++
			return true
		}
		if n > 0 {
			p.I-- // the comma belongs to no field here
		}
		return false
	}
	if field(`"procs":`) {
		ok := p.List(func() bool {
			var pr Proc
			if !p.owner(&pr.Pid, &pr.UID, &pr.Cgroup) {
				return false
			}
			s.Procs = append(s.Procs, pr)
			return true
		})
		if !ok {
			return false
		}
	}
	if field(`"devices":`) {
		ok := p.List(func() bool {
			var d Device
			var ok bool
			if !p.Lit(`{"bdf":`) {
				return false
			}
			if d.BDF, ok = p.Str(); !ok {
				return false
			}
			if p.Lit(`,"holders":`) {
				ok := p.List(func() bool {
					var h Holder
					if !p.owner(&h.Pid, &h.UID, &h.Cgroup) {
						return false
					}
					d.Holders = append(d.Holders, h)
					return true
				})
				if !ok {
					return false
				}
			}
			if p.Lit(`,"nodes":`) {
				ok := p.List(func() bool {
					n, ok := p.Str()
					d.Nodes = append(d.Nodes, n)
					return ok
				})
				if !ok {
					return false
				}
			}
			if !p.Lit(`}`) {
				return false
			}
			s.Devices = append(s.Devices, d)
			return true
		})
		if !ok {
			return false
		}
	}
	if field(`"inherited":`) {
		if !p.Lit(`true`) {
			return false
		}
		s.Inherited = true
	}
	return n > 0
}

// ParseSubject reads a Subject's JSON as the journal writes it (what
// ScanNewest's skip is given); false for anything else. s's lists are
// filled again (a list it had, empty, stays empty rather than nil): a
// query judging thousands of subjects makes them once.
func ParseSubject(text string, s *Subject) bool {
	p := parser{Scanner: jsonfast.Scanner{S: text}}
	*s = Subject{Procs: s.Procs[:0], Devices: s.Devices[:0]}
	return p.Lit(`{`) && p.subject(s) && p.Lit(`}`) && p.Done()
}

// lineSubject finds a line's boot id and its subject's JSON without
// reading the record between them: the record's numbers and strings are
// stepped over, a string by its closing quote (IndexByte) and the
// backslashes before it. A line that does not have the shape the journal
// writes, or names no one, is left to the decoder.
func lineSubject(line string) (boot, subject string, ok bool) {
	// A subject's last field is a list or `true`; a line without one ends
	// with its record's last string: most of a flood's lines are let go
	// here.
	if !strings.HasSuffix(line, "]}}") && !strings.HasSuffix(line, "true}}") {
		return "", "", false
	}
	p := jsonfast.Scanner{S: line}
	if !p.Lit(`{"boot":`) {
		return "", "", false
	}
	if boot, ok = p.RawStr(); !ok || !plainText(boot) || !p.Lit(`,"wall":`) || !skipStr(&p) {
		return "", "", false
	}
	for _, key := range [...]string{`,"rec":{"seq":`, `,"mono_ns":`, `,"level":`, `,"facility":`} {
		if !p.Lit(key) {
			return "", "", false
		}
		p.Lit("-")
		j := p.I
		for j < len(line) && line[j] >= '0' && line[j] <= '9' {
			j++
		}
		if j == p.I {
			return "", "", false
		}
		p.I = j
	}
	if !p.Lit(`,"text":`) || !skipStr(&p) {
		return "", "", false
	}
	if p.Lit(`,"dict":`) && !skipStr(&p) {
		return "", "", false
	}
	if !p.Lit(`},"subject":`) {
		return "", "", false
	}
	return boot, line[p.I : len(line)-1], true
}

// lineSubjectTrusted is lineSubject for a line of a trusted segment
// (appendLine's, or one the validating reader took at Open): in JSON of the
// journal's shape no string holds an unescaped quote, so the one
// `},"subject":` of the line is the subject's key, found by one search
// instead of by stepping over the record's fields (most of judging a
// withheld line).
func lineSubjectTrusted(line string) (boot, subject string, ok bool) {
	if !strings.HasSuffix(line, "]}}") && !strings.HasSuffix(line, "true}}") {
		return "", "", false
	}
	p := jsonfast.Scanner{S: line}
	if !p.Lit(`{"boot":`) {
		return "", "", false
	}
	if boot, ok = p.RawStr(); !ok || !plainText(boot) {
		return "", "", false
	}
	const key = `},"subject":`
	i := strings.Index(line[p.I:], key)
	if i < 0 {
		return "", "", false
	}
	i += p.I
	return boot, line[i+len(key) : len(line)-1], true
}

// plainText reports whether a JSON string's raw text s is the string it
// reads as: no backslash, no control character, valid UTF-8 (a boot id
// always is). A boot with an escape or invalid UTF-8, read raw, would not
// be the boot the decoder reads (FuzzJournalLine found one). Eight bytes
// at a time, as the boot is looked at on every line a user's query
// judges; in each mask a byte is flagged only where it, or a byte below
// it, matches.
func plainText(s string) bool {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	var any uint64 // the bytes' high bits: UTF-8 to check
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		b := w ^ ('\\' * ones)
		if ((w-0x20*ones)&^w|(b-ones)&^b)&high != 0 {
			return false
		}
		any |= w
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '\\' {
			return false
		}
		any |= uint64(c)
	}
	return any&high == 0 || utf8.ValidString(s)
}

// skipStr steps over a JSON string without reading it: its end is the
// first '"' after an even number of backslashes.
func skipStr(p *jsonfast.Scanner) bool {
	if p.I >= len(p.S) || p.S[p.I] != '"' {
		return false
	}
	i := p.I + 1
	for {
		q := strings.IndexByte(p.S[i:], '"')
		if q < 0 {
			return false
		}
		i += q
		n := 0
		for n < i && p.S[i-1-n] == '\\' {
			n++
		}
		i++
		if n%2 == 0 {
			p.I = i
			return true
		}
	}
}

// owner reads `{"pid":N,"uid":N[,"cgroup":S]}`: a Proc or a Holder.
func (p *parser) owner(pid, uid *int, cgroup *string) bool {
	if !p.Lit(`{"pid":`) {
		return false
	}
	v, ok := p.Int()
	if !ok || v != int64(int(v)) || !p.Lit(`,"uid":`) {
		return false
	}
	*pid = int(v)
	if v, ok = p.Int(); !ok || v != int64(int(v)) {
		return false
	}
	*uid = int(v)
	if p.Lit(`,"cgroup":`) {
		if *cgroup, ok = p.Str(); !ok {
			return false
		}
	}
	return p.Lit(`}`)
}

// parser is the journal's reader of a Subject on jsonfast's Scanner.
type parser struct{ jsonfast.Scanner }

// wallOf reads just the "wall" of a line, for deciding whether a line of a
// block at the window's edge needs decoding at all.
func wallOf(line string) (time.Time, bool) {
	p := jsonfast.Scanner{S: line}
	if !p.Lit(`{"boot":`) {
		return time.Time{}, false
	}
	if _, ok := p.RawStr(); !ok || !p.Lit(`,"wall":`) {
		return time.Time{}, false
	}
	w, ok := p.RawStr()
	if !ok {
		return time.Time{}, false
	}
	return parseWall(w)
}

// parseWall reads a line's wall time. The form AppendTime writes for a UTC
// time ("2026-03-01T12:00:00.123456789Z", a fraction of one to nine digits
// or none) is read by hand, which every line of a query costs; any other
// (an offset, a leap second) goes to time's own reader, which the hand
// reading agrees with (FuzzParseWall).
func parseWall(s string) (time.Time, bool) {
	if t, ok := parseUTCWall(s); ok {
		return t, true
	}
	var t time.Time
	if t.UnmarshalText([]byte(s)) != nil {
		return time.Time{}, false
	}
	return t, true
}

// wall is parseWall, making the Time of a wall in the hour of the one
// before from that hour's start: the same instant, in UTC as time.Date
// makes it.
func (d *lineDecoder) wall(s string) (time.Time, bool) {
	if len(s) >= 20 && d.hour != "" && s[:13] == d.hour {
		if t, ok := parseUTCWallIn(s, d.hourAt); ok {
			return t, true
		}
	}
	t, ok := parseWall(s)
	if ok && t.Location() == time.UTC && len(s) >= 20 && s[len(s)-1] == 'Z' && t.Year() >= 1 {
		d.hour = string([]byte(s[:13]))
		y, m, day := t.Date()
		d.hourAt = time.Date(y, m, day, t.Hour(), 0, 0, 0, time.UTC)
	}
	return t, ok
}

func parseUTCWall(s string) (time.Time, bool) { return parseUTCWallIn(s, time.Time{}) }

// parseUTCWallIn is parseUTCWall; a non-zero hourAt is the start of the
// hour s[:13] names (its fields checked when it was read).
func parseUTCWallIn(s string, hourAt time.Time) (time.Time, bool) {
	if len(s) < 20 || s[len(s)-1] != 'Z' || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	ok := true
	num := func(a, b int) int {
		v := 0
		for _, c := range []byte(s[a:b]) {
			if c < '0' || c > '9' {
				ok = false
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	var year, month, day, hour int
	if hourAt.IsZero() {
		year, month, day, hour = num(0, 4), num(5, 7), num(8, 10), num(11, 13)
	}
	minute, sec := num(14, 16), num(17, 19)
	ns := 0
	if frac := s[19 : len(s)-1]; frac != "" {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		ns = num(20, len(s)-1)
		for range 10 - len(frac) {
			ns *= 10
		}
	}
	if !ok || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	if !hourAt.IsZero() {
		return hourAt.Add(time.Duration(minute)*time.Minute + time.Duration(sec)*time.Second + time.Duration(ns)), true
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, ns, time.UTC), true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
