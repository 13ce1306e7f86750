package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kcrash/kcrash/bundle"
)

// hostile is what a bundle's text may hold to act on a terminal that cats
// the page: an OSC title write ended by BEL, an 8-bit CSI, a bidi override.
const hostile = "\x1b]0;pwn\x07\u009b2J\u202eevil"

// withHostile appends hostile to every string of a JSON document but its
// timestamps (which must still parse for the row to be drawn).
func withHostile(t *testing.T, raw []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			if _, err := time.Parse(time.RFC3339Nano, x); err != nil {
				return x + hostile
			}
		}
		return x
	}
	out, err := json.Marshal(walk(v))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rawControl returns the first character a terminal would act on: a C0
// control but newline and tab, DEL, a C1 control, a bidi override.
func rawControl(b []byte) (rune, int) {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			return r, i
		}
		i += n
	}
	return 0, -1
}

// No text of a bundle reaches the page with a control character raw, in
// any cell: every file's every string carries one.
func TestPageHasNoRawControls(t *testing.T) {
	for _, fx := range fixtures {
		in := loadFixture(t, fx)
		for name, data := range in.files {
			switch {
			case name == "manifest.json":
			case strings.HasSuffix(name, ".json"):
				in.files[name] = withHostile(t, data)
			default:
				in.files[name] = append(append([]byte{}, data...), []byte("\n"+hostile+"\nerror: "+hostile+"\n")...)
			}
		}
		mj, _ := json.Marshal(in.Manifest)
		var m bundle.Manifest
		if err := json.Unmarshal(withHostile(t, mj), &m); err != nil {
			t.Fatal(err)
		}
		in.Manifest = m
		in.Name += hostile
		var buf bytes.Buffer
		if err := Write(&buf, in); err != nil {
			t.Fatal(err)
		}
		if r, at := rawControl(buf.Bytes()); at >= 0 {
			lo := max(at-200, 0)
			t.Errorf("%s: U+%04X raw in the page: %q", fx, r, buf.Bytes()[lo:min(at+40, buf.Len())])
		}
	}
}
