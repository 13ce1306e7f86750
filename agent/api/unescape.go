package api

import (
	"math/bits"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/kcrash/kcrash/internal/jsonfast"
)

// StrArena holds the unescaped text of strings with escapes. jsonfast's
// Scanner.Str allocates each such string on its own: a kernel line
// quoting something ("apparmor=\"DENIED\"") or a record's dict (its lines
// are joined by \n) is one allocation, thousands in a flood hour's
// answer. Here they are written one after another into chunks that are
// never written again, each string a view of its chunk.
// The zero StrArena is ready; a nil one allocates each string.
type StrArena struct{ buf []byte }

const arenaChunk = 64 << 10

// Rewind writes the next strings over the last chunk's: only for a reader
// that no longer holds a string the arena gave (the journal's ScanNewest,
// whose entries are good until its callback returns), so that a scan
// reads its quoting texts into one chunk instead of a new one each 64 KiB.
func (a *StrArena) Rewind() { a.buf = a.buf[:0] }

// str reads a JSON string as Scanner.Str does (FuzzArenaStr holds the
// two to the same), one with escapes into a.
func (a *StrArena) str(p *jsonfast.Scanner) (string, bool) {
	if a == nil {
		return p.Str()
	}
	s := p.S
	if p.I >= len(s) || s[p.I] != '"' {
		return "", false
	}
	start := p.I + 1
	q := strings.IndexByte(s[start:], '"')
	if q < 0 {
		return p.Str() // unterminated: Str says so
	}
	if v := s[start : start+q]; strings.IndexByte(v, '\\') < 0 {
		// What Str takes of a string without escapes: no control
		// character, valid UTF-8.
		if !jsonfast.PrintableASCII(v) {
			for i := 0; i < len(v); i++ {
				if v[i] < 0x20 {
					return "", false
				}
			}
			if !utf8.ValidString(v) {
				return "", false
			}
		}
		p.I = start + q + 1
		return v, true
	}
	// Unescaped into a as the escapes are read, up to the closing quote
	// (the first that no escape takes): the runs between the bytes that
	// stop a string's reading are found eight bytes at a time (stopAt) and
	// copied at once. Finding the closing quote first, then the escapes,
	// each with a call of IndexByte, cost a quoting kernel line
	// (apparmor="DENIED" operation="open" …) more than its reading.
	quote := -1
	at := len(a.buf)
	out := a.buf
	// room makes sure out has n bytes free, moving the string begun at
	// out[at:] into a new chunk where the last is full: a chunk's bytes
	// are never written again once handed out.
	room := func(n int) {
		if cap(out)-len(out) >= n {
			return
		}
		c := make([]byte, 0, max(arenaChunk, 2*(len(out)-at)+n))
		out, at = append(c, out[at:]...), 0
	}
	for j := start; ; {
		k := stopAt(s, j)
		if k > j {
			room(k - j)
			out = append(out, s[j:k]...)
			j = k
		}
		if j+1 >= len(s) {
			if j < len(s) && s[j] == '"' {
				quote = j
				break
			}
			return p.Str() // unterminated: Str says so
		}
		if c := s[j]; c == '"' {
			quote = j
			break
		} else if c < 0x20 {
			return "", false
		}
		room(utf8.UTFMax)
		var ok bool
		if out, j, ok = jsonfast.AppendEscape(out, s, j); !ok { // s[j] is a backslash
			return "", false
		}
	}
	v := out[at:]
	if !utf8.Valid(v) {
		return "", false
	}
	a.buf = out
	p.I = quote + 1
	if len(v) == 0 {
		return "", true
	}
	return unsafe.String(&v[0], len(v)), true
}

// stopAt is the index of the first byte from i of s that stops the
// reading of a string's text: a quote, a backslash or a control
// character; len(s) where none does. Eight bytes at a time: in each of
// the three masks the lowest byte flagged is the lowest that matches (a
// borrow goes up only from a byte that matches), so the lowest bit of
// the three together is the first byte that stops.
func stopAt(s string, i int) int {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		q, b := w^('"'*ones), w^('\\'*ones)
		if m := ((q-ones)&^q | (b-ones)&^b | (w-0x20*ones)&^w) & high; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return len(s)
}
