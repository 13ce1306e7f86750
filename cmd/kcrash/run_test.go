package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
)

// TestConcurrentRunsOneOut: many ranks writing into one shared --out at the
// same moment get distinct, complete bundles.
func TestConcurrentRunsOneOut(t *testing.T) {
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "run", "-q", "--out", out, "--skip-collectors", skipSlow(), "--", "sh", "-c", fmt.Sprintf("echo rank %d; exit 9", i))
			cmd.Env = append(os.Environ(), "SLURM_JOB_ID=77", fmt.Sprintf("SLURM_PROCID=%d", i%4))
			b, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 9 {
				errs <- fmt.Errorf("run %d: %v: %s", i, err, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*"))
	hidden, _ := filepath.Glob(filepath.Join(out, ".*"))
	if len(files) != n || len(hidden) != 0 {
		t.Fatalf("%d files and %d temporary files in --out, want %d bundles", len(files), len(hidden), n)
	}
	ranks := map[string]int{}
	for _, f := range files {
		b, err := bundle.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := b.File("output.log")
		ranks[strings.TrimSpace(string(out))]++
		if b.Manifest.Job == nil || b.Manifest.Job.JobID != "77" || !strings.Contains(f, "-r") {
			t.Errorf("%s: job identity missing: %+v", f, b.Manifest.Job)
		}
	}
	if len(ranks) != n {
		t.Fatalf("bundles hold %d distinct outputs, want %d", len(ranks), n)
	}
}

// skipSlow leaves out collectors that sample external tools, keeping this
// test about naming and atomicity.
func skipSlow() string {
	var skip []string
	for _, name := range []string{"gpu", "kmsg"} {
		if hasCollector(name) {
			skip = append(skip, name)
		}
	}
	if len(skip) == 0 {
		return ""
	}
	return strings.Join(skip, ",")
}

// TestNoLeaksOverManyRuns runs kcrash in-process 100 times: file descriptors
// (ptys above all) and goroutines must come back to where they started.
func TestNoLeaksOverManyRuns(t *testing.T) {
	out := t.TempDir()
	runOnce := func(i int) {
		in, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		s := &streams{In: in, Out: &strings.Builder{}, Err: &strings.Builder{}}
		args := []string{"run", "-q", "--out", out, "--collect", "always", "--", "sh", "-c", fmt.Sprintf("echo %d; exit %d", i, i%3)}
		if i%2 == 1 {
			args = append(args[:1], append([]string{"--no-pty"}, args[1:]...)...)
		}
		if code := run(args, s); code != i%3 {
			t.Fatalf("run %d: exit %d, want %d; stderr %s", i, code, i%3, s.Err)
		}
	}
	runOnce(0) // warm up lazily started runtime goroutines
	// The baseline is taken once the warm-up's goroutines and descriptors
	// have wound down: two readings alike, 20 ms apart (5 s at most).
	fds0, g0 := countFDs(t), runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		fds, g := countFDs(t), runtime.NumGoroutine()
		if fds == fds0 && g == g0 {
			break
		}
		fds0, g0 = fds, g
	}
	for i := 1; i <= 100; i++ {
		runOnce(i)
	}
	var fds, g int
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		fds, g = countFDs(t), runtime.NumGoroutine()
		if fds <= fds0 && g <= g0+2 {
			break
		}
	}
	if fds > fds0 || g > g0+2 {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("after 100 runs: fds %d → %d, goroutines %d → %d\n%s", fds0, fds, g0, g, buf[:n])
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*.tar.gz")); len(m) != 101 {
		t.Fatalf("%d bundles, want 101", len(m))
	}
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting open descriptors: %v", err)
	}
	return len(ents)
}
