package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/internal/testenv"
)

// TestAttachPidRootReadsPythonPathAsTarget: root attached to another user's
// Python reads the packages on its PYTHONPATH with that user's rights: an
// .egg-link and a versionless METADATA linked to a root-only file put none
// of it in the bundle, the user's own package is there. The target (a
// session leader) leaves a Python child of its own, alive at collection.
func TestAttachPidRootReadsPythonPathAsTarget(t *testing.T) {
	testenv.NeedRoot(t, "attaching as root to another user's process")
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testenv.Skip(t, "python3 is not installed")
	}
	uid, gid := testenv.User(t, "kcrash-sw-user")

	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	secret := fmt.Sprintf("KCRASH-TEST-ROOT-SECRET-%d", time.Now().UnixNano())
	secretFile := filepath.Join(dir, "root-only")
	os.WriteFile(secretFile, []byte("Name: "+secret+"\nVersion: 6.6.6\n"), 0o600)
	site := filepath.Join(dir, "site")
	for _, d := range []string{"leak.dist-info", "mine-1.2.3.dist-info"} {
		os.MkdirAll(filepath.Join(site, d), 0o755)
	}
	os.Symlink(secretFile, filepath.Join(site, "evil.egg-link"))
	os.Symlink(secretFile, filepath.Join(site, "leak.dist-info", "METADATA"))
	os.WriteFile(filepath.Join(site, "mine-1.2.3.dist-info", "METADATA"), []byte("Name: mine\nVersion: 1.2.3\n\n"), 0o644)

	code := "import subprocess, sys\n" +
		"subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'])\n" +
		"print('ready', flush=True)\nsys.stdin.read()\n"
	cmd := exec.Command("/usr/bin/python3", "-c", code)
	cmd.Env = []string{"PYTHONPATH=" + site, "PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close() // the child reads the same stdin: it ends with the test
	defer cmd.Process.Kill()
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "ready\n" {
		t.Fatalf("python3: %q", l)
	}
	go segvWhenTraced(cmd.Process)
	outDir := filepath.Join(dir, "out")
	r := runKcrash(t, 60*time.Second, nil, "attach", "--pid", fmt.Sprint(cmd.Process.Pid), "--out", outDir, "--collectors", "software")
	m, _ := filepath.Glob(filepath.Join(outDir, "kcrash-*.tar.gz"))
	if len(m) != 1 {
		t.Fatalf("exit %d, %d bundles: %s", r.code, len(m), r.stderr)
	}
	b, err := bundle.Open(m[0])
	if err != nil {
		t.Fatal(err)
	}
	sw, _ := b.File("software.json")
	if !bytes.Contains(sw, []byte(`"name": "mine"`)) {
		t.Errorf("software.json lacks the user's own package:\n%s", sw)
	}
	for _, n := range b.Names() {
		if f, _ := b.File(n); bytes.Contains(f, []byte(secret)) {
			t.Errorf("%s holds the root-only file", n)
		}
	}
}
