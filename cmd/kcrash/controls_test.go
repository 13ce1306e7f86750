package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kcrash/kcrash/bundle"
)

// hostileText acts on a terminal when printed raw: an OSC title write ended
// by BEL, an 8-bit CSI (U+009B), a C1 control, a bidi override (U+202E).
const hostileText = "\x1b]0;pwn\x07\u009b2J\u0085\u202eevil"

// firstRawControl returns the first character a terminal acts on (a C0
// control but newline and tab, DEL, C1, a bidi override) and its offset.
func firstRawControl(s string) (rune, int) {
	for i, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r == utf8.RuneError:
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			return r, i
		}
	}
	return 0, -1
}

// hostileBundle writes a bundle whose manifest, verdict, processes and logs
// all carry hostileText.
func hostileBundle(t *testing.T, dir string) string {
	t.Helper()
	st, err := bundle.NewStage(t.TempDir(), bundle.Name(time.Now(), "node"+hostileText, 42, ""))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	procs, _ := json.Marshal(map[string]any{"root_pid": 42, "processes": []map[string]any{{
		"pid": 42, "ppid": 1, "name": "py" + hostileText, "cmdline": []string{"python", hostileText},
		"start_time": now.Add(-time.Second), "end_time": now, "exited": true, "exit_signal": "SIGSEGV" + hostileText}}})
	files := map[string]string{
		"summary.md":     "# kcrash: native_crash" + hostileText + "\n\n**Verdict:** " + hostileText + "\n",
		"output.log":     "Segmentation fault " + hostileText + "\n",
		"processes.json": string(procs),
	}
	for n, d := range files {
		if err := os.WriteFile(filepath.Join(st.Dir, n), []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sig := "SIGSEGV" + hostileText
	tri, _ := json.Marshal(map[string]any{"verdict": map[string]any{"kind": "native_crash", "confidence": "high", "summary": "crashed " + hostileText},
		"findings": []map[string]any{{"kind": "native_crash", "text": hostileText, "source": "output"}}, "next_steps": []string{hostileText}})
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, Mode: "run", Command: []string{"python", hostileText}, Cwd: "/" + hostileText,
		StartTime: now.Add(-time.Second), EndTime: now, Exit: bundle.Exit{Signal: &sig, Reason: hostileText},
		Host: bundle.Host{Hostname: "node" + hostileText, Kernel: hostileText}, Triage: tri, Notes: []string{hostileText}}
	res, err := st.Write(m, bundle.WriteOptions{Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	return res.Path
}

// Every output prints a bundle's or a log's text with the same rule (the
// one `show --json` applies): no control character reaches the terminal
// raw, in JSON or in text, on stdout or stderr, nor in report.html.
func TestOutputsEscapeControls(t *testing.T) {
	dir := t.TempDir()
	b := hostileBundle(t, dir)
	log := filepath.Join(dir, "app.log")
	os.WriteFile(log, []byte("RuntimeError: CUDA error: an illegal memory access was encountered "+hostileText+"\nSegmentation fault (core dumped) "+hostileText+"\n"), 0o644)
	page := filepath.Join(dir, "page.html")
	for _, args := range [][]string{
		{"show", b}, {"show", "--json", b}, {"show", "--list", b},
		{"report", b, "-o", page},
		{"diff", b, b}, {"diff", "--json", b, b},
		{"merge", b}, {"merge", "--json", b},
		{"triage", log}, {"triage", "--json", log}, {"triage", "--log", log, "--json"},
	} {
		r := runKcrash(t, time.Minute, nil, args...)
		if r.code != 0 && r.code != 1 {
			t.Errorf("kcrash %v: exit %d: %s", args, r.code, r.stderr)
		}
		for what, out := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
			if c, at := firstRawControl(out); at >= 0 {
				t.Errorf("kcrash %v: U+%04X raw on %s: %q", args, c, what, out[max(at-80, 0):min(at+20, len(out))])
			}
		}
		if !strings.Contains(r.stdout+r.stderr, "evil") && args[0] != "report" && !(args[0] == "show" && args[1] == "--list") {
			t.Errorf("kcrash %v: the hostile text is not shown at all: %s", args, r.stdout)
		}
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if c, at := firstRawControl(string(html)); at >= 0 {
		t.Errorf("report.html: U+%04X raw: %q", c, html[max(at-80, 0):min(at+20, len(html))])
	}
}
