package visible

import (
	"encoding/json"
	"testing"
)

func TestEscapesControls(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain\ttext\n", "plain\ttext\n"},
		{"\x1b]52;c;ZXZpbA==\x07", `\x1b]52;c;ZXZpbA==\x07`},
		{"\x1b[2J\x1b]0;title\x07", `\x1b[2J\x1b]0;title\x07`},
		{"csi \u009b31m red", `csi \u009b31m red`},
		{"raw \x9b byte", `raw \x9b byte`},
		{"cr\rover", `cr\x0dover`},
		{"bidi \u202e evil", `bidi \u202e evil`},
		{"ünïcode ok", "ünïcode ok"},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Line("a\nb\tc\x1b"); got != `a\nb\tc\x1b` {
		t.Errorf("Line = %q", got)
	}
	enc, _ := json.Marshal("x\u009by\x7f\u202e")
	out := JSON(enc)
	var back string
	if err := json.Unmarshal(out, &back); err != nil || back != "x\u009by\x7f\u202e" || string(out) != `"x\u009by\u007f\u202e"` {
		t.Errorf("JSON = %s (%q, %v)", out, back, err)
	}
}
