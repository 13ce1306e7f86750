// Package readas reads files on a job's behalf: with the job's user's
// rights when kcrash is root (the Slurm epilog, an operator's `attach`),
// without blocking (O_NONBLOCK: a FIFO with no writer), regular files only,
// and bounded before a byte is read. Every reader of a file a job chose or
// can write goes through it: the collectors' kernel-API and Slurm logs, the
// software collector's Python metadata, git files and mapped libraries.
package readas

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"runtime"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// Identity is whose rights a read on behalf of a job uses: the job's user.
// Root reads a job's files as that user, so a job cannot make root copy
// into a bundle what the job's user could not read: a symlink to a
// root-only file, another user's file.
type Identity struct {
	UID    int
	GID    int
	Groups []int  // supplementary groups (the primary one included)
	Name   string // for notes; may be empty
}

func (id *Identity) String() string {
	if id.Name != "" {
		return fmt.Sprintf("%s (uid %d)", id.Name, id.UID)
	}
	return fmt.Sprintf("uid %d", id.UID)
}

// Nobody is the identity for a job whose user is not known: its reads get
// no rights beyond what every user has.
func Nobody() *Identity {
	return &Identity{UID: 65534, GID: 65534, Groups: []int{65534}, Name: "unknown (nobody's rights)"}
}

// LookupIdentity builds the identity of uid with primary group gid (-1:
// the passwd entry's). Supplementary groups come from the group database
// kcrash can read (/etc/group in a static build): a group it cannot see is
// left out, which can only refuse a read, never allow one.
func LookupIdentity(uid, gid int) *Identity {
	id := &Identity{UID: uid, GID: gid}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		id.Name = u.Username
		if id.GID < 0 {
			id.GID, _ = strconv.Atoi(u.Gid)
		}
		if gs, err := u.GroupIds(); err == nil {
			for _, g := range gs {
				if n, err := strconv.Atoi(g); err == nil {
					id.Groups = append(id.Groups, n)
				}
			}
		}
	}
	if id.GID < 0 {
		id.GID = uid // no passwd entry and no gid given: no group rights beyond the user's own number
	}
	id.Groups = append(id.Groups, id.GID)
	sort.Ints(id.Groups)
	out := id.Groups[:0]
	for i, g := range id.Groups {
		if i == 0 || g != id.Groups[i-1] {
			out = append(out, g)
		}
	}
	id.Groups = out
	return id
}

// RefusedError is a file kcrash would not read on a job's behalf, and why.
type RefusedError struct {
	Path string
	Why  string
}

func (e *RefusedError) Error() string { return "refused: " + e.Why }

// ErrTooLarge is a file over the size a reader takes.
var ErrTooLarge = errors.New("larger than kcrash reads")

// OpenAs opens path for reading with id's rights (kcrash's own when id is
// nil or kcrash is not root), the way a job's output file must be opened:
//   - the permission checks of every path component and of the file itself
//     are the kernel's, made with id's filesystem uid, gid and groups (Do),
//     so root's override rights play no part;
//   - a final symlink is not followed (O_NOFOLLOW), /proc magic links are not
//     crossed (openat2 RESOLVE_NO_MAGICLINKS where the kernel has it);
//   - the open does not block (O_NONBLOCK: a FIFO with no writer), and only a
//     regular file is accepted, checked before the open (a device is never
//     opened) and with fstat on the opened descriptor (what is read).
//
// A refusal is a *RefusedError saying why.
func OpenAs(id *Identity, path string) (*os.File, error) {
	var f *os.File
	err := Do(id, func() (err error) {
		f, err = Open(path, Opts{})
		return denied(path, id, err)
	})
	return f, err
}

// Opts are an Open's choices beyond OpenAs's rules.
type Opts struct {
	// Follow follows a final symlink. Reading with the job's user's rights
	// (Do), the kernel still checks that user's rights wherever it leads: a
	// Python path of links (Nix, Spack, a linked METADATA) reads as it
	// would for the user.
	Follow bool
	// MagicLinks crosses /proc magic links: /proc/PID/map_files, which
	// only kcrash's own (root's) reads of the kernel's handles use.
	MagicLinks bool
}

// Open opens path with the calling thread's rights (inside Do: the job's
// user's) under OpenAs's rules, relaxed by o.
func Open(path string, o Opts) (*os.File, error) {
	fd, err := openRegular(path, o)
	if err != nil {
		return nil, denied(path, nil, err)
	}
	// Reads of a regular file never block: back to a plain blocking fd, so
	// that os.File does not hand it to the poller.
	unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), path), nil
}

// ReadHead returns the first n bytes of a regular file (all of a shorter one).
func ReadHead(path string, n int64, o Opts) ([]byte, error) {
	f, err := Open(path, o)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// ReadFile returns a regular file whole when it holds at most max bytes,
// else ErrTooLarge; the size is checked before the read and the read is
// bounded (a /proc or /sys file says size 0).
func ReadFile(path string, max int64, o Opts) ([]byte, error) {
	f, err := Open(path, o)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if st.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes: %w (%d)", path, st.Size(), ErrTooLarge, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w (%d)", path, ErrTooLarge, max)
	}
	return b, err
}

