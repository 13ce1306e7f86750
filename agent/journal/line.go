package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// encodeLine appends e as one JSON line. HTML escaping is off: kernel text
// is full of "->" and "<...>", and each \u003e costs the reader a slow path.
func encodeLine(buf *bytes.Buffer, e *Entry) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(e) // Encode ends the value with '\n'
}

// lineDecoder decodes journal lines. A query of an hour under a kernel flood
// decodes tens of thousands of lines, so the shape encodeLine writes for a
// record, with its subject or none, is read by hand, and anything else (a
// gap, a line from another writer) goes through encoding/json, which the
// fast path must agree with (FuzzJournalLine).
type lineDecoder struct {
	boot string // the last boot id read: every record of a boot shares one string
}

var errLine = errors.New("journal: malformed line")

// decode fills e from line (without its '\n').
func (d *lineDecoder) decode(line []byte, e *Entry) error {
	if d.fast(line, e) {
		return nil
	}
	*e = Entry{}
	if err := json.Unmarshal(line, e); err != nil {
		return err
	}
	return nil
}

// fast reads `{"boot":S,"wall":S,"rec":{"seq":N,"mono_ns":N,"level":N,
// "facility":N,"text":S[,"dict":S]}[,"subject":{...}]}` exactly, the subject
// as encodeLine writes it (no empty list, no field out of order); false for
// anything else.
func (d *lineDecoder) fast(line []byte, e *Entry) bool {
	p := parser{b: line}
	if !p.lit(`{"boot":`) {
		return false
	}
	boot, ok := p.strBytes()
	if !ok || !p.lit(`,"wall":`) {
		return false
	}
	wall, ok := p.rawStr()
	if !ok || !p.lit(`,"rec":{"seq":`) {
		return false
	}
	var r Entry
	if r.Wall.UnmarshalText(wall) != nil {
		return false
	}
	seq, ok := p.uint(1<<64 - 1)
	if !ok || !p.lit(`,"mono_ns":`) {
		return false
	}
	mono, ok := p.int()
	if !ok || !p.lit(`,"level":`) {
		return false
	}
	level, ok := p.uint(255)
	if !ok || !p.lit(`,"facility":`) {
		return false
	}
	fac, ok := p.uint(255)
	if !ok || !p.lit(`,"text":`) {
		return false
	}
	text, ok := p.str()
	if !ok {
		return false
	}
	var dict string
	if p.lit(`,"dict":`) {
		if dict, ok = p.str(); !ok {
			return false
		}
	}
	if !p.lit(`}`) {
		return false
	}
	if p.lit(`,"subject":{`) {
		if !p.subject(&r.Subject) || !p.lit(`}`) {
			return false
		}
	}
	if !p.lit(`}`) || p.i != len(p.b) {
		return false
	}
	if string(boot) != d.boot {
		d.boot = string(boot)
	}
	r.Boot = d.boot
	r.Rec.Seq, r.Rec.Mono = seq, time.Duration(mono)
	r.Rec.Level, r.Rec.Facility = uint8(level), uint8(fac)
	r.Rec.Text, r.Rec.Dict = text, dict
	*e = r
	return true
}

