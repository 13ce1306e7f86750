package jsonfast

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// AppendString writes what encoding/json writes with HTML escaping off,
// and Str reads back what encoding/json reads, or gives up.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "<->&", "tab\there\nnew \"q\" \\ ", "\x00\x1f\x7f", "ünï 🚀", "\u2028\u2029", "bad \xff\xfe utf-8", "\xed\xa0\x80",
		"a kernel line, longer than eight bytes", "01234567\x01abc", "0123456789ab\x7f\x80", "01234567\\\"tail", "0123456789abcdef\\u00e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		got := AppendString(nil, s)
		if !bytes.Equal(append(got, '\n'), want.Bytes()) {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, want.Bytes())
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		p := Scanner{S: string(got)}
		if v, ok := p.Str(); !ok || v != back || !p.Done() {
			t.Fatalf("Str(%s) = %q %v, encoding/json %q", got, v, ok, back)
		}
		// s itself between quotes, as JSON text: what Str takes whole,
		// encoding/json reads the same.
		raw := Scanner{S: `"` + s + `"`}
		if v, ok := raw.Str(); ok && raw.Done() {
			var w string
			if err := json.Unmarshal([]byte(raw.S), &w); err != nil || w != v {
				t.Fatalf("Str(%s) = %q, encoding/json %q %v", raw.S, v, w, err)
			}
		}
	})
}

// Uint reads the digits JSON allows (no leading zero) up to limit, as
// strconv reads them.
func FuzzUint(f *testing.F) {
	for _, s := range []string{"0", "01", "255", "256", "9999999999999999999", "18446744073709551615", "18446744073709551616", "99999999999999999999", "1234567890123456789012", "7,", ""} {
		f.Add(s, uint64(1<<64-1))
		f.Add(s, uint64(255))
	}
	f.Fuzz(func(t *testing.T, s string, limit uint64) {
		digits := 0
		for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
			digits++
		}
		want, err := strconv.ParseUint(s[:digits], 10, 64)
		wantOK := digits > 0 && (digits == 1 || s[0] != '0') && err == nil && want <= limit
		p := Scanner{S: s}
		got, ok := p.Uint(limit)
		if ok != wantOK || ok && (got != want || p.I != digits) {
			t.Fatalf("Uint(%q, %d) = %d %v at %d; want %d %v", s, limit, got, ok, p.I, want, wantOK)
		}
	})
}