// ReadDir lists a directory (a final symlink followed, as a path's
// directories are) without blocking on a FIFO in its place, at most max
// entries (unsorted: in the directory's order); more is ErrTooLarge with
// the first max.
func ReadDir(path string, max int) ([]os.DirEntry, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	unix.SetNonblock(fd, false)
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var out []os.DirEntry
	for len(out) < max {
		ents, err := f.ReadDir(min(max-len(out), 1024))
		out = append(out, ents...)
		if err == io.EOF || len(ents) == 0 {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
	if more, _ := f.ReadDir(1); len(more) > 0 {
		return out, fmt.Errorf("%s: over %d entries: %w", path, max, ErrTooLarge)
	}
	return out, nil
}

// Do runs fn with id's filesystem rights: on an OS thread of its own when
// kcrash is root and id another user, else on the caller's. The thread is
// locked and never unlocked: Go ends a thread whose goroutine exits while
// locked, so no other goroutine ever runs with these credentials, and fn
// itself cannot run with root's. fn must not start goroutines that read
// (they would run with root's rights).
func Do(id *Identity, fn func() error) error {
	if !switches(id) {
		return fn()
	}
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := switchFS(id); err != nil {
			ch <- fmt.Errorf("cannot take %s's rights: %v", id, err)
			return
		}
		ch <- fn()
	}()
	return <-ch
}

// Switches says whether reading as id means switching identity: only root
// reading for another user does.
func Switches(id *Identity) bool { return switches(id) }

func switches(id *Identity) bool { return id != nil && os.Geteuid() == 0 && id.UID != 0 }

// openRegular opens path with the calling thread's rights.
func openRegular(path string, o Opts) (int, error) {
	var st unix.Stat_t
	stat := unix.Lstat
	if o.Follow {
		stat = unix.Stat
	}
	if err := stat(path, &st); err != nil {
		return -1, err
	}
	if why := notRegular(st.Mode); why != "" {
		return -1, &RefusedError{path, why}
	}
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	if !o.Follow {
		flags |= unix.O_NOFOLLOW
	}
	var resolve uint64 = unix.RESOLVE_NO_MAGICLINKS
	if o.MagicLinks {
		resolve = 0
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: uint64(flags), Resolve: resolve})
	if errors.Is(err, unix.ENOSYS) {
		// Kernels before 5.6 (or a seccomp filter) lack openat2.
		fd, err = unix.Openat(unix.AT_FDCWD, path, flags, 0)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) && !o.Follow {
			return -1, &RefusedError{path, "it is a symlink (not followed on the job's behalf)"}
		}
		if errors.Is(err, unix.ENXIO) {
			return -1, &RefusedError{path, "not a regular file"}
		}
		return -1, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if why := notRegular(st.Mode); why != "" {
		unix.Close(fd)
		return -1, &RefusedError{path, why}
	}
	return fd, nil
}

// denied turns what openRegular returned into the error Open gives: a
// permission error while reading as id is a refusal naming the user.
func denied(path string, id *Identity, err error) error {
	var r *RefusedError
	switch {
	case err == nil, errors.As(err, &r):
		return err
	case switches(id) && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)):
		var errno unix.Errno
		errors.As(err, &errno) // the bare reason: the path is the caller's to say
		return &RefusedError{path, fmt.Sprintf("the job's user %s may not read it (%v)", id, errno)}
	}
	if errno, ok := err.(unix.Errno); ok {
		return &os.PathError{Op: "open", Path: path, Err: errno}
	}
	return err
}

func notRegular(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return ""
	case unix.S_IFLNK:
		return "it is a symlink (not followed on the job's behalf)"
	case unix.S_IFIFO:
		return "it is a FIFO, not a regular file"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "it is a device, not a regular file"
	case unix.S_IFSOCK:
		return "it is a socket, not a regular file"
	case unix.S_IFDIR:
		return "it is a directory, not a regular file"
	}
	return "not a regular file"
}

// switchFS gives the calling (locked) thread id's filesystem identity. The
// raw setgroups/setfsgid/setfsuid calls of x/sys/unix act on this thread
// only (unlike syscall.Setgroups, which changes every thread). Moving the
// fsuid away from 0 also drops the thread's filesystem capabilities
// (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER...).
func switchFS(id *Identity) error {
	groups := id.Groups
	if len(groups) == 0 {
		groups = []int{id.GID}
	}
	if err := unix.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %v", err)
	}
	if _, err := unix.SetfsgidRetGid(id.GID); err != nil {
		return fmt.Errorf("setfsgid: %v", err)
	}
	if _, err := unix.SetfsuidRetUid(id.UID); err != nil {
		return fmt.Errorf("setfsuid: %v", err)
	}
	// setfsuid reports no failure: ask again (-1 changes nothing and returns the current value).
	if cur, _ := unix.SetfsuidRetUid(-1); cur != id.UID {
		return fmt.Errorf("setfsuid(%d) left fsuid %d", id.UID, cur)
	}
	if cur, _ := unix.SetfsgidRetGid(-1); cur != id.GID {
		return fmt.Errorf("setfsgid(%d) left fsgid %d", id.GID, cur)
	}
	return nil
}
