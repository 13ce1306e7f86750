package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kcrash/kcrash/internal/testenv"
)

// tiniPython is a directory for PATH in which tini's test scripts find the
// interpreters their #! lines ask for (python3 with psutil and prctl for
// stage_1.py and subreaper-proxy.py, python for stage_2.py): the first
// python3 that has the modules (Debian's python3-psutil, python3-prctl).
func tiniPython(t *testing.T) string {
	t.Helper()
	var py string
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(c)
		if err == nil && exec.Command(p, "-c", "import psutil, prctl").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		testenv.Skip(t, "tini's reaping test needs python3 with psutil and prctl (python3-psutil, python3-prctl)")
	}
	dir := t.TempDir()
	for _, name := range []string{"python3", "python"} {
		if err := os.Symlink(py, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTiniReaping runs tini's own reaping test (testdata/tini, from tini's
// test/run_inner_tests.py) with kcrash in tini's place, with and without a
// pty: stage_1.py, the child of the init, starts stage_2.py, which orphans
// 100 sleeps and exits; stage_1.py then waits until its parent has no
// descendant but itself, and fails if a process of its group is left (a
// sleep its parent never reaped). kcrash is the init as PID 1 of a new PID
// namespace, and as a child subreaper behind tini's subreaper-proxy.py.
func TestTiniReaping(t *testing.T) {
	pyDir := tiniPython(t)
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "tini"))
	if err != nil {
		t.Fatal(err)
	}
	stage1 := filepath.Join(dir, "reaping", "stage_1.py")
	env := append(os.Environ(), "PATH="+pyDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, mode := range []string{"--no-pty=false", "--no-pty"} {
		run := []string{"run", "-q", "--collect", "never", mode, "--", stage1}
		t.Run("subreaper"+mode, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(filepath.Join(dir, "subreaper-proxy.py"), append([]string{bin}, run...)...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("subreaper-proxy.py kcrash %v: %v (tini's test wants exit 0)\n%s", run, err, out)
			}
		})
		t.Run("pid1"+mode, func(t *testing.T) {
			t.Parallel()
			cmd := asInit(t, run...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kcrash %v as PID 1: %v (tini's test wants exit 0)\n%s", run, err, out)
			}
		})
	}
}
