// Package visible makes text from a bundle, a server or a child safe to
// print on a terminal: control characters are shown as escapes, never
// interpreted (no OSC 52 clipboard writes, no screen clears, no title
// changes, no 8-bit CSI). Newlines and tabs stay.
package visible

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// needs reports whether r must be shown escaped: C0 controls but \n and \t,
// DEL, C1 controls (U+0080-U+009F, U+009B is an 8-bit CSI), and the
// bidirectional overrides that reorder what a reader sees.
func needs(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// Bytes returns b with control characters and invalid UTF-8 written as
// \xNN / \uNNNN escapes. b is returned as is when there is nothing to escape.
func Bytes(b []byte) []byte {
	clean := true
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 || needs(r) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b) + 16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&out, `\x%02x`, b[i])
		case r < 0x80 && needs(r):
			fmt.Fprintf(&out, `\x%02x`, r)
		case needs(r):
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			out.Write(b[i : i+n])
		}
		i += n
	}
	return out.Bytes()
}

// String is Bytes for strings.
func String(s string) string { return string(Bytes([]byte(s))) }

// Line is String with newlines and tabs escaped too: one value on one line
// (a hostname, a verdict, a termination message).
func Line(s string) string {
	s = String(s)
	if bytes.ContainsAny([]byte(s), "\n\t") {
		s = string(bytes.ReplaceAll(bytes.ReplaceAll([]byte(s), []byte("\n"), []byte(`\n`)), []byte("\t"), []byte(`\t`)))
	}
	return s
}

// JSON escapes in encoded JSON what encoding/json leaves raw: DEL, C1
// controls and bidi overrides become \uNNNN, which decode to the same string.
func JSON(b []byte) []byte {
	var out bytes.Buffer
	last := 0
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != '\n' && r != '\t' && needs(r) && r >= 0x7f {
			out.Write(b[last:i])
			fmt.Fprintf(&out, `\u%04x`, r)
			last = i + n
		}
		i += n
	}
	if last == 0 {
		return b
	}
	out.Write(b[last:])
	return out.Bytes()
}
