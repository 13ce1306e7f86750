package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/calldiff"
)

// kcrash diff of two real runs' bundles lines up their software: a run whose
// Python had Debian's torch against one that ran no Python at all shows torch
// on one side only, in the text and in --json; the report page of the first
// bundle lists torch in its software table.
func TestDiffShowsSoftwareSideBySide(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	// The sleep keeps the process alive while the software collector's
	// sampler reads it (it reads a new process at once, then as it grows).
	r := runKcrash(t, 120*time.Second, nil, "run", "-q", "--out", a, "--skip-collectors", "kmsg", "--",
		torchPython, "-c", "import torch, time; time.sleep(1.5); raise SystemExit(3)")
	if r.code != 3 {
		t.Fatalf("run A: exit %d: %s", r.code, r.stderr)
	}
	r = runKcrash(t, 60*time.Second, nil, "run", "-q", "--out", b, "--skip-collectors", "kmsg", "--",
		"sh", "-c", "sleep 0.5; exit 3")
	if r.code != 3 {
		t.Fatalf("run B: exit %d: %s", r.code, r.stderr)
	}
	bunA := oneBundle(t, a)
	ba, bb := bunA.Path, oneBundle(t, b).Path
	// The bundle's own report.html shows the same stack.
	page, ok := bunA.File("report.html")
	if !ok || !strings.Contains(string(page), `id="software"`) || !strings.Contains(string(page), "<td>torch</td>") {
		t.Fatalf("report.html has no software table with torch (%d bytes)", len(page))
	}

	r = runKcrash(t, 60*time.Second, nil, "diff", ba, bb)
	if r.code != 0 {
		t.Fatalf("diff: exit %d: %s", r.code, r.stderr)
	}
	var torchLine string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "torch ") {
			torchLine = l
		}
	}
	if !strings.Contains(r.stdout, "software that differs") || !strings.Contains(torchLine, "|  B (none)") {
		t.Fatalf("diff text has no torch row on A's side only:\n%s", r.stdout)
	}

	r = runKcrash(t, 60*time.Second, nil, "diff", "--json", ba, bb)
	var res calldiff.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("diff --json: %v\n%s", err, r.stdout)
	}
	found := false
	for _, row := range res.Software {
		if row.What == "torch" {
			found = row.A != "" && row.B == "" && !row.Same
		}
	}
	if !found {
		t.Fatalf("diff --json software rows: %+v", res.Software)
	}
}
