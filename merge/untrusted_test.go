package merge

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO named like a bundle is skipped, not opened: merge must not hang.
func TestMergeDirWithFIFODoesNotHang(t *testing.T) {
	dir := t.TempDir()
	good := writeBundle(t, dir, spec{rank: intp(0), host: "a", verdict: "gpu_oom", code: intp(1)})
	fifo := filepath.Join(dir, "kcrash-20260101T000000Z-x-1.tar.gz")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var paths []string
	var skipped []error
	var r *Result
	var err error
	go func() {
		defer close(done)
		paths, skipped, err = Paths([]string{dir})
		if err == nil {
			r, err = Merge(append(paths, fifo)) // an explicit FIFO argument too
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("merge hung on a FIFO")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || paths[0] != good || len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "not a regular file") {
		t.Fatalf("paths %v skipped %v", paths, skipped)
	}
	if len(r.Ranks) != 1 || len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Error(), "FIFO") {
		t.Fatalf("ranks %d skipped %v", len(r.Ranks), r.Skipped)
	}
}

// One unreadable subdirectory is noted; the rest is merged. As root (CI) the
// check runs in a child of this test binary that dropped to nobody.
func TestMergeUnreadableSubdirNoted(t *testing.T) {
	if d := os.Getenv("KCRASH_TEST_UNREADABLE"); d != "" {
		paths, skipped, err := Paths([]string{d})
		fmt.Printf("paths=%d skipped=%v err=%v\n", len(paths), skipped, err)
		return
	}
	base, err := os.MkdirTemp("", "kcrash-merge-unreadable-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	writeBundle(t, filepath.Join(base, "node-a"), spec{rank: intp(0), host: "a", verdict: "gpu_oom", code: intp(1)})
	writeBundle(t, filepath.Join(base, "node-b"), spec{rank: intp(1), host: "b", verdict: "gpu_oom", code: intp(1)})
	filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Chmod(p, map[bool]os.FileMode{true: 0o755, false: 0o644}[fi.IsDir()])
		}
		return nil
	})
	os.Chmod(filepath.Join(base, "node-b"), 0)
	defer os.Chmod(filepath.Join(base, "node-b"), 0o755)
	var out string
	if os.Geteuid() == 0 {
		// the test binary lives in a private build directory: copy it out
		bin := filepath.Join(base, "merge.test")
		self, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, self, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^TestMergeUnreadableSubdirNoted$")
		cmd.Env = append(os.Environ(), "KCRASH_TEST_UNREADABLE="+base)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		cmd.Dir = "/"
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child as nobody: %v\n%s", err, b)
		}
		out = string(b)
	} else {
		paths, skipped, err := Paths([]string{base})
		out = fmt.Sprintf("paths=%d skipped=%v err=%v\n", len(paths), skipped, err)
	}
	if !strings.Contains(out, "paths=1 ") || !strings.Contains(out, "node-b: permission denied") || !strings.Contains(out, "err=<nil>") {
		t.Fatalf("got %s", out)
	}
}

// Control characters from a manifest are shown, never sent to the terminal
// or the termination log as they are.
func TestMergeOutputControlCharsVisible(t *testing.T) {
	dir := t.TempDir()
	writeBundle(t, dir, spec{rank: intp(0), host: "evil\x1b]52;c;ZXZpbA==\x07", verdict: "gpu_oom\x1b[2J\u009b31m", summary: "sum\x1b]0;title\x07", code: intp(1),
		findings: []finding{{kind: "gpu_oom", text: "text\x1b[2J", at: time.Second, role: "root_cause"}}})
	r := mustMerge(t, dir)
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{b.String(), r.Line()} {
		if strings.ContainsAny(s, "\x1b\x07") || strings.Contains(s, "\u009b") {
			t.Fatalf("raw control characters in %q", s)
		}
	}
	if !strings.Contains(r.Line(), `evil\x1b]52;c;ZXZpbA==\x07`) {
		t.Fatalf("Line = %q", r.Line())
	}
}
