package redact

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
)

func TestRedactsValuesAndShapes(t *testing.T) {
	r := New([]string{"HF_TOKEN=hf_secretvalue_long_enough", "MY_PASSWORD=hunter22", "PATH=/usr/bin", "SHORT_KEY=abc", "SSH_AUTH_SOCK=/tmp/agent.sock"})
	in := strings.Join([]string{
		"token hf_secretvalue_long_enough and hunter22",
		"path /usr/bin stays, abc stays, /tmp/agent.sock stays",
		"gh ghp_0123456789abcdefghijklmnopqrstuvwxyzAB end",
		"aws AKIAABCDEFGHIJKLMNOP end",
		"Authorization: Bearer abcdefghijklmnop123",
		"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
		"task-0123456789abcdefghijklmnop is no key",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
	}, "\n")
	want := strings.Join([]string{
		"token [REDACTED] and [REDACTED]",
		"path /usr/bin stays, abc stays, /tmp/agent.sock stays",
		"gh [REDACTED] end",
		"aws [REDACTED] end",
		"Authorization: Bearer [REDACTED]",
		"jwt [REDACTED]",
		"task-0123456789abcdefghijklmnop is no key",
		"[REDACTED]",
	}, "\n")
	if got := r.String(in); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if lines := r.Find([]byte(in)); len(lines) != 6 || lines[0] != 1 || lines[5] != 8 {
		t.Fatalf("Find = %v", lines)
	}
	env := r.Env(map[string]string{"HF_TOKEN": "x", "NOTE": "pw hunter22", "PATH": "/bin"})
	if env["HF_TOKEN"] != Mask || env["NOTE"] != "pw "+Mask || env["PATH"] != "/bin" {
		t.Fatalf("Env = %v", env)
	}
}

// BenchmarkBytes: redaction runs on every file of a bundle between the crash
// and the bundle, the 16 MiB output ring included.
func BenchmarkBytes(b *testing.B) {
	buf := make([]byte, 16<<20)
	rand.Read(buf)
	text := bytes.Repeat([]byte("[2026-05-02 14:07:31] task-42 disk-usage sk-short eyJ hf_ ghp AKIA Prefill batch\n"), (16<<20)/80)
	r := New([]string{"HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789"})
	for _, c := range []struct {
		name string
		data []byte
	}{{"random", buf}, {"log", text}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				r.Bytes(c.data)
			}
		})
	}
}
