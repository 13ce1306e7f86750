package redact

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kcrash/kcrash/internal/testenv"
)

// Secrets as a Python program writes them: json.dumps (\u escapes for
// anything past ASCII, surrogate pairs past the BMP), urllib's quote and
// quote_plus, a bytes repr (\xNN), a str repr, and a repr inside JSON. Each
// must come out masked whole, its quotes and b prefix left around the mask.
func TestSecretsInPythonEncodings(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.Skip(t, "python3: %v", err)
	}
	secrets := []string{"wörd-Sécret€9", "p@ss w/rd&=+%x?#", "pa🔑ss-word", `it's"q\z-tab	nl`, "plain-ascii-secret"}
	const prog = `
import json, sys, urllib.parse
for s in sys.argv[1:]:
    b = s.encode()
    for name, enc in [
        ("json", json.dumps(s)),
        ("json-indent", json.dumps({"k": s}, indent=1).split("\n")[1].split(": ", 1)[1]),
        ("quote", urllib.parse.quote(s)),
        ("quote-safe", urllib.parse.quote(s, safe="")),
        ("quote_plus", urllib.parse.quote_plus(s)),
        ("urlencode", urllib.parse.urlencode({"k": s}).split("=", 1)[1]),
        ("bytes-repr", repr(b)),
        ("str-repr", repr(s)),
        ("ascii", ascii(s)),
        ("json-of-bytes-repr", json.dumps(repr(b))),
    ]:
        print(name + "\t" + enc)
`
	r := New(nil)
	for i, s := range secrets {
		r.Add("SECRET_" + string(rune('A'+i)) + "=" + s)
	}
	out, err := exec.Command(py, append([]string{"-c", prog}, secrets...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 10*len(secrets) {
		t.Fatalf("python wrote %d lines", len(lines))
	}
	wrappers := map[string]bool{"": true, `""`: true, "''": true, "b''": true, `b""`: true, `"b''"`: true, `"b\""`: true}
	for _, line := range lines {
		name, enc, _ := strings.Cut(line, "\t")
		got := r.String(enc)
		if !strings.Contains(got, Mask) || !wrappers[strings.Replace(got, Mask, "", 1)] {
			t.Errorf("%s: %s\n  masked to %s", name, enc, got)
		}
		if lines := r.Find([]byte(enc)); len(lines) != 1 {
			t.Errorf("%s: Find(%s) = %v", name, enc, lines)
		}
	}
	// what is around a secret stays, and text that only looks encoded is not masked
	for _, c := range []struct{ in, want string }{
		{`{"pw": "w\u00f6rd-S\u00e9cret\u20ac9", "user": "bob"}`, `{"pw": "[REDACTED]", "user": "bob"}`},
		{`GET /login?pw=p%40ss+w%2Frd%26%3D%2B%25x%3F%23&next=%2Fhome`, `GET /login?pw=[REDACTED]&next=%2Fhome`},
		{`w\u00f6rd-S\u00e9cret`, `w\u00f6rd-S\u00e9cret`},
		{`plain%2Dascii%2Dsecre`, `plain%2Dascii%2Dsecre`},
	} {
		if got := r.String(c.in); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	// a stream cut anywhere inside an encoded secret: the piece's last
	// MaxSecret bytes are held back for the next
	secret := `"pa\ud83d\udd11ss-word"`
	enc := []byte(strings.Repeat("x", MaxSecret+100) + secret + " tail" + strings.Repeat("y", MaxSecret))
	for cut := 2*MaxSecret + 95; cut < 2*MaxSecret+100+len(secret)+5; cut++ {
		o1, used := r.Chunk(enc[:cut], false)
		o2, _ := r.Chunk(enc[used:], true)
		if got := string(o1) + string(o2); !strings.Contains(got, `x"[REDACTED]" tail`) {
			t.Fatalf("cut at %d: %s", cut, bytes.Trim([]byte(got), "xy"))
		}
	}
}

// FuzzEncodedSecret: a secret written in any of the encodings (JSON \u,
// percent, \x per byte, each escape escaped again) is found and masked
// whole, inside any text.
//
//	go test ./internal/redact -run '^$' -fuzz FuzzEncodedSecret -fuzztime 30s
func FuzzEncodedSecret(f *testing.F) {
	f.Add("wörd-Sécret€9", "before ", " after", uint8(0))
	f.Add("pa🔑ss w/rd&=+%", `{"a": "`, `"}`, uint8(1))
	f.Add(`\\\\\\`, `x\`, `\y`, uint8(2))
	f.Fuzz(func(t *testing.T, secret, pre, post string, how uint8) {
		if len(secret) < minValue || len(secret) > 256 || !utf8.ValidString(secret) {
			return
		}
		r := New([]string{"FUZZ_TOKEN=" + secret})
		var enc strings.Builder
		for _, c := range secret {
			var one string
			switch how % 4 {
			case 0: // JSON, every rune escaped
				if c >= 0x10000 {
					hi, lo := utf16.EncodeRune(c)
					one = fmt.Sprintf(`\u%04x\u%04x`, hi, lo)
				} else {
					one = fmt.Sprintf(`\u%04X`, c)
				}
			case 1: // percent, every byte
				for _, b := range []byte(string(c)) {
					one += fmt.Sprintf("%%%02x", b)
				}
			case 2: // a bytes repr
				for _, b := range []byte(string(c)) {
					one += fmt.Sprintf(`\x%02x`, b)
				}
			case 3: // a bytes repr inside JSON
				for _, b := range []byte(string(c)) {
					one += fmt.Sprintf(`\\x%02x`, b)
				}
			}
			enc.WriteString(one)
		}
		text := pre + enc.String() + post
		got := r.String(text)
		if strings.Contains(got, enc.String()) || !strings.Contains(got, Mask) {
			t.Fatalf("how %d: %q\n  masked to %q", how%4, text, got)
		}
	})
}
