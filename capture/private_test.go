package capture

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/internal/testenv"
)

// TestSecureOutDir: the epilog's directory is created 0750, and refused when
// it, or a directory above it, is another user's, writable by others, or a
// symlink a user could have planted.
func TestSecureOutDir(t *testing.T) {
	testenv.NeedRoot(t, "directories owned by another user")
	base := t.TempDir()
	fresh := filepath.Join(base, "kcrash")
	got, err := SecureOutDir(fresh)
	if err != nil || got != fresh {
		t.Fatalf("fresh: %q %v", got, err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o750 {
		t.Errorf("created %v, want 0750", fi.Mode())
	}
	if _, err := SecureOutDir(fresh); err != nil {
		t.Errorf("again: %v", err)
	}
	// Missing parents are made too, 0750; a root-owned symlink above is resolved.
	deep := filepath.Join(base, "a", "b", "kcrash")
	if got, err := SecureOutDir(deep); err != nil || got != deep {
		t.Errorf("deep: %q %v", got, err)
	}
	if fi, _ := os.Stat(filepath.Join(base, "a")); fi == nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("parent made %v, want 0750", fi)
	}
	os.Symlink(filepath.Join(base, "a"), filepath.Join(base, "alias"))
	if got, err := SecureOutDir(filepath.Join(base, "alias", "b", "kcrash")); err != nil || got != deep {
		t.Errorf("through root's symlink: %q %v", got, err)
	}
	// A system group may write a directory above (Ubuntu's root:syslog 0775 /var/log).
	sys := filepath.Join(base, "syslog")
	os.Mkdir(sys, 0o775)
	os.Chmod(sys, 0o775)
	os.Chown(sys, 0, 4)
	if _, err := SecureOutDir(filepath.Join(sys, "kcrash")); err != nil {
		t.Errorf("below a system group's directory: %v", err)
	}

	userDir := filepath.Join(base, "user")
	os.Mkdir(userDir, 0o755)
	os.Chown(userDir, 65534, 65534)
	target := filepath.Join(base, "target")
	os.Mkdir(target, 0o750)
	link := filepath.Join(base, "planted")
	os.Symlink(target, link)
	wide := filepath.Join(base, "wide")
	os.Mkdir(wide, 0o777)
	os.Chmod(wide, 0o777)
	userGroup := filepath.Join(base, "usergroup")
	os.Mkdir(userGroup, 0o775)
	os.Chmod(userGroup, 0o775)
	os.Chown(userGroup, 0, 4242)
	for _, tc := range []struct{ dir, why string }{
		{userDir, "owned by uid 65534"},                          // the user's own directory
		{filepath.Join(userDir, "kcrash"), "owned by uid 65534"}, // below a directory the user can change
		{link, "symlink"},
		{wide, "mode 0777"},
		{filepath.Join(wide, "kcrash"), "mode 0777"},              // below a world-writable directory
		{filepath.Join(userGroup, "kcrash"), "mode 0775"},         // below a directory a users' group may change
		{filepath.Join(userDir, "x", "y", "kcrash"), "uid 65534"}, // missing parts below the user's directory
	} {
		if _, err := SecureOutDir(tc.dir); err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want refused (%s)", tc.dir, err, tc.why)
		}
	}
	if _, err := os.Stat(filepath.Join(userDir, "kcrash")); err == nil {
		t.Errorf("created a directory below the user's")
	}
}

