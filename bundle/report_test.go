package bundle

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/internal/redact"
)

// The report hook sees the staged files and the manifest redacted, its page
// is written as report.html (redacted once more), kept whole when the
// bundle is cut to its budget, and a failing hook costs only the page.
func TestWriteReportHook(t *testing.T) {
	secret := "hf_" + strings.Repeat("Zq9", 12)
	// incompressible: the compressed budget, not the raw cap, forces the cut,
	// and the page is the largest file (the first a cut would take)
	noise := func(n int) []byte { b := make([]byte, n/2); rand.Read(b); return []byte(hex.EncodeToString(b)) }
	big := noise(200 << 10)
	st := stageWith(t, map[string][]byte{"output.log": []byte("token=" + secret + "\n"), "raw/big.bin": big})
	m := &Manifest{SchemaVersion: SchemaVersion, Command: []string{"sh", "-c", "echo " + secret}}
	var sawLog, sawCmd string
	page := []byte("<p>page " + string(noise(300<<10)) + " leak " + secret + "</p>\n")
	hook := func(dir, name string, hm *Manifest) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, "output.log"))
		sawLog, sawCmd = string(b), strings.Join(hm.Command, " ")
		if name != st.Name {
			t.Errorf("hook given name %q, want %q", name, st.Name)
		}
		return page, err
	}
	res, err := st.Write(m, WriteOptions{Out: t.TempDir(), Budget: 256 << 10, Redactor: redact.New(nil), Report: hook})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sawLog, secret) || strings.Contains(sawCmd, secret) || !strings.Contains(sawLog, "[REDACTED]") {
		t.Errorf("the hook saw unredacted input: log %q, command %q", sawLog, sawCmd)
	}
	b, err := Open(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := b.File("report.html")
	if !ok {
		t.Fatalf("no report.html in %v", b.Names())
	}
	if bytes.Contains(got, []byte(secret)) || !bytes.HasPrefix(got, []byte("<p>page ")) || !bytes.HasSuffix(got, []byte("leak [REDACTED]</p>\n")) {
		t.Errorf("report.html is not the whole page, redacted (%d bytes)", len(got))
	}
	if strings.Join(b.Manifest.Truncated, ",") != "raw/big.bin" {
		t.Errorf("truncated %q, want raw/big.bin alone", b.Manifest.Truncated)
	}
	if len(b.Manifest.Truncated) == 0 {
		t.Error("the budget cut nothing: the test does not test keeping the page whole")
	}
	for _, n := range b.Manifest.Truncated {
		if n == "report.html" {
			t.Error("report.html was cut to fit the budget")
		}
	}

	st = stageWith(t, map[string][]byte{"output.log": []byte("x\n")})
	fail := func(string, string, *Manifest) ([]byte, error) { return nil, errors.New("no page today") }
	res, err = st.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: t.TempDir(), Report: fail})
	if err != nil {
		t.Fatal(err)
	}
	if b, err = Open(res.Path); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.File("report.html"); ok {
		t.Error("report.html written by a failing hook")
	}
	if !strings.Contains(strings.Join(b.Manifest.Notes, "\n"), "report.html not written: no page today") {
		t.Errorf("notes %q do not say the page is missing", b.Manifest.Notes)
	}
}
