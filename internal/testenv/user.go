package testenv

import (
	"os/exec"
	"os/user"
	"strconv"
	"testing"
)

// User returns the uid and gid of the unprivileged system user name,
// creating it (no home, no login shell) when it is missing. The user is
// left for the next run: creating and deleting users races with other
// tests reading the user database. It needs root.
func User(t testing.TB, name string) (uid, gid int) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		MutateHost(t, "creates the unprivileged test user "+name)
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if err != nil {
			// Another test process may have created it meanwhile.
			if u, err2 := user.Lookup(name); err2 == nil {
				return ids(t, u)
			}
			t.Fatalf("useradd %s: %v: %s", name, err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	return ids(t, u)
}

func ids(t testing.TB, u *user.User) (int, int) {
	t.Helper()
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		t.Fatalf("user %s: uid %q gid %q", u.Username, u.Uid, u.Gid)
	}
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
