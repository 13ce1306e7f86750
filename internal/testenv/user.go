package testenv

import (
	"os/exec"
	"os/user"
	"strconv"
	"testing"
)

// User returns the uid and gid of the unprivileged system user name,
// creating it (no home, no login shell) when missing; it is left for the
// next run. Needs root.
func User(t testing.TB, name string) (uid, gid int) {
	t.Helper()
	NeedRoot(t, "an unprivileged user "+name)
	u, err := user.Lookup(name)
	if err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			Skip(t, "useradd %s: %v %s", name, err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// AsUser runs argv as the user (setpriv, no supplementary groups) and
// returns its combined output; a failure fails the test.
func AsUser(t testing.TB, name string, argv ...string) string {
	t.Helper()
	args := append([]string{"--reuid", name, "--regid", name, "--clear-groups", "--"}, argv...)
	out, err := exec.Command("setpriv", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("as %s: %v: %v\n%s", name, argv, err, out)
	}
	return string(out)
}
