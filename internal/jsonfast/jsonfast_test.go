package jsonfast

import (
	"bytes"
	"encoding/json"
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
