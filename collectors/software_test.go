package collectors

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/software"
	"github.com/kcrash/kcrash/supervisor"
)

// TestSoftwareSeesTheTreeWhileItLives runs a real Python worker that imports
// numpy under a tracked tree, lets the collector watch it, then ends it
// before collection, as a crash does: software.json still holds the
// worker's libraries and its interpreter's packages, read while it lived.
func TestSoftwareSeesTheTreeWhileItLives(t *testing.T) {
	if _, err := os.Stat("/usr/lib/python3/dist-packages/numpy"); err != nil {
		testenv.Skip(t, "python3-numpy is not installed")
	}
	cmd := exec.Command("/usr/bin/python3", "-c", "import numpy, sys\nprint('ready', flush=True)\nsys.stdin.read()")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("python3: %q", line)
	}
	pid := cmd.Process.Pid
	tracker := supervisor.NewTracker(pid)
	tracker.Sample(context.Background())

	env := NewEnv()
	env.RootPid, env.Tree, env.SampleInterval = pid, tracker, 20*time.Millisecond
	c := &softwareCollector{}
	stop := StartWatchers(context.Background(), env, []Named{{Name: "software", Collector: c}})
	// the first look is at once; wait for it
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ps, _, _ := c.get(env).Snapshot(); len(ps) == 1 && ps[0].Reads > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher never read the worker")
		}
	}
	in.Close()
	cmd.Wait()
	tracker.MarkExited(pid)
	stop(time.Second)

	dir := t.TempDir()
	st := Run(context.Background(), env, []Named{{Name: "software", Collector: c}}, dir, 10*time.Second, nil)
	if st[0].Status != "ok" || len(st[0].Files) != 1 || st[0].Files[0] != "software.json" {
		t.Fatalf("status %+v", st[0])
	}
	b, err := os.ReadFile(dir + "/software.json")
	if err != nil {
		t.Fatal(err)
	}
	var rep software.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Processes) != 1 || rep.Processes[0].Pid != pid || !rep.Processes[0].Exited || !rep.Processes[0].Python {
		t.Errorf("processes %+v", rep.Processes)
	}
	numpyLib := false
	for _, l := range rep.Libraries {
		numpyLib = numpyLib || strings.Contains(l.Path, "/numpy/") && l.Package == "numpy" && l.BuildID != ""
	}
	if !numpyLib {
		t.Errorf("no numpy extension among %d libraries", len(rep.Libraries))
	}
	found := false
	for _, py := range rep.Python {
		for _, p := range py.Packages {
			found = found || p.Name == "numpy" && p.Version != ""
		}
	}
	if !found {
		t.Errorf("numpy not among the packages: %+v", rep.Python)
	}
}

// TestSoftwareWithoutATree: `kcrash collect` has no tree; the report holds
// the host's versions and says why it has nothing else.
func TestSoftwareWithoutATree(t *testing.T) {
	env := NewEnv()
	env.ProcRoot, env.SysRoot, env.FSRoot = "testdata/none/proc", "testdata/none/sys", t.TempDir()
	dir := t.TempDir()
	st := Run(context.Background(), env, []Named{{Name: "software", Collector: &softwareCollector{}}}, dir, 10*time.Second, nil)
	b, _ := os.ReadFile(dir + "/software.json")
	if st[0].Status != "ok" || !strings.Contains(string(b), "no process tree") || len(env.Findings()) != 0 {
		t.Errorf("%+v\n%s", st[0], b)
	}
}

// TestSoftwareWithAFIFOOnThePath: a FIFO where the collector opens a
// metadata file (here a whole PYTHONPATH entry and a METADATA) costs
// neither software.json nor the collector's deadline.
func TestSoftwareWithAFIFOOnThePath(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testenv.Skip(t, "python3 is not installed")
	}
	dir := t.TempDir()
	for _, p := range []string{dir + "/fifo-path", dir + "/site/stuck.dist-info/METADATA"} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // frees a reader stuck in open
			if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		})
	}
	os.MkdirAll(dir+"/site/fine-1.0.dist-info", 0o755)
	os.WriteFile(dir+"/site/fine-1.0.dist-info/METADATA", []byte("Name: fine\nVersion: 1.0\n\n"), 0o644)
	cmd := exec.Command("/usr/bin/python3", "-c", "import sys\nprint('ready', flush=True)\nsys.stdin.read()")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir+"/fifo-path:"+dir+"/site")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("python3: %q", line)
	}
	tracker := supervisor.NewTracker(cmd.Process.Pid)
	tracker.Sample(context.Background())
	env := NewEnv()
	env.RootPid, env.Tree = cmd.Process.Pid, tracker
	bundleDir := t.TempDir()
	begin := time.Now()
	st := Run(context.Background(), env, []Named{{Name: "software", Collector: &softwareCollector{}}}, bundleDir, 5*time.Second, nil)
	if took := time.Since(begin); st[0].Status != "ok" || took > 4*time.Second {
		t.Fatalf("status %+v after %s", st[0], took)
	}
	b, err := os.ReadFile(bundleDir + "/software.json")
	if err != nil || !strings.Contains(string(b), `"name": "fine"`) {
		t.Errorf("software.json without the readable package: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "stuck.dist-info/METADATA (it is a FIFO, not a regular file)") {
		t.Errorf("the notes do not name the FIFO:\n%s", b)
	}
}

// TestPyDumpReadBounded: a Python process's dump file is the process's to
// write; a 60 GB one (sparse) is read only up to the cap.
func TestPyDumpReadBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "py-1")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("Thread 0x1 (most recent call first):\n")
	f.Truncate(60 << 30)
	f.Close()
	b, err := readFrom(p, 0, 60<<30)
	if err != nil || int64(len(b)) > maxPyDump || !strings.HasPrefix(string(b), "Thread 0x1") {
		t.Errorf("read %d bytes, %v", len(b), err)
	}
}
