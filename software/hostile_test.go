package software

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
)

// The tests here give the readers what a job's user can put on its Python
// path: links to files only root may read, files of 60 GB, FIFOs, git refs
// pointing out of .git. Each reader must stay within the user's rights,
// within bounded memory, and never block.

const swUser = "kcrash-sw-user"

// unprivileged returns the uid and gid of the test's unprivileged user,
// creating it when missing (left in place: other runs reuse it).
func unprivileged(t *testing.T) (int, int) {
	t.Helper()
	testenv.NeedRoot(t, "running a process as another user")
	return testenv.User(t, swUser)
}

// openToAll makes dir and its parents up to the temp root traversable by
// every user (t.TempDir's are 0700).
func openToAll(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestUserFilesReadWithTheUsersRights runs Python as an unprivileged user
// with a PYTHONPATH whose .egg-link and versionless METADATA are links to a
// file only root may read; root reading the process's packages must not
// put that file's lines into the report, and still reads the user's own.
func TestUserFilesReadWithTheUsersRights(t *testing.T) {
	need(t, "/usr/bin/python3")
	uid, gid := unprivileged(t)
	dir := t.TempDir()
	openToAll(t, dir)
	secret := filepath.Join(dir, "root-only")
	if err := os.WriteFile(secret, []byte("Name: kcrash-secret-line\nVersion: 6.6.6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	site := filepath.Join(dir, "site")
	symlink(t, secret, filepath.Join(site, "evil.egg-link"))
	symlink(t, secret, filepath.Join(site, "leak.dist-info", "METADATA"))
	write(t, filepath.Join(site, "mine.dist-info", "METADATA"), "Metadata-Version: 2.1\nName: mine\nVersion: 1.2.3\n\n")
	// the user's own link to the user's own file is followed
	write(t, filepath.Join(dir, "own-metadata"), "Name: linked\nVersion: 4.5\n\n")
	symlink(t, filepath.Join(dir, "own-metadata"), filepath.Join(site, "linked.dist-info", "METADATA"))

	cmd := exec.Command("/usr/bin/python3", "-c", "import sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
	cmd.Env = []string{"PYTHONPATH=" + site, "HOME=/nonexistent", "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	if b := make([]byte, 6); func() bool { n, _ := out.Read(b); return string(b[:n]) != "ready\n" }() {
		t.Fatal("python3 did not start as " + swUser)
	}
	rep := build(t, []int{cmd.Process.Pid})
	b, _ := json.Marshal(rep)
	if strings.Contains(string(b), "kcrash-secret-line") || strings.Contains(string(b), "6.6.6") {
		t.Errorf("a root-only file reached the report:\n%s", b)
	}
	if len(rep.Python) != 1 {
		t.Fatalf("python: %+v", rep.Python)
	}
	if p := pkgNamed(rep.Python[0], "mine"); p == nil || p.Version != "1.2.3" {
		t.Errorf("the user's own package: %+v", p)
	}
	if p := pkgNamed(rep.Python[0], "linked"); p == nil || p.Version != "4.5" {
		t.Errorf("the user's own link: %+v", p)
	}
	// the notes say what was left unread, and as whom
	notes := strings.Join(rep.Notes, "\n")
	if !strings.Contains(notes, swUser) || !strings.Contains(notes, "2 files on the Python path not read") ||
		!strings.Contains(notes, "evil.egg-link (its user may not read it)") || !strings.Contains(notes, "leak.dist-info/METADATA (its user may not read it)") {
		t.Errorf("notes: %q", rep.Notes)
	}
}

// sparse makes a 60 GB file of holes: no disk, but a reader that takes it
// whole asks for 60 GB of memory.
func sparse(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(60 << 30); err != nil {
		t.Fatal(err)
	}
}

// TestHugeFilesAreReadBounded puts 60 GB sparse files where the readers
// look: direct_url.json, a .pth, an .egg-link, torch/version.py, an
// editable checkout's .git/config and .git/HEAD. The packages are still
// listed and the readers' memory stays small.
func TestHugeFilesAreReadBounded(t *testing.T) {
	dir := t.TempDir()
	site := filepath.Join(dir, "site-packages")
	write(t, filepath.Join(site, "a-1.0.dist-info", "METADATA"), "Name: a\nVersion: 1.0\n\n")
	sparse(t, filepath.Join(site, "a-1.0.dist-info", "direct_url.json"))
	sparse(t, filepath.Join(site, "big.pth"))
	sparse(t, filepath.Join(site, "big.egg-link"))
	write(t, filepath.Join(site, "torch-2.5.0.dist-info", "METADATA"), "Name: torch\nVersion: 2.5.0\n\n")
	sparse(t, filepath.Join(site, "torch", "version.py"))
	co := filepath.Join(dir, "checkout")
	write(t, filepath.Join(co, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(co, ".git", "refs", "heads", "main"), strings.Repeat("ab", 20)+"\n")
	sparse(t, filepath.Join(co, ".git", "config"))
	write(t, filepath.Join(site, "dev.egg-link"), co+"\n.\n")
	co2 := filepath.Join(dir, "checkout2")
	sparse(t, filepath.Join(co2, ".git", "HEAD"))
	write(t, filepath.Join(site, "dev2.egg-link"), co2+"\n.\n")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pkgs, _, _ := ReadPackages(context.Background(), DefaultRoots(), []string{site}, DefaultLimits)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("reading the site directory allocated %d MiB", grew>>20)
	}
	py := Python{Packages: pkgs}
	if p := pkgNamed(py, "a"); p == nil || p.Version != "1.0" {
		t.Errorf("a: %+v", p)
	}
	if p := pkgNamed(py, "torch"); p == nil || p.Version != "2.5.0" {
		t.Errorf("torch: %+v", p)
	}
	if p := pkgNamed(py, "dev"); p == nil || p.Editable == nil || p.Editable.Git == nil || p.Editable.Git.Commit != strings.Repeat("ab", 20) {
		t.Errorf("dev: %+v", p)
	}
}

// fifo makes a FIFO at path; at the end of the test each one is opened for
// writing once, which frees a reader stuck opening it.
func fifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

// TestFIFOsDoNotBlock puts FIFOs where the readers open files: METADATA,
// direct_url.json, a .pth, an .egg-link, .git and .git/HEAD. The readers
// return at once with the packages they could read.
func TestFIFOsDoNotBlock(t *testing.T) {
	dir := t.TempDir()
	site := filepath.Join(dir, "site-packages")
	fifo(t, filepath.Join(site, "nover.dist-info", "METADATA"))
	write(t, filepath.Join(site, "b-2.0.dist-info", "METADATA"), "Name: b\nVersion: 2.0\n\n")
	fifo(t, filepath.Join(site, "b-2.0.dist-info", "direct_url.json"))
	fifo(t, filepath.Join(site, "x.pth"))
	fifo(t, filepath.Join(site, "y.egg-link"))
	co := filepath.Join(dir, "co")
	fifo(t, filepath.Join(co, ".git"))
	write(t, filepath.Join(site, "dev.egg-link"), co+"\n")
	co2 := filepath.Join(dir, "co2")
	fifo(t, filepath.Join(co2, ".git", "HEAD"))
	write(t, filepath.Join(site, "dev2.egg-link"), co2+"\n")
	// a FIFO as a site directory of the path
	fifo(t, filepath.Join(dir, "fifo-site"))

	done := make(chan []Package, 1)
	go func() {
		pkgs, _, _ := ReadPackages(context.Background(), DefaultRoots(), []string{filepath.Join(dir, "fifo-site"), site}, DefaultLimits)
		done <- pkgs
	}()
	select {
	case pkgs := <-done:
		py := Python{Packages: pkgs}
		if p := pkgNamed(py, "b"); p == nil || p.Version != "2.0" {
			t.Errorf("b: %+v", p)
		}
		if p := pkgNamed(py, "dev"); p == nil || p.Editable == nil || p.Editable.Git != nil {
			t.Errorf("dev: %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadPackages blocked on a FIFO")
	}
}

// TestGitRefsStayInTheGitDir: HEAD naming a ref outside the git directory
// (../.., an absolute path) is no commit, whatever that file holds; refs
// inside it, loose or packed, still resolve.
func TestGitRefsStayInTheGitDir(t *testing.T) {
	dir := t.TempDir()
	hash := strings.Repeat("1f", 20)
	write(t, filepath.Join(dir, "outside"), hash+"\n")
	for _, ref := range []string{"../../outside", filepath.Join(dir, "outside"), "refs/heads/../../../outside", "refs/../../outside"} {
		co := filepath.Join(dir, "co-"+strconv.Itoa(len(ref)))
		write(t, filepath.Join(co, ".git", "HEAD"), "ref: "+ref+"\n")
		write(t, filepath.Join(co, ".git", "config"), "")
		g := FindGit(co)
		if g != nil && g.Commit != "" {
			t.Errorf("HEAD %q: commit %q", ref, g.Commit)
		}
	}
	co := filepath.Join(dir, "good")
	write(t, filepath.Join(co, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(co, ".git", "packed-refs"), "# pack-refs with: peeled\n"+hash+" refs/heads/main\n")
	write(t, filepath.Join(co, ".git", "refs", "remotes", "origin", "main"), strings.Repeat("2e", 20)+"\n")
	write(t, filepath.Join(co, ".git", "config"), "[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n")
	g := FindGit(co)
	if g == nil || g.Commit != hash || g.Branch != "main" || g.UpstreamCommit != strings.Repeat("2e", 20) {
		t.Errorf("packed ref: %+v", g)
	}
	// a remote or branch name from config is a ref name too
	write(t, filepath.Join(co, ".git", "config"), "[branch \"main\"]\n\tremote = ../../..\n\tmerge = refs/heads/main\n")
	if g := FindGit(co); g == nil || g.UpstreamCommit != "" {
		t.Errorf("upstream through ..: %+v", g)
	}
}

// TestLateLoadedLibrary: a library a process dlopens a second after it
// started (as torch's extensions and JIT builds are) is seen by the
// sampler's periodic reads while the process lives, not only at collection.
func TestLateLoadedLibrary(t *testing.T) {
	need(t, "/usr/bin/python3")
	const lib = "libuuid.so.1"
	cmd := exec.Command("/usr/bin/python3", "-c", "import sys, time, ctypes\nprint('ready', flush=True)\ntime.sleep(1)\nctypes.CDLL('"+lib+"')\nprint('loaded', flush=True)\nsys.stdin.read()\n")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	lines := bufio.NewReader(out)
	if l, _ := lines.ReadString('\n'); l != "ready\n" {
		t.Fatalf("python3: %q", l)
	}
	pid := cmd.Process.Pid
	s := NewSampler(DefaultRoots())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// the collector's watcher: a look every 20 ms, each process on its own schedule
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ctx.Err() == nil {
			s.Observe(ctx, []int{pid}, false)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-watched }()
	if l, _ := lines.ReadString('\n'); l != "loaded\n" {
		t.Fatalf("python3: %q", l)
	}
	has := func() bool {
		_, libs, _ := s.Snapshot()
		for _, l := range libs {
			if strings.Contains(l.Path, "/libuuid.so") {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !has(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			ps, _, _ := s.Snapshot()
			t.Fatalf("%s, loaded 1 s after the start, not seen within 10 s: %+v", lib, ps)
		}
	}
}

// TestExecUnderTheSameName: an exec to another program whose name (comm)
// is the same — a launcher named python3 exec'ing the real interpreter —
// is still a new program with its own mappings.
func TestExecUnderTheSameName(t *testing.T) {
	need(t, "/usr/bin/python3")
	launcher := filepath.Join(t.TempDir(), "python3")
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(launcher, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(launcher, "-c", "read x; exec /usr/bin/python3 -c 'import sys; print(\"ready\", flush=True); sys.stdin.read()'")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	pid := cmd.Process.Pid
	s := NewSampler(DefaultRoots())
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { // the collector's watcher
		defer close(watched)
		for ctx.Err() == nil {
			s.Observe(ctx, []int{pid}, false)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-watched }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ps, _, _ := s.Snapshot(); len(ps) == 1 && ps[0].Exe == launcher && ps[0].Reads > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the launcher was never read")
		}
	}
	io.WriteString(in, "go\n")
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("python: %q", line)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ps, _, _ := s.Snapshot()
		if len(ps) == 2 && ps[0].Exited != ps[1].Exited {
			live := ps[0]
			if live.Exited {
				live = ps[1]
			}
			if !live.Python || live.Exe == launcher {
				t.Fatalf("records %+v", ps)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exec was not seen as a new program: %+v", ps)
		}
	}
}