// subject reads a Subject's fields, after its '{' and up to its '}'.
func (p *parser) subject(s *Subject) bool {
	n := 0
	field := func(name string) bool {
		if n > 0 && !p.lit(`,`) {
			return false
		}
		if p.lit(`"` + name + `":`) {
			n++
			return true
		}
		if n > 0 {
			p.i-- // the comma belongs to no field here
		}
		return false
	}
	if field("procs") {
		ok := p.list(func() bool {
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
	if field("devices") {
		ok := p.list(func() bool {
			var d Device
			var ok bool
			if !p.lit(`{"bdf":`) {
				return false
			}
			if d.BDF, ok = p.str(); !ok {
				return false
			}
			if p.lit(`,"holders":`) {
				ok := p.list(func() bool {
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
			if !p.lit(`}`) {
				return false
			}
			s.Devices = append(s.Devices, d)
			return true
		})
		if !ok {
			return false
		}
	}
	if field("inherited") {
		if !p.lit(`true`) {
			return false
		}
		s.Inherited = true
	}
	return n > 0
}

// list reads a non-empty JSON array whose items item reads.
func (p *parser) list(item func() bool) bool {
	if !p.lit(`[`) {
		return false
	}
	for {
		if !item() {
			return false
		}
		if p.lit(`]`) {
			return true
		}
		if !p.lit(`,`) {
			return false
		}
	}
}

// owner reads `{"pid":N,"uid":N[,"cgroup":S]}`: a Proc or a Holder.
func (p *parser) owner(pid, uid *int, cgroup *string) bool {
	if !p.lit(`{"pid":`) {
		return false
	}
	v, ok := p.int()
	if !ok || v != int64(int(v)) || !p.lit(`,"uid":`) {
		return false
	}
	*pid = int(v)
	if v, ok = p.int(); !ok || v != int64(int(v)) {
		return false
	}
	*uid = int(v)
	if p.lit(`,"cgroup":`) {
		if *cgroup, ok = p.str(); !ok {
			return false
		}
	}
	return p.lit(`}`)
}

type parser struct {
	b   []byte
	i   int
	tmp []byte
}

func (p *parser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// rawStr returns a string's bytes when it holds no escape.
func (p *parser) rawStr() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[p.i+1 : j]
			p.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// str returns a string's value, unescaped. It gives up (false) where
// encoding/json would replace or reject something: invalid UTF-8, a raw
// control character, a lone surrogate.
func (p *parser) str() (string, bool) {
	b, ok := p.strBytes()
	return string(b), ok
}

func (p *parser) strBytes() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	j := start
	for j < len(p.b) && p.b[j] != '"' && p.b[j] != '\\' && p.b[j] >= 0x20 {
		j++
	}
	if j < len(p.b) && p.b[j] == '"' {
		s := p.b[start:j]
		if !utf8.Valid(s) {
			return nil, false
		}
		p.i = j + 1
		return s, true
	}
	out := append(p.tmp[:0], p.b[start:j]...)
	for j < len(p.b) {
		c := p.b[j]
		switch {
		case c == '"':
			p.tmp = out
			if !utf8.Valid(out) {
				return nil, false
			}
			p.i = j + 1
			return out, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(p.b) {
			return nil, false
		}
		switch p.b[j+1] {
		case '"', '\\', '/':
			out = append(out, p.b[j+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(p.b, j+2)
			if !ok {
				return nil, false
			}
			j += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if j+1 < len(p.b) && p.b[j] == '\\' && p.b[j+1] == 'u' {
					r2, ok = hex4(p.b, j+2)
				}
				dec := utf16.DecodeRune(r, r2)
				if !ok || dec == utf8.RuneError {
					return nil, false // json makes a lone surrogate U+FFFD
				}
				r = dec
				j += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, false
		}
		j += 2
	}
	return nil, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// uint reads a JSON integer in [0, limit]; no leading zeros, as JSON says.
func (p *parser) uint(limit uint64) (uint64, bool) {
	start := p.i
	var v uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		d := uint64(p.b[p.i] - '0')
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
		p.i++
	}
	n := p.i - start
	if n == 0 || n > 1 && p.b[start] == '0' {
		return 0, false
	}
	return v, true
}

func (p *parser) int() (int64, bool) {
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	v, ok := p.uint(1<<63 - 1)
	if !ok {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// wallOf reads just the "wall" of a line, for deciding whether a line of a
// block at the window's edge needs decoding at all.
func wallOf(line []byte) (time.Time, bool) {
	p := parser{b: line}
	if !p.lit(`{"boot":`) {
		return time.Time{}, false
	}
	if _, ok := p.rawStr(); !ok || !p.lit(`,"wall":`) {
		return time.Time{}, false
	}
	w, ok := p.rawStr()
	if !ok {
		return time.Time{}, false
	}
	var t time.Time
	if t.UnmarshalText(w) != nil {
		return time.Time{}, false
	}
	return t, true
}
