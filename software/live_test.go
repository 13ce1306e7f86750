package software

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
)

// need skips (fails under CI) without the tools the real-input tests use.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "%s is not installed", tool)
		}
	}
}

// pyProc is a real Python process running code, then waiting on stdin.
type pyProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
}

func startPython(t *testing.T, python string, env []string, code string) *pyProc {
	t.Helper()
	return startPythonTB(t, python, env, code)
}

func startPythonB(b *testing.B, python, code string) *pyProc {
	return startPythonTB(b, python, nil, code)
}

func startPythonTB(t testing.TB, python string, env []string, code string) *pyProc {
	t.Helper()
	cmd := exec.Command(python, "-c", code+"\nimport sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pyProc{cmd: cmd, in: in}
	t.Cleanup(p.stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("%s did not start: %q %v", python, line, err)
	}
	return p
}

func (p *pyProc) stop() {
	if p.in != nil {
		p.in.Close()
		p.in = nil
		p.cmd.Wait()
	}
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func build(t *testing.T, pids []int) *Report {
	t.Helper()
	s := NewSampler(DefaultRoots())
	s.Observe(context.Background(), pids, true)
	return Build(context.Background(), DefaultRoots(), s, DefaultLimits)
}

func pkgNamed(py Python, name string) *Package {
	for i := range py.Packages {
		if Normalize(py.Packages[i].Name) == name {
			return &py.Packages[i]
		}
	}
	return nil
}

func issuesOf(rep *Report, kind string) []Issue {
	var out []Issue
	for _, is := range rep.Issues {
		if is.Kind == kind {
			out = append(out, is)
		}
	}
	return out
}

// TestDebianNumpyProcess reads a real process of Debian's python3 that
// imported numpy: the interpreter, numpy's extension modules with build ids
// (checked against readelf), and the packages from Debian's egg-info
// directories, torch's version.py included when python3-torch is there.
func TestDebianNumpyProcess(t *testing.T) {
	need(t, "readelf")
	if _, err := os.Stat("/usr/lib/python3/dist-packages/numpy"); err != nil {
		testenv.Skip(t, "python3-numpy is not installed")
	}
	p := startPython(t, "/usr/bin/python3", nil, "import numpy")
	rep := build(t, []int{p.cmd.Process.Pid})
	if len(rep.Processes) != 1 || !rep.Processes[0].Python || rep.Processes[0].PythonVersion == "" {
		t.Fatalf("processes: %+v", rep.Processes)
	}
	var umath *Library
	for i, l := range rep.Libraries {
		if strings.Contains(l.Path, "numpy/core/_multiarray_umath") {
			umath = &rep.Libraries[i]
		}
	}
	if umath == nil {
		t.Fatalf("numpy's _multiarray_umath not among the mapped libraries: %d libraries", len(rep.Libraries))
	}
	if umath.Package != "numpy" || umath.Size == 0 || umath.MTime.IsZero() || len(umath.Pids) != 1 {
		t.Errorf("numpy's extension: %+v", umath)
	}
	if want := readelfBuildID(t, umath.Path); umath.BuildID != want {
		t.Errorf("build id %q, readelf says %q", umath.BuildID, want)
	}
	if len(rep.Python) != 1 {
		t.Fatalf("python: %+v", rep.Python)
	}
	py := rep.Python[0]
	np := pkgNamed(py, "numpy")
	if np == nil || np.Version == "" || !np.GPU || !strings.HasSuffix(np.Path, ".egg-info") {
		t.Errorf("numpy package: %+v", np)
	}
	want := strings.TrimSpace(run(t, "", "/usr/bin/python3", "-c", "import numpy; print(numpy.__version__)"))
	if np != nil && np.Version != want {
		t.Errorf("numpy version %q, numpy says %q", np.Version, want)
	}
	if _, err := os.Stat("/usr/lib/python3/dist-packages/torch/version.py"); err == nil {
		tp := pkgNamed(py, "torch")
		if tp == nil || tp.Version == "" {
			t.Errorf("torch: %+v", tp)
		}
	}
	if len(rep.Issues) != 0 {
		t.Errorf("issues on a clean Debian install: %+v", rep.Issues)
	}
	if tp := pkgNamed(py, "torch"); tp != nil {
		if l := Line(rep); !strings.HasPrefix(l, "torch "+tp.Version) {
			t.Errorf("line %q", l)
		}
	}
}

func readelfBuildID(t *testing.T, path string) string {
	t.Helper()
	out := run(t, "", "readelf", "-n", path)
	for _, l := range strings.Split(out, "\n") {
		if _, id, ok := strings.Cut(l, "Build ID: "); ok {
			return strings.TrimSpace(id)
		}
	}
	t.Fatalf("readelf shows no build id for %s", path)
	return ""
}

// checkout makes a real package with a C extension in a git checkout two
// commits ahead of its (recorded) upstream, and installs it editable into a
// virtual environment with pip: a PEP 660 install (pyproject.toml: a
// __editable__ finder and direct_url.json) or setup.py develop (egg-link).
func checkout(t *testing.T, pep660 bool) (venvPython, co string) {
	t.Helper()
	need(t, "gcc", "git", "/usr/bin/python3")
	if out, err := exec.Command("/usr/bin/python3", "-c", "import sysconfig, os; assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')); import setuptools, pip").CombinedOutput(); err != nil {
		testenv.Skip(t, "python3-dev, python3-setuptools and python3-pip are needed: %s", out)
	}
	dir := t.TempDir()
	co = filepath.Join(dir, "kext-src")
	for name, body := range map[string]string{
		"setup.py":         "from setuptools import setup, Extension\nsetup(name='kext', version='0.1', packages=['kext'], ext_modules=[Extension('kext._native', ['csrc/native.c'])])\n",
		"kext/__init__.py": "",
		"csrc/native.c": `#include <Python.h>
static PyObject *hello(PyObject *s, PyObject *a) { return PyLong_FromLong(42); }
static PyMethodDef M[] = {{"hello", hello, METH_NOARGS, ""}, {0}};
static struct PyModuleDef D = {PyModuleDef_HEAD_INIT, "_native", 0, -1, M};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&D); }
`,
	} {
		p := filepath.Join(co, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if pep660 {
		os.WriteFile(filepath.Join(co, "pyproject.toml"), []byte("[build-system]\nrequires = [\"setuptools\"]\nbuild-backend = \"setuptools.build_meta\"\n"), 0o644)
	}
	os.WriteFile(filepath.Join(co, ".gitignore"), []byte("build/\n*.so\n*.egg-info/\n"), 0o644)
	run(t, co, "git", "init", "-q", "-b", "main")
	run(t, co, "git", "add", "-A")
	run(t, co, "git", "commit", "-q", "-m", "base")
	base := run(t, co, "git", "rev-parse", "HEAD")
	run(t, co, "git", "update-ref", "refs/remotes/origin/main", base)
	run(t, co, "git", "config", "branch.main.remote", "origin")
	run(t, co, "git", "config", "branch.main.merge", "refs/heads/main")
	for _, m := range []string{"one", "two"} {
		os.WriteFile(filepath.Join(co, "kext", m+".py"), []byte("x = 1\n"), 0o644)
		run(t, co, "git", "add", "-A")
		run(t, co, "git", "commit", "-q", "-m", m)
	}
	venv := filepath.Join(dir, "venv")
	run(t, dir, "/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", venv)
	run(t, dir, filepath.Join(venv, "bin", "python"), "-m", "pip", "install", "-q", "--no-cache-dir", "--no-build-isolation", "--no-deps", "--no-index", "-e", co)
	return filepath.Join(venv, "bin", "python"), co
}

func soOf(t *testing.T, co string) string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(co, "kext", "_native*.so"))
	if len(ms) != 1 {
		t.Fatalf("built extension: %v", ms)
	}
	return ms[0]
}

// TestDevelopInstallStaleAndReplaced follows a real develop install under
// a running process: first clean (its checkout's commit, 2 commits ahead of
// origin/main), then its C source edited after the build (stale), then its
// extension rebuilt with gcc and renamed over the one the process mapped
// (the mapping turns "(deleted)").
func TestDevelopInstallStaleAndReplaced(t *testing.T) {
	for _, mode := range []struct {
		name   string
		pep660 bool
		how    string
	}{{"pep660", true, "direct_url.json"}, {"setup.py-develop", false, "egg-link"}} {
		t.Run(mode.name, func(t *testing.T) {
			python, co := checkout(t, mode.pep660)
			p := startPython(t, python, nil, "import kext._native as n; assert n.hello() == 42")
			pid := p.cmd.Process.Pid
			so := soOf(t, co)

			rep := build(t, []int{pid})
			if len(rep.Python) != 1 || rep.Python[0].Venv == "" {
				t.Fatalf("python: %+v", rep.Python)
			}
			k := pkgNamed(rep.Python[0], "kext")
			if k == nil || k.Version != "0.1" || k.Editable == nil {
				t.Fatalf("kext: %+v", k)
			}
			e := k.Editable
			if e.Source != co || e.How != mode.how {
				t.Errorf("editable %+v, want source %s via %s", e, co, mode.how)
			}
			head := run(t, co, "git", "rev-parse", "HEAD")
			if e.Git == nil || e.Git.Commit != head || e.Git.Branch != "main" || e.Git.Upstream != "origin/main" || e.Git.Ahead == nil || *e.Git.Ahead != 2 {
				t.Errorf("git: %+v (HEAD %s)", e.Git, head)
			}
			if e.Stale || len(rep.Issues) != 0 {
				t.Errorf("fresh build reads stale: %+v %+v", e, rep.Issues)
			}
			var lib *Library
			for i := range rep.Libraries {
				if rep.Libraries[i].Path == so {
					lib = &rep.Libraries[i]
				}
			}
			if lib == nil || lib.Package != "kext" || lib.BuildID == "" {
				t.Fatalf("the extension among the libraries: %+v", lib)
			}
			if l := Line(rep); !strings.Contains(l, "kext 0.1 (develop, 2 commits ahead of origin/main)") {
				t.Errorf("line %q", l)
			}

			// The source edited after the build.
			st, _ := os.Stat(so)
			src := filepath.Join(co, "csrc", "native.c")
			later := st.ModTime().Add(5 * time.Second)
			if err := os.Chtimes(src, later, later); err != nil {
				t.Fatal(err)
			}
			rep = build(t, []int{pid})
			stale := issuesOf(rep, IssueStaleBuild)
			if len(stale) != 1 || stale[0].Package != "kext" || !strings.Contains(stale[0].Text, src) || !strings.Contains(stale[0].Text, "kext/_native") {
				t.Errorf("stale: %+v", rep.Issues)
			}

			// Rebuilt and renamed over the mapped file, as a build does.
			inc := strings.TrimSpace(run(t, "", "/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"))
			tmp := so + ".new"
			run(t, co, "gcc", "-shared", "-fPIC", "-I"+inc, "-o", tmp, src)
			rebuilt := later.Add(time.Second) // a build after the edit
			if err := os.Chtimes(tmp, rebuilt, rebuilt); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, so); err != nil {
				t.Fatal(err)
			}
			rep = build(t, []int{pid})
			del := issuesOf(rep, IssueDeletedLibrary)
			if len(del) != 1 || del[0].Libraries[0] != so || del[0].Pid != pid || !strings.Contains(del[0].Text, "replaced") {
				t.Errorf("deleted: %+v", rep.Issues)
			}
			// the stale flag is gone: the newest .so is newer than the source now
			if len(issuesOf(rep, IssueStaleBuild)) != 0 {
				t.Errorf("still stale after the rebuild: %+v", rep.Issues)
			}
			b, _ := json.Marshal(rep)
			if !strings.Contains(string(b), `"deleted":true`) {
				t.Errorf("software.json does not say deleted")
			}
		})
	}
}

// TestTwoBuildsOfARuntimeInOneProcess loads two builds of one library into
// a real process, as a wheel bundling its own copy next to the system's
// does. The library is a tiny stand-in built here with gcc under NCCL's
// file name and SONAME (the check goes by the name's family and the build
// ids); the same file reached twice, or another family, is no issue.
func TestTwoBuildsOfARuntimeInOneProcess(t *testing.T) {
	need(t, "gcc", "/usr/bin/python3")
	dir := t.TempDir()
	var libs []string
	for _, v := range []string{"2.18.1", "2.21.5"} {
		src := filepath.Join(dir, "nccl-"+v+".c")
		os.WriteFile(src, []byte("const char *ncclVersion(void) { return \""+v+"\"; }\n"), 0o644)
		out := filepath.Join(dir, v, "libnccl.so."+v)
		os.MkdirAll(filepath.Dir(out), 0o755)
		run(t, dir, "gcc", "-shared", "-fPIC", "-Wl,--build-id", "-Wl,-soname,libnccl.so.2", "-o", out, src)
		libs = append(libs, out)
	}
	other := filepath.Join(dir, "libother.so")
	run(t, dir, "gcc", "-shared", "-fPIC", "-o", other, filepath.Join(dir, "nccl-2.18.1.c"))
	code := "import ctypes\n"
	for _, l := range append(libs, libs[0], other) { // libs[0] twice: one mapping
		code += "ctypes.CDLL(" + strconvQuote(l) + ")\n"
	}
	p := startPython(t, "/usr/bin/python3", nil, code)
	rep := build(t, []int{p.cmd.Process.Pid})
	dup := issuesOf(rep, IssueDuplicateRuntime)
	if len(dup) != 1 || dup[0].Pid != p.cmd.Process.Pid || len(dup[0].Libraries) != 2 ||
		dup[0].Libraries[0] != libs[0] || dup[0].Libraries[1] != libs[1] || !strings.Contains(dup[0].Text, "2 different builds of libnccl") {
		t.Fatalf("duplicates: %+v", rep.Issues)
	}
	for _, l := range libs {
		if id := readelfBuildID(t, l); !strings.Contains(dup[0].Text, id[:12]) {
			t.Errorf("build id %s of %s not in %q", id, l, dup[0].Text)
		}
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestExecIsANewProgram: a shell that execs Python is two records, the
// shell's (gone) and Python's, each with its own mappings.
func TestExecIsANewProgram(t *testing.T) {
	need(t, "/usr/bin/python3")
	cmd := exec.Command("/bin/sh", "-c", "read x; exec /usr/bin/python3 -c 'import sys; print(\"ready\", flush=True); sys.stdin.read()'")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	pid := cmd.Process.Pid
	s := NewSampler(DefaultRoots())
	// the shell is read once it runs (before its exec the child is a copy of this test)
	shell := ""
	for deadline := time.Now().Add(10 * time.Second); shell == ""; time.Sleep(5 * time.Millisecond) {
		s.Observe(context.Background(), []int{pid}, true)
		if ps, _, _ := s.Snapshot(); !ps[len(ps)-1].Exited && ps[len(ps)-1].Exe != "" && !strings.Contains(ps[len(ps)-1].Exe, ".test") {
			shell = ps[len(ps)-1].Exe
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell never showed")
		}
	}
	io.WriteString(in, "go\n")
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("python: %q", line)
	}
	s.Observe(context.Background(), []int{pid}, true)
	ps, _, _ := s.Snapshot()
	var live, shells int
	for _, p := range ps {
		if p.Pid != pid {
			t.Errorf("pid %d", p.Pid)
		}
		if !p.Exited {
			live++
			if !p.Python || p.Libraries == 0 {
				t.Errorf("the live record is not Python's: %+v", p)
			}
		}
		if p.Exe == shell && p.Exited && !p.Python {
			shells++
		}
	}
	if live != 1 || shells != 1 {
		t.Fatalf("records: %+v", ps)
	}
}

// TestBounds: the library count is capped (and says so); a collector past
// its deadline returns what it has, with a note.
func TestBounds(t *testing.T) {
	need(t, "/usr/bin/python3")
	p := startPython(t, "/usr/bin/python3", nil, "import json")
	s := NewSampler(DefaultRoots())
	s.MaxLibraries = 3
	s.Observe(context.Background(), []int{p.cmd.Process.Pid}, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep := Build(ctx, DefaultRoots(), s, DefaultLimits)
	if len(rep.Libraries) != 3 || !rep.LibrariesCut {
		t.Errorf("%d libraries, cut %v", len(rep.Libraries), rep.LibrariesCut)
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "deadline") {
		t.Errorf("notes %v", rep.Notes)
	}
}

// TestStaleScanOwnSourcesFirst: a checkout whose vendored tree alone is
// over the walk's limit still has its own sources and build compared.
func TestStaleScanOwnSourcesFirst(t *testing.T) {
	co := t.TempDir()
	for i := 0; i < 50; i++ {
		p := filepath.Join(co, "3rdparty", "ck", "include", fmt.Sprintf("h%02d.hpp", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	os.MkdirAll(filepath.Join(co, "csrc"), 0o755)
	os.MkdirAll(filepath.Join(co, "pkg"), 0o755)
	os.WriteFile(filepath.Join(co, "pkg", "_ops.so"), nil, 0o644)
	os.WriteFile(filepath.Join(co, "csrc", "ops.cu"), nil, 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(co, "pkg", "_ops.so"), old, old)
	e := &Editable{Source: co}
	scanStale(context.Background(), DefaultRoots(), e, Limits{WalkFiles: 10, SourceExts: DefaultLimits.SourceExts})
	if !e.Stale || !e.ScanCut || e.NewestSource == nil || !strings.HasSuffix(e.NewestSource.Path, "csrc/ops.cu") {
		t.Errorf("%+v %+v", e, e.NewestSource)
	}
}
