package main

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

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/capture"
	"github.com/kcrash/kcrash/internal/testenv"
)

// TestAttachPidRootReadsKernelAPIAsTarget: root attached to an unprivileged
// process reads the kernel-API logs its environment names with that
// process's rights: a log the process swapped for a symlink to a root-only
// file stays out of the bundle, its own log is in.
func TestAttachPidRootReadsKernelAPIAsTarget(t *testing.T) {
	testenv.NeedRoot(t, "attaching as root to another user's process")
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	secret := fmt.Sprintf("KCRASH-TEST-ROOT-SECRET-%d", time.Now().UnixNano())
	secretFile := filepath.Join(dir, "root-only.txt")
	os.WriteFile(secretFile, []byte(secret+"\n"), 0o600)
	logs := filepath.Join(dir, "logs")
	os.Mkdir(logs, 0o755)
	os.Chown(logs, 65534, 65534)
	own := filepath.Join(logs, "kapi_1.log")
	os.WriteFile(own, []byte("own-api-line\n"), 0o600)
	os.Chown(own, 65534, 65534)
	os.Symlink(secretFile, filepath.Join(logs, "kapi_2.log"))
	// A directory only root may list: the job names it, root must not list it for the job.
	hidden := filepath.Join(dir, "root-only-dir")
	os.Mkdir(hidden, 0o700)
	os.WriteFile(filepath.Join(hidden, "kapi_3.log"), []byte(secret+"\n"), 0o644)

	cmd := exec.Command("sleep", "120")
	cmd.Env = []string{"SGLANG_KERNEL_API_LOGDEST=" + filepath.Join(logs, "kapi_%i.log"), "FLASHINFER_LOGDEST=" + filepath.Join(hidden, "kapi_%i.log")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	go segvWhenTraced(cmd.Process)
	out := filepath.Join(dir, "out")
	r := runKcrash(t, 60*time.Second, nil, "attach", "--pid", fmt.Sprint(cmd.Process.Pid), "--out", out, "--collectors", "kernel-api")
	m, _ := filepath.Glob(filepath.Join(out, "kcrash-*.tar.gz"))
	if len(m) != 1 {
		t.Fatalf("exit %d, %d bundles: %s", r.code, len(m), r.stderr)
	}
	if fi, err := os.Stat(m[0]); err != nil || fi.Mode().Perm() != capture.PrivateBundleMode {
		t.Errorf("bundle of another user's process: mode %v %v, want %v", fi.Mode(), err, os.FileMode(capture.PrivateBundleMode))
	}
	b, err := bundle.Open(m[0])
	if err != nil {
		t.Fatal(err)
	}
	kapi, _ := b.File("kernel-api.log")
	if !bytes.Contains(kapi, []byte("own-api-line")) || !bytes.Contains(kapi, []byte("refused: it is a symlink")) {
		t.Errorf("kernel-api.log: %q", kapi)
	}
	for _, n := range b.Names() {
		if f, _ := b.File(n); bytes.Contains(f, []byte(secret)) || bytes.Contains(f, []byte("kapi_3.log")) {
			t.Errorf("%s holds the root-only file or the names in a root-only directory", n)
		}
	}
}

// segvWhenTraced kills p with SIGSEGV once a tracer (kcrash attach) is on
// it, or after 30 s. Run it as a goroutine of its own: it never fails the
// test, which sees the outcome in kcrash's bundle.
func segvWhenTraced(p *os.Process) {
	status := fmt.Sprintf("/proc/%d/status", p.Pid)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(status)
		if strings.Contains(string(b), "TracerPid:\t") && !strings.Contains(string(b), "TracerPid:\t0\n") {
			break
		}
	}
	p.Signal(syscall.SIGSEGV)
}
