package redact

import (
	"unicode/utf8"
)

// A secret may reach a file encoded by the program that printed it, not
// only raw: Python's json.dumps writes "w\u00f6rd" (surrogate pairs past
// the BMP), urllib writes "w%C3%B6rd" or "a+b", a bytes repr writes
// b'w\xc3\xb6rd', ascii() writes 'w\xf6rd', and any of these may be
// escaped once more inside JSON ("b'w\\xc3\\xb6rd'"). Rather than list
// every encoder's choice of what to escape, each character of a secret is
// matched in any of these forms: whatever decodes back to the secret is the
// secret.

// maxSteps bounds the backtracking of one attempt (a secret of backslashes
// against a run of backslashes would otherwise branch at every character).
const maxSteps = 4096

// findEncoded appends the spans of secrets written in an encoding.
func findEncoded(b []byte, secrets []string, spans []span) []span {
	if len(secrets) == 0 {
		return spans
	}
	var starts [256]bool
	starts['%'], starts['\\'], starts['+'] = true, true, true
	for _, s := range secrets {
		starts[s[0]] = true
	}
	next := make([]int, len(secrets)) // where a secret may start again: after its last match
	for i := 0; i < len(b); i++ {
		if !starts[b[i]] {
			continue
		}
		for k, s := range secrets {
			if i < next[k] {
				continue
			}
			steps := 0
			if end := matchFrom(b, i, s, &steps); end > 0 {
				spans = append(spans, span{start: i, end: end})
				next[k] = end
			}
		}
	}
	return spans
}

// matchFrom returns where secret s ends when b[i:] spells it in some mix of
// encodings, or -1.
func matchFrom(b []byte, i int, s string, steps *int) int {
	if s == "" {
		return i
	}
	if *steps++; *steps > maxSteps {
		return -1
	}
	r, size := utf8.DecodeRuneInString(s)
	unit, rest := s[:size], s[size:]
	if r == utf8.RuneError && size == 1 {
		r = -1 // a byte that is not UTF-8: matched as a byte only
	}
	try := func(end int) int {
		if end < 0 {
			return -1
		}
		return matchFrom(b, end, rest, steps)
	}
	// raw
	if len(b)-i >= size && string(b[i:i+size]) == unit {
		if end := try(i + size); end >= 0 {
			return end
		}
	}
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '+':
		if unit == " " {
			return try(i + 1)
		}
	case '%':
		return try(percentBytes(b, i, unit))
	case '\\':
		// one backslash, or two: the escape itself escaped inside JSON
		for _, intro := range []int{1, 2} {
			if intro == 2 && (i+1 >= len(b) || b[i+1] != '\\') {
				break
			}
			if end := try(escapedRune(b, i, intro, r)); end >= 0 {
				return end
			}
			if end := try(escapedBytes(b, i, intro, unit)); end >= 0 {
				return end
			}
		}
	}
	return -1
}

// percentBytes matches unit as %HH per byte, any case.
func percentBytes(b []byte, i int, unit string) int {
	for k := 0; k < len(unit); k++ {
		if i+3 > len(b) || b[i] != '%' {
			return -1
		}
		v, ok := hexVal(b[i+1 : i+3])
		if !ok || byte(v) != unit[k] {
			return -1
		}
		i += 3
	}
	return i
}

// escapedBytes matches unit as \xHH per byte (a bytes repr).
func escapedBytes(b []byte, i, intro int, unit string) int {
	for k := 0; k < len(unit); k++ {
		if !isIntro(b, i, intro) || i+intro+3 > len(b) || b[i+intro] != 'x' {
			return -1
		}
		v, ok := hexVal(b[i+intro+1 : i+intro+3])
		if !ok || byte(v) != unit[k] {
			return -1
		}
		i += intro + 3
	}
	return i
}

func isIntro(b []byte, i, intro int) bool {
	if i+intro > len(b) {
		return false
	}
	for k := range intro {
		if b[i+k] != '\\' {
			return false
		}
	}
	return true
}

// escapedRune matches r as one escape: \uHHHH (a surrogate pair past the
// BMP), \UHHHHHHHH, \xHH for a rune below 256 (a str repr), or a short
// escape (\n \" \\ ...).
func escapedRune(b []byte, i, intro int, r rune) int {
	if r < 0 || !isIntro(b, i, intro) || i+intro >= len(b) {
		return -1
	}
	j := i + intro
	hex := func(at, n int) (rune, bool) {
		if at+n > len(b) {
			return 0, false
		}
		return hexVal(b[at : at+n])
	}
	switch c := b[j]; c {
	case 'u':
		v, ok := hex(j+1, 4)
		if !ok {
			return -1
		}
		end := j + 5
		if v >= 0xd800 && v < 0xdc00 { // a high surrogate: its low half follows
			if !isIntro(b, end, intro) || end+intro >= len(b) || b[end+intro] != 'u' {
				return -1
			}
			lo, ok := hex(end+intro+1, 4)
			if !ok || lo < 0xdc00 || lo >= 0xe000 {
				return -1
			}
			v = 0x10000 + (v-0xd800)<<10 + (lo - 0xdc00)
			end += intro + 5
		}
		if v == r {
			return end
		}
	case 'U':
		if v, ok := hex(j+1, 8); ok && v == r {
			return j + 9
		}
	case 'x':
		if v, ok := hex(j+1, 2); ok && v == r {
			return j + 3
		}
	default:
		if c == '\\' && intro == 2 && r == '\\' && j+1 < len(b) && b[j+1] == '\\' {
			return j + 2 // \\\\: a backslash escaped twice
		}
		if short, ok := shortEscapes[c]; ok && short == r {
			return j + 1
		}
	}
	return -1
}

var shortEscapes = map[byte]rune{
	'"': '"', '\\': '\\', '/': '/', '\'': '\'', 'n': '\n', 't': '\t', 'r': '\r',
	'b': '\b', 'f': '\f', 'a': '\a', 'v': '\v', '0': 0,
}

func hexVal(h []byte) (rune, bool) {
	var v rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
