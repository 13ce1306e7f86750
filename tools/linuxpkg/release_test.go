package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
)

// debFiles are the files the .deb installs; the .rpm holds the same but
// for zsh's directory (rpmFiles).
var debFiles = []string{
	binPath,
	unitPath,
	epilogPath,
	"/usr/share/bash-completion/completions/kcrash",
	"/usr/share/zsh/vendor-completions/_kcrash",
	"/usr/share/fish/vendor_completions.d/kcrash.fish",
}

func rpmFiles() []string {
	var out []string
	for _, f := range debFiles {
		out = append(out, strings.Replace(f, "/zsh/vendor-completions/", "/zsh/site-functions/", 1))
	}
	return out
}

const testVersion = "v0.0.1-pkgtest"

// The one release the tests share (TestReleaseInstallsWithDpkg,
// TestContainerRecipe): built once, by the first test that asks, and
// removed by TestMain.
var shared struct {
	once sync.Once
	dir  string // the temporary directory holding dist
	dist string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// release runs the one release command, scripts/release.sh, into a
// temporary dist directory, once for all the tests.
func release(t *testing.T) string {
	t.Helper()
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "kcrash-release-test-"); shared.err != nil {
			return
		}
		shared.dist = filepath.Join(shared.dir, "dist")
		cmd := exec.Command("bash", "../../scripts/release.sh", testVersion)
		cmd.Env = append(os.Environ(), "DIST="+shared.dist, "PATH="+filepath.Dir(goCmd(t))+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			shared.err = fmt.Errorf("scripts/release.sh: %v\n%s", err, out)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.dist
}

// checkSums checks that SHA256SUMS lists every other file in dist, each
// with its sum.
func checkSums(t *testing.T, dist string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		listed[name] = true
		g, err := os.Open(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		io.Copy(h, g)
		g.Close()
		if hex.EncodeToString(h.Sum(nil)) != sum {
			t.Errorf("SHA256SUMS: %s does not match", name)
		}
	}
	entries, _ := os.ReadDir(dist)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if e.Name() != "SHA256SUMS" && !listed[e.Name()] {
			t.Errorf("SHA256SUMS does not list %s", e.Name())
		}
	}
	for _, want := range []string{"kcrash-linux-amd64", "kcrash-linux-arm64", "kcrash_0.0.1~pkgtest_amd64.deb", "kcrash_0.0.1~pkgtest_arm64.deb",
		"kcrash-0.0.1~pkgtest-1.x86_64.rpm", "kcrash-0.0.1~pkgtest-1.aarch64.rpm"} {
		if !listed[want] {
			t.Errorf("no %s in the release: %v", want, names)
		}
	}
}

// listed runs a package lister and returns the regular files it names.
func listed(t *testing.T, name string, args ...string) []string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if name == "dpkg-deb" { // "-rwxr-xr-x root/root 123 2026-... ./usr/bin/kcrash"
			f := strings.Fields(l)
			if len(f) < 6 || !strings.HasPrefix(f[0], "-") {
				continue
			}
			l = strings.TrimPrefix(f[5], ".")
		}
		files = append(files, l)
	}
	sort.Strings(files)
	return files
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// existing says which of the paths and their parent directories exist.
func existing(paths []string) map[string]bool {
	m := map[string]bool{}
	for _, p := range paths {
		for ; p != "/"; p = filepath.Dir(p) {
			_, err := os.Lstat(p)
			m[p] = err == nil
		}
	}
	return m
}

// dpkg runs dpkg with args, waiting (5 minutes at most) while an apt or
// dpkg of someone else's holds the package database's lock.
func dpkg(args ...string) ([]byte, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		out, err := exec.Command("dpkg", args...).CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte("locked by another process")) || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(time.Second)
	}
}

