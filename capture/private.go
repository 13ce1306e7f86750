package capture

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Bundles root writes from a user's job hold that job's output: they are
// never world-readable (0640, group of the directory they are in, so a site
// can give a support group the directory), and the epilog's directory is
// one no user can redirect.

// PrivateBundleMode is the mode of a bundle root writes for a job.
const PrivateBundleMode = 0o640

// SecureOutDir returns the directory the epilog writes into: dir with its
// missing part created 0750, reached from / one component at a time
// (openat, O_NOFOLLOW), each directory on the way checked to be one no
// job's user can change. Each directory on the way is owned by root (or
// kcrash's own user) and is not world-writable unless sticky (like /tmp,
// where only an entry's owner may replace it), nor group-writable unless
// sticky or the group is a system group (gid < 1000, Ubuntu's root:syslog
// 0775 /var/log). The directory itself is owned that way and writable by no
// one else. A symlink on the way is followed only when root (or kcrash's
// user) owns it, in such a directory (an admin's /scratch -> /gpfs/scratch);
// one a user planted, in their own directory or a sticky one, is refused,
// and so is a symlink as dir itself.
func SecureOutDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if abs == "/" {
		return "", fmt.Errorf("%s: not a directory to write bundles into", dir)
	}
	fd, at, err := -1, "/", error(nil)
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	todo := strings.Split(strings.Trim(abs, "/"), "/")
	for hops := 0; ; {
		if fd < 0 {
			if fd, err = unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				return "", err
			}
			at = "/"
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return "", err
		}
		if len(todo) == 0 {
			if !trustedOwner(st.Uid) || st.Mode&0o022 != 0 {
				return "", fmt.Errorf("%s is owned by uid %d with mode %04o: bundles of other users' jobs go only into a directory root owns and no one else can write", at, st.Uid, st.Mode&0o7777)
			}
			return at, nil
		}
		if !safeAncestor(&st) {
			return "", fmt.Errorf("%s is owned by uid %d with mode %04o: another user could redirect what is written below it", at, st.Uid, st.Mode&0o7777)
		}
		name := todo[0]
		todo = todo[1:]
		if name == "" || name == "." {
			continue
		}
		next := filepath.Join(at, name)
		if name == ".." {
			// at holds no symlink (each was resolved on the way): its parent is
			// lexical; walk to it from / again, checking every step
			unix.Close(fd)
			fd = -1
			todo = append(strings.Split(strings.Trim(filepath.Dir(at), "/"), "/"), todo...)
			continue
		}
		var lst unix.Stat_t
		err := unix.Fstatat(fd, name, &lst, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case err == unix.ENOENT:
			if err := unix.Mkdirat(fd, name, 0o750); err != nil && err != unix.EEXIST {
				return "", fmt.Errorf("mkdir %s: %v", next, err)
			}
		case err != nil:
			return "", fmt.Errorf("%s: %v", next, err)
		case lst.Mode&unix.S_IFMT == unix.S_IFLNK:
			if len(todo) == 0 {
				return "", fmt.Errorf("%s is not a directory (a symlink): refused", next)
			}
			if !trustedOwner(lst.Uid) {
				return "", fmt.Errorf("%s is a symlink owned by uid %d: not followed with root's rights", next, lst.Uid)
			}
			if hops++; hops > 40 {
				return "", fmt.Errorf("%s: too many symlinks", abs)
			}
			target, err := readlinkat(fd, name)
			if err != nil {
				return "", fmt.Errorf("%s: %v", next, err)
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(at, target)
			}
			unix.Close(fd)
			fd = -1
			todo = append(strings.Split(strings.Trim(target, "/"), "/"), todo...)
			continue
		}
		nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if err == unix.ELOOP || err == unix.ENOTDIR {
				return "", fmt.Errorf("%s is not a directory (a symlink?): refused", next)
			}
			return "", fmt.Errorf("%s: %v", next, err)
		}
		unix.Close(fd)
		fd, at = nfd, next
	}
}

func readlinkat(fd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(fd, name, buf)
	if err != nil {
		return "", err
	}
	if n == len(buf) {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}

// safeAncestor says whether no job's user can replace the entries of a
// directory (see SecureOutDir).
func safeAncestor(st *unix.Stat_t) bool {
	if !trustedOwner(st.Uid) {
		return false
	}
	if st.Mode&unix.S_ISVTX != 0 {
		return true
	}
	return st.Mode&0o002 == 0 && (st.Mode&0o020 == 0 || st.Gid < 1000)
}

func trustedOwner(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }

// privateTarget is where a bundle for a job is written before it is
// published: a 0700 directory inside out (so that the final rename stays on
// one filesystem) and a 0700 fallback directory under the temporary
// directory, for when out is full or unwritable. The bundle package writes
// files 0644; inside these directories nobody but root can open them, and
// publish makes them 0640 before they are moved where others can list them.
type privateTarget struct {
	out      string // where the bundle should end up
	stage    string // <out>/.kcrash-private-*
	fallback string // $TMPDIR/kcrash-fallback-*
}

func newPrivateTarget(out string) (*privateTarget, error) {
	fb, err := os.MkdirTemp("", "kcrash-fallback-")
	if err != nil {
		return nil, err
	}
	pt := &privateTarget{out: out, stage: fb, fallback: fb}
	// An out kcrash cannot write (root squashed on NFS, full) sends the
	// bundle straight to the fallback, which the writer reports.
	if os.MkdirAll(out, 0o750) == nil {
		if stage, err := os.MkdirTemp(out, ".kcrash-private-"); err == nil {
			pt.stage = stage
		}
	}
	return pt, nil
}

// publish gives the written bundle its private mode and the group of its
// final directory, moves it from the private stage into out, and removes
// what is left of the private directories. A bundle that went to the
// fallback stays in its 0700 directory.
func (p *privateTarget) publish(path string) (string, error) {
	defer func() {
		os.Remove(p.stage)
		os.Remove(p.fallback) // only when empty: a fallback bundle keeps it
	}()
	if path == "" {
		return "", nil
	}
	dir := filepath.Dir(path)
	if err := os.Chmod(path, PrivateBundleMode); err != nil {
		return path, err
	}
	if dir != p.stage || p.stage == p.fallback {
		return path, nil
	}
	if fi, err := os.Stat(p.out); err == nil {
		if st, ok := fi.Sys().(*unix.Stat_t); ok {
			os.Chown(path, -1, int(st.Gid))
		}
	}
	// Never over another bundle of the same name: -2, -3... as bundle.place does.
	base := strings.TrimSuffix(filepath.Base(path), ".tar.gz")
	for i := 1; i < 100; i++ {
		final := filepath.Join(p.out, base+".tar.gz")
		if i > 1 {
			final = filepath.Join(p.out, fmt.Sprintf("%s-%d.tar.gz", base, i))
		}
		err := unix.Renameat2(unix.AT_FDCWD, path, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE)
		if err == unix.EINVAL || err == unix.ENOSYS {
			// A filesystem without RENAME_NOREPLACE: link fails rather than replace.
			if err = os.Link(path, final); err == nil {
				os.Remove(path)
			} else if os.IsExist(err) {
				err = unix.EEXIST
			}
		}
		if err == nil {
			return final, nil
		}
		if err != unix.EEXIST {
			return path, err
		}
	}
	return path, fmt.Errorf("no free name for %s in %s", base, p.out)
}

// abandon removes the private directories and anything in them (no bundle
// was written).
func (p *privateTarget) abandon() {
	os.RemoveAll(p.stage)
	os.RemoveAll(p.fallback)
}
