package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A secret holding & < > " is written by encoding/json as \u0026, \u003c, \";
// both the value-first JSON pass and the byte scan must catch it.
func TestJSONEscapedSecret(t *testing.T) {
	r := New([]string{"DB_PASSWORD=hunter&2<x>\"y"})
	enc, _ := json.Marshal(map[string]any{"command": []string{"sh", "hunter&2<x>\"y"}, "note": "pw hunter&2<x>\"y"})
	if bytes.Contains(r.Bytes(enc), []byte(`hunter\u00262`)) {
		t.Fatalf("byte scan left the escaped secret: %s", r.Bytes(enc))
	}
	if len(r.Find(enc)) == 0 {
		t.Fatal("Find does not see the JSON-escaped secret")
	}
	out, err := r.JSON(enc)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("hunter")) || !bytes.Contains(out, []byte(Mask)) {
		t.Fatalf("JSON left the secret: %s", out)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("JSON output is not JSON: %v\n%s", err, out)
	}
}

func TestURLPasswordFlagsHeadersShortValues(t *testing.T) {
	r := New([]string{"API_KEY=abc", "PATH=/usr/bin", "MY_TOKEN=tok"})
	for _, c := range []struct{ in, want string }{
		{"DATABASE_URL=https://admin:s3cr3t&x@db.example.com:5432/app", "DATABASE_URL=https://admin:[REDACTED]@db.example.com:5432/app"},
		{"connecting to postgres://u:pw@h/db failed", "connecting to postgres://u:[REDACTED]@h/db failed"},
		{"see https://example.com/a:b@c?x", "see https://example.com/a:b@c?x"},
		{"python serve.py --password hunter2 --port 80", "python serve.py --password [REDACTED] --port 80"},
		{"python serve.py --api-token=abc123 --hf-token 'xyz'", "python serve.py --api-token=[REDACTED] --hf-token '[REDACTED]'"},
		{"--tokenizer-path /models/q --max-tokens 100 --disable-auth --port 1", "--tokenizer-path /models/q --max-tokens 100 --disable-auth --port 1"},
		{"AUTHORIZATION: BEARER abcdefgh123", "AUTHORIZATION: BEARER [REDACTED]"},
		{"authorization: token abcdefgh123", "authorization: token [REDACTED]"},
		{`{"Authorization": "Bearer abcdefgh123", "PRIVATE-TOKEN": "glabcdefgh12"}`, `{"Authorization": "Bearer [REDACTED]", "PRIVATE-TOKEN": "[REDACTED]"}`},
		{"env: API_KEY=abc PATH=/usr/bin MY_TOKEN=\"tok\"", "env: API_KEY=[REDACTED] PATH=/usr/bin MY_TOKEN=\"[REDACTED]\""},
		{"abc stays abc, tok stays", "abc stays abc, tok stays"},
	} {
		if got := r.String(c.in); got != c.want {
			t.Errorf("%q:\n got %q\nwant %q", c.in, got, c.want)
		}
		// what is masked is not found again (a bundle read back is clean)
		if got := r.String(c.in); len(r.Find([]byte(got))) != 0 {
			t.Errorf("%q: masked text still Finds %v", got, r.Find([]byte(got)))
		}
	}
	if got := r.Args([]string{"srv", "--password", "pw", "--token", "--x", "--tokenizer", "t"}); strings.Join(got, " ") != "srv --password [REDACTED] --token --x --tokenizer t" {
		t.Errorf("Args = %q", got)
	}
	out, _ := r.JSON([]byte(`{"cmdline":["srv","--password","pw1","--port","80"]}`))
	if bytes.Contains(out, []byte("pw1")) {
		t.Errorf("JSON argv: %s", out)
	}
	// an environment listing in JSON: a secret-named variable's value, however short
	out, _ = r.JSON([]byte(`{"environ":{"OTHER_TOKEN":"ab","PATH":"/bin"},"key":"kept","max_tokens":"12"}`))
	if !bytes.Contains(out, []byte(`"OTHER_TOKEN": "[REDACTED]"`)) || !bytes.Contains(out, []byte(`"PATH": "/bin"`)) || !bytes.Contains(out, []byte(`"key": "kept"`)) || !bytes.Contains(out, []byte(`"max_tokens": "12"`)) {
		t.Errorf("JSON env listing: %s", out)
	}
}

// A token straddling a chunk cut is held back and seen whole in the next piece.
func TestChunkStraddle(t *testing.T) {
	tok := "hf_abcdefghijklmnopqrstuvwxyz0123456789"
	r := New([]string{"HF_TOKEN=" + tok})
	in := []byte(strings.Repeat("x", 1<<20-21) + " " + tok + " tail")
	var out []byte
	const piece = 1 << 20
	var pending []byte
	for off := 0; off < len(in) || len(pending) > 0; {
		n := min(piece, len(in)-off)
		pending = append(pending, in[off:off+n]...)
		off += n
		last := off >= len(in)
		o, used := r.Chunk(pending, last)
		out = append(out, o...)
		pending = append([]byte{}, pending[used:]...)
		if last {
			break
		}
	}
	if bytes.Contains(out, []byte("hf_abc")) || bytes.Contains(out, []byte("0123456789")) {
		t.Fatal("token straddling the cut survived")
	}
	if !bytes.HasSuffix(out, []byte(" [REDACTED] tail")) {
		t.Fatalf("tail = %q", out[len(out)-30:])
	}
}