// TestReleaseInstallsWithDpkg builds a release with scripts/release.sh,
// checks its sums and its packages' file lists, installs the host's .deb
// with dpkg -i, runs the installed kcrash (version, doctor, run, the Slurm
// epilog script, completion), and purges the package again: the host is
// left as it was.
func TestReleaseInstallsWithDpkg(t *testing.T) {
	testenv.MutateHost(t, "installs the release's .deb with dpkg -i and purges it again")
	for _, tool := range []string{"dpkg", "dpkg-deb", "dpkg-query", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "no %s: not a Debian host", tool)
		}
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("no release package for %s", runtime.GOARCH)
	}
	// An installed kcrash (a package, or one copied by hand into a path
	// the package owns) would be replaced and then removed.
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "kcrash").Output(); err == nil {
		testenv.Skip(t, "a kcrash package is installed here (%s): the test would replace it", out)
	}
	for _, p := range debFiles {
		if _, err := os.Lstat(p); err == nil {
			testenv.Skip(t, "%s exists: installing the package would overwrite it", p)
		}
	}
	before := existing(debFiles)
	doc, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{binPath, unitPath, epilogPath, "/usr/share/bash-completion/completions/kcrash"} {
		if !bytes.Contains(doc, []byte("`"+p+"`")) {
			t.Errorf("docs/install.md does not name %s, which the package installs", p)
		}
	}

	dist := release(t)
	checkSums(t, dist)
	for _, arch := range []string{"amd64", "arm64"} {
		deb := filepath.Join(dist, "kcrash_0.0.1~pkgtest_"+arch+".deb")
		if got := listed(t, "dpkg-deb", "-c", deb); strings.Join(got, " ") != strings.Join(sorted(debFiles), " ") {
			t.Errorf("dpkg-deb -c %s: %v, want %v", deb, got, sorted(debFiles))
		}
		if got, err := exec.Command("dpkg-deb", "-f", deb, "Package", "Version", "Architecture").Output(); err != nil ||
			string(got) != "Package: kcrash\nVersion: 0.0.1~pkgtest\nArchitecture: "+arch+"\n" {
			t.Errorf("dpkg-deb -f %s: %v\n%s", deb, err, got)
		}
	}
	deb := filepath.Join(dist, "kcrash_0.0.1~pkgtest_"+runtime.GOARCH+".deb")
	t.Run("rpm", func(t *testing.T) {
		if _, err := exec.LookPath("rpm"); err != nil {
			testenv.Skip(t, "no rpm to read the .rpm with (Debian: rpm)")
		}
		rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
		if got := listed(t, "rpm", "-qlp", filepath.Join(dist, "kcrash-0.0.1~pkgtest-1."+rpmArch+".rpm")); strings.Join(got, " ") != strings.Join(sorted(rpmFiles()), " ") {
			t.Errorf("rpm -qlp: %v, want %v", got, sorted(rpmFiles()))
		}
	})

	if out, err := dpkg("-i", deb); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	purged := false
	purge := func() {
		if out, err := dpkg("-P", "kcrash"); err != nil {
			t.Errorf("dpkg -P kcrash: %v\n%s", err, out)
		}
		purged = true
	}
	t.Cleanup(func() {
		if !purged {
			purge()
		}
	})

	kcrash := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(binPath, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s %v: %v\n%s", binPath, args, err, out)
		}
		return string(out)
	}
	if v := kcrash("/", "version"); !strings.HasPrefix(v, "kcrash "+testVersion+" ") || !strings.Contains(v, "\nlinked: static") || strings.Contains(v, "warning") {
		t.Errorf("installed kcrash version:\n%s", v)
	}
	if d := kcrash("/", "doctor"); !strings.HasPrefix(d, "COLLECTOR") {
		t.Errorf("installed kcrash doctor:\n%s", d)
	}
	// run -- true: a command that succeeds leaves no bundle behind.
	cwd := t.TempDir()
	kcrash(cwd, "run", "--", "true")
	if left, _ := os.ReadDir(cwd); len(left) != 0 {
		t.Errorf("kcrash run -- true left %v in its directory", left)
	}

	t.Run("epilog", func(t *testing.T) {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "config.yaml")
		os.WriteFile(cfg, []byte("out: "+filepath.Join(dir, "out")+"\n"), 0o644)
		// slurmd's epilog environment: no PATH, the job's id.
		run := func(env ...string) string {
			cmd := exec.Command(epilogPath)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s with %v: %v (an epilog must exit 0)\n%s", epilogPath, env, err, out)
			}
			return string(out)
		}
		out := run("KCRASH_CONFIG=" + cfg)
		if !strings.Contains(out, "no SLURM_JOB_ID") {
			t.Errorf("epilog with no job: %q", out)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "out", "kcrash-epilog.log")); err != nil || !strings.Contains(string(b), "no SLURM_JOB_ID") {
			t.Errorf("kcrash-epilog.log: %q, %v", b, err)
		}
		out = run("KCRASH_CONFIG="+cfg, "KCRASH_BIN=/nonexistent/kcrash", "SLURM_JOB_ID=7")
		if !strings.Contains(out, "no kcrash at /nonexistent/kcrash; job 7 not checked") {
			t.Errorf("epilog with no kcrash: %q", out)
		}
	})

	t.Run("completion", func(t *testing.T) {
		out, err := exec.Command("bash", "-c", "source /usr/share/bash-completion/completions/kcrash && complete -p kcrash").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "complete -o default -F __start_kcrash kcrash") {
			t.Errorf("bash completion: %v\n%s", err, out)
		}
	})

	// The unit is installed, not enabled.
	if wants, _ := filepath.Glob("/etc/systemd/system/*.wants/kcrash-agent.service"); len(wants) != 0 {
		t.Errorf("the package enabled the agent: %v", wants)
	}

	purge()
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "kcrash").CombinedOutput(); err == nil && strings.Contains(string(out), "installed") {
		t.Errorf("after dpkg -P: %s", out)
	}
	after := existing(debFiles)
	for p, was := range before {
		if after[p] != was {
			t.Errorf("%s: existed %v before the test, %v after", p, was, after[p])
		}
	}
}