// TestPrivateTargetPublish: the bundle ends 0640 in out, with out's group,
// and no private directory is left behind.
func TestPrivateTargetPublish(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	pt, err := newPrivateTarget(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(pt.stage); fi.Mode().Perm() != 0o700 {
		t.Errorf("stage %v", fi.Mode())
	}
	p := filepath.Join(pt.stage, "kcrash-x.tar.gz")
	os.WriteFile(p, []byte("b"), 0o644)
	os.WriteFile(filepath.Join(out, "kcrash-x.tar.gz"), []byte("older"), 0o640)
	final, err := pt.publish(p)
	if err != nil || final != filepath.Join(out, "kcrash-x-2.tar.gz") {
		t.Fatalf("publish: %q %v", final, err)
	}
	if fi, _ := os.Stat(final); fi.Mode().Perm() != PrivateBundleMode {
		t.Errorf("bundle %v", fi.Mode())
	}
	if b, _ := os.ReadFile(filepath.Join(out, "kcrash-x.tar.gz")); string(b) != "older" {
		t.Errorf("the older bundle was replaced")
	}
	left, _ := filepath.Glob(filepath.Join(out, ".kcrash-private-*"))
	if _, err := os.Stat(pt.fallback); len(left) > 0 || err == nil {
		t.Errorf("left behind: %v %s", left, pt.fallback)
	}
}

// TestPrivateTargetUnwritableOut: an out kcrash cannot use sends the bundle
// to the private fallback directory, where it stays, 0640 in a 0700 directory.
func TestPrivateTargetUnwritableOut(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o644)
	pt, err := newPrivateTarget(notDir)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(pt.fallback)
	if pt.stage != pt.fallback {
		t.Fatalf("stage %s, want the fallback %s", pt.stage, pt.fallback)
	}
	p := filepath.Join(pt.stage, "kcrash-y.tar.gz")
	os.WriteFile(p, []byte("b"), 0o644)
	final, err := pt.publish(p)
	if err != nil || final != p {
		t.Fatalf("publish: %q %v", final, err)
	}
	fi, _ := os.Stat(final)
	di, _ := os.Stat(pt.fallback)
	if fi.Mode().Perm() != PrivateBundleMode || di.Mode().Perm() != 0o700 {
		t.Errorf("bundle %v in %v", fi.Mode(), di.Mode())
	}
}

// A symlink a user planted is never followed with root's rights, wherever
// it is on the path: below the user's own directory (pointing to a root-only
// directory, where root would create kcrash/ and write), or in a sticky
// world-writable directory. Root's own symlinks still are.
func TestSecureOutDirUserSymlinks(t *testing.T) {
	const name = "kcrash-test-user"
	uid, gid := testenv.User(t, name)
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755) // t.TempDir makes its parent 0700
	os.Chmod(base, 0o755)
	// what a planted link points at: a directory only root may write
	rootOnly := filepath.Join(base, "rootonly")
	os.Mkdir(rootOnly, 0o755)
	userDir := filepath.Join(base, "home")
	os.Mkdir(userDir, 0o755)
	os.Chown(userDir, uid, gid)
	sticky := filepath.Join(base, "sticky")
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	testenv.AsUser(t, name, "ln", "-s", rootOnly, filepath.Join(userDir, "link"))
	testenv.AsUser(t, name, "ln", "-s", rootOnly, filepath.Join(sticky, "ulink"))
	testenv.AsUser(t, name, "ln", "-s", "../rootonly", filepath.Join(sticky, "rel"))
	for _, tc := range []struct{ dir, why string }{
		{filepath.Join(userDir, "link", "kcrash"), "uid " + strconv.Itoa(uid)},
		{filepath.Join(userDir, "link", "a", "b"), "uid " + strconv.Itoa(uid)},
		{filepath.Join(sticky, "ulink", "kcrash"), "symlink owned by uid " + strconv.Itoa(uid)},
		{filepath.Join(sticky, "rel", "kcrash"), "symlink owned by uid " + strconv.Itoa(uid)},
		{filepath.Join(sticky, "ulink"), "symlink"},
	} {
		got, err := SecureOutDir(tc.dir)
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %q %v, want refused (%s)", tc.dir, got, err, tc.why)
		}
	}
	if ents, _ := os.ReadDir(rootOnly); len(ents) > 0 {
		t.Errorf("created in the root-only directory through a user's link: %v", ents)
	}
	// root's own link in the sticky directory, relative and through "..", is followed
	os.Symlink("../rootonly", filepath.Join(sticky, "admin"))
	if got, err := SecureOutDir(filepath.Join(sticky, "admin", "kcrash")); err != nil || got != filepath.Join(rootOnly, "kcrash") {
		t.Errorf("through root's link: %q %v", got, err)
	}
}
