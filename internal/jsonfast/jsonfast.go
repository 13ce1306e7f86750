// Package jsonfast reads and writes the few fixed JSON shapes that the node
// agent moves in bulk (journal lines, the records of an answer) by hand:
// encoding/json's reflection and its validity scan were most of what an
// hour's query under a kernel flood cost. A reader built on Scanner takes
// the exact shape its writer writes and gives up (false) on anything else,
// for encoding/json to read; its fuzz test holds the two to the same
// result.
package jsonfast

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Scanner reads JSON text from S, at I. Strings without escapes are handed
// out as substrings of S: no allocation, and they keep S alive.
type Scanner struct {
	S   string
	I   int
	tmp []byte
}

// Lit consumes lit if S continues with it.
func (p *Scanner) Lit(lit string) bool {
	if len(p.S)-p.I < len(lit) || p.S[p.I:p.I+len(lit)] != lit {
		return false
	}
	p.I += len(lit)
	return true
}

// Done reports whether all of S was read.
func (p *Scanner) Done() bool { return p.I == len(p.S) }

// RawStr returns a string's text when it holds no escape and no control
// character (a time, an id).
func (p *Scanner) RawStr() (string, bool) {
	if p.I >= len(p.S) || p.S[p.I] != '"' {
		return "", false
	}
	for j := p.I + 1; j < len(p.S); j++ {
		switch c := p.S[j]; {
		case c == '"':
			s := p.S[p.I+1 : j]
			p.I = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// Str returns a string's value, unescaped. It gives up where encoding/json
// would replace or reject something: invalid UTF-8, a raw control
// character, a lone surrogate.
func (p *Scanner) Str() (string, bool) {
	if p.I >= len(p.S) || p.S[p.I] != '"' {
		return "", false
	}
	start := p.I + 1
	// Most strings (a kernel line) are printable ASCII without escapes:
	// their closing quote is found by IndexByte and their bytes checked
	// eight at a time, instead of one compare chain a byte.
	if q := strings.IndexByte(p.S[start:], '"'); q >= 0 {
		if s := p.S[start : start+q]; plainASCII(s) {
			p.I = start + q + 1
			return s, true
		}
	}
	j := start
	ascii := true
	for j < len(p.S) && p.S[j] != '"' && p.S[j] != '\\' && p.S[j] >= 0x20 {
		ascii = ascii && p.S[j] < utf8.RuneSelf
		j++
	}
	if j < len(p.S) && p.S[j] == '"' {
		s := p.S[start:j]
		if !ascii && !utf8.ValidString(s) {
			return "", false
		}
		p.I = j + 1
		return s, true
	}
	out := append(p.tmp[:0], p.S[start:j]...)
	for j < len(p.S) {
		c := p.S[j]
		switch {
		case c == '"':
			p.tmp = out
			if !utf8.Valid(out) {
				return "", false
			}
			p.I = j + 1
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(p.S) {
			return "", false
		}
		var ok bool
		if out, j, ok = AppendEscape(out, p.S, j); !ok {
			return "", false
		}
	}
	return "", false
}

// AppendEscape appends the value of the escape that starts at s[j] (a
// backslash, with a byte after it) to out and returns where the string goes
// on after it. ok is false where encoding/json would reject the escape or
// replace what it makes: an unknown escape, bad hex digits, a lone
// surrogate (json makes it U+FFFD).
func AppendEscape(out []byte, s string, j int) (_ []byte, next int, ok bool) {
	switch s[j+1] {
	case '"', '\\', '/':
		return append(out, s[j+1]), j + 2, true
	case 'b':
		return append(out, '\b'), j + 2, true
	case 'f':
		return append(out, '\f'), j + 2, true
	case 'n':
		return append(out, '\n'), j + 2, true
	case 'r':
		return append(out, '\r'), j + 2, true
	case 't':
		return append(out, '\t'), j + 2, true
	case 'u':
		r, ok := hex4(s, j+2)
		if !ok {
			return out, j, false
		}
		j += 6
		if utf16.IsSurrogate(r) {
			r2, ok := rune(0), false
			if j+1 < len(s) && s[j] == '\\' && s[j+1] == 'u' {
				r2, ok = hex4(s, j+2)
			}
			dec := utf16.DecodeRune(r, r2)
			if !ok || dec == utf8.RuneError {
				return out, j, false
			}
			r = dec
			j += 6
		}
		return utf8.AppendRune(out, r), j, true
	}
	return out, j, false
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for k := i; k < i+4; k++ {
		switch c := s[k]; {
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

// Uint reads a JSON integer in [0, limit]; no leading zeros, as JSON says.
func (p *Scanner) Uint(limit uint64) (uint64, bool) {
	start := p.I
	var v uint64
	// Nineteen digits cannot overflow a uint64: they are read without the
	// division the check of each further digit takes (every line of the
	// journal holds a few dozen digits).
	for p.I < len(p.S) && p.I-start < 19 && p.S[p.I] >= '0' && p.S[p.I] <= '9' {
		v = v*10 + uint64(p.S[p.I]-'0')
		p.I++
	}
	if v > limit {
		return 0, false
	}
	for p.I < len(p.S) && p.S[p.I] >= '0' && p.S[p.I] <= '9' {
		d := uint64(p.S[p.I] - '0')
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
		p.I++
	}
	n := p.I - start
	if n == 0 || n > 1 && p.S[start] == '0' {
		return 0, false
	}
	return v, true
}

// Int reads a JSON integer that fits an int64.
func (p *Scanner) Int() (int64, bool) {
	neg := p.I < len(p.S) && p.S[p.I] == '-'
	if neg {
		p.I++
	}
	v, ok := p.Uint(1<<63 - 1)
	if !ok {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// List reads a non-empty JSON array whose items item reads.
func (p *Scanner) List(item func() bool) bool {
	if !p.Lit(`[`) {
		return false
	}
	for {
		if !item() {
			return false
		}
		if p.Lit(`]`) {
			return true
		}
		if !p.Lit(`,`) {
			return false
		}
	}
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string exactly as encoding/json writes
// it with HTML escaping off (json.Encoder.SetEscapeHTML(false)): invalid
// UTF-8 becomes \ufffd, U+2028 and U+2029 are escaped.
func AppendString(b []byte, s string) []byte {
	if plainASCII(s) && strings.IndexByte(s, '"') < 0 {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendInt and AppendUint write JSON integers.
func AppendInt(b []byte, v int64) []byte   { return strconv.AppendInt(b, v, 10) }
func AppendUint(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 10) }

// plainASCII reports whether s holds only bytes 0x20-0x7f other than '\\':
// text a JSON string holds as it is.
func plainASCII(s string) bool {
	return PrintableASCII(s) && strings.IndexByte(s, '\\') < 0
}

// PrintableASCII reports whether s holds only bytes 0x20-0x7f, eight at a
// time: a byte below 0x20 borrows into its high bit when 0x20 is taken from
// it, a byte from 0x80 has it set already (a borrow reaches a higher byte
// only from a byte that is itself reported).
func PrintableASCII(s string) bool {
	const lo, hi = 0x2020202020202020, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if ((w-lo)|w)&hi != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
