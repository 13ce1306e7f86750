package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"kcrash": func() { os.Exit(Main()) }})
}

// TestScripts drives the real binary through cmd/kcrash/testdata/script/*.txtar.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			wd, _ := os.Getwd()
			e.Setenv("EXAMPLES", filepath.Join(wd, "..", "..", "examples"))
			e.Setenv("CORPUS", testcorpus.Dir(t))
			e.Setenv("XDG_CONFIG_HOME", filepath.Join(e.WorkDir, ".config"))
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				// CI runs as root and must run every root-only scenario.
				if os.Geteuid() != 0 && testenv.InCI() {
					return false, fmt.Errorf("CI=true but not root: root-only scenarios would be skipped")
				}
				return os.Geteuid() == 0, nil
			case "python3":
				// .ci/run installs python3; CI must run what needs it.
				_, err := exec.LookPath("python3")
				if err != nil && testenv.InCI() {
					return false, fmt.Errorf("CI=true but python3 is missing: %v", err)
				}
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"unbundle": cmdUnbundle,
			"nbundles": cmdNBundles,
			"gone":     cmdGone,
			"waitfile": cmdWaitFile,
		},
	})
}

// unbundle DIR: extract the only bundle in DIR into DIR/x (without its top directory).
func cmdUnbundle(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: unbundle DIR")
	}
	dir := ts.MkAbs(args[0])
	m, _ := filepath.Glob(filepath.Join(dir, "kcrash-*.tar.gz"))
	if len(m) != 1 {
		ts.Fatalf("want one bundle in %s, found %d", dir, len(m))
	}
	f, err := os.Open(m[0])
	ts.Check(err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	ts.Check(err)
	tr := tar.NewReader(gz)
	top := strings.TrimSuffix(filepath.Base(m[0]), ".tar.gz")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		ts.Check(err)
		rel, ok := strings.CutPrefix(h.Name, top+"/")
		if !ok {
			ts.Fatalf("%s: entry %q outside the bundle directory %s", m[0], h.Name, top)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		p := filepath.Join(dir, "x", rel)
		ts.Check(os.MkdirAll(filepath.Dir(p), 0o755))
		data, err := io.ReadAll(tr)
		ts.Check(err)
		ts.Check(os.WriteFile(p, data, 0o644))
	}
}

// nbundles DIR N: DIR holds exactly N bundles and no temporary files.
func cmdNBundles(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: nbundles DIR N")
	}
	want, _ := strconv.Atoi(args[1])
	m, _ := filepath.Glob(filepath.Join(ts.MkAbs(args[0]), "kcrash-*.tar.gz"))
	tmp, _ := filepath.Glob(filepath.Join(ts.MkAbs(args[0]), ".kcrash-*"))
	if len(m) != want || len(tmp) != 0 {
		ts.Fatalf("%s: %d bundles and %d temporary files, want %d and 0", args[0], len(m), len(tmp), want)
	}
}

// gone PIDFILE DURATION: the process whose pid is in PIDFILE is gone within DURATION.
func cmdGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: gone PIDFILE DURATION")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(ts.ReadFile(args[0])))
	ts.Check(err)
	d, err := time.ParseDuration(args[1])
	ts.Check(err)
	deadline := time.Now().Add(d)
	for {
		alive := syscall.Kill(pid, 0) == nil && !isZombie(pid)
		if !alive {
			if neg {
				ts.Fatalf("pid %d is gone", pid)
			}
			return
		}
		if time.Now().After(deadline) {
			if !neg {
				syscall.Kill(pid, syscall.SIGKILL)
				ts.Fatalf("pid %d still alive after %s", pid, d)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// waitfile FILE: wait up to 20s for FILE to exist and be non-empty.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	p := ts.MkAbs(args[0])
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(p); err == nil && fi.Size() > 0 {
			return
		}
	}
	ts.Fatalf("%s did not appear", args[0])
}
