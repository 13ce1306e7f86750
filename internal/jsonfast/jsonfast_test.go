package jsonfast

import (
	"bytes"
	"encoding/json"
	"testing"
)

// AppendString writes what encoding/json writes with HTML escaping off,
// and Str reads back what encoding/json reads, or gives up.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "<->&", "tab\there\nnew \"q\" \\ ", "\x00\x1f\x7f", "ünï 🚀", "\u2028\u2029", "bad \xff\xfe utf-8", "\xed\xa0\x80"} {
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
	})
}
