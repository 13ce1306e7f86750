package acl

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kcrash/kcrash/internal/testenv"
)

// A root-only file in a root-only directory, granted to one real user:
// that user reads it, another user does not, and the mode's own bits stay.
func TestGrantUserReadsAndOthersDoNot(t *testing.T) {
	testenv.NeedRoot(t, "files owned by root read as unprivileged users")
	if _, err := exec.LookPath("setpriv"); err != nil {
		testenv.Skip(t, "no setpriv: %v", err)
	}
	uidA, _ := testenv.User(t, "kcrash-agent-a")
	testenv.User(t, "kcrash-agent-b")
	base, err := os.MkdirTemp("", "kcrash-acl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "out")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "bundle.tar.gz")
	if err := os.WriteFile(file, []byte("evidence\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	read := func(user string) bool {
		return exec.Command("setpriv", "--reuid", user, "--regid", user, "--clear-groups", "cat", file).Run() == nil
	}
	if read("kcrash-agent-a") {
		t.Fatal("the user reads the file before the grant: the test proves nothing")
	}
	if err := GrantUser(dir, uidA, Execute); err != nil {
		testenv.Skip(t, "no ACLs on %s: %v", dir, err)
	}
	if err := GrantUser(file, uidA, Read); err != nil {
		t.Fatal(err)
	}
	if !read("kcrash-agent-a") {
		t.Error("the granted user cannot read the file")
	}
	if read("kcrash-agent-b") {
		t.Error("another user reads the file")
	}
	fi, _ := os.Stat(file)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	if err := exec.Command("setpriv", "--reuid", "kcrash-agent-a", "--regid", "kcrash-agent-a", "--clear-groups", "ls", dir).Run(); err == nil {
		t.Error("the user lists the directory: only passing through it was granted")
	}
}
