package software

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"

	"github.com/kcrash/kcrash/internal/readas"
)

// Every file the readers open was written by someone else, most by the
// job's user: each is opened through internal/readas (without blocking, a
// regular file only, with the process's user's rights when the caller runs
// the reader under readas.Do) and read with a bound fixed before the read.
const (
	maxHead       = 4 << 10  // one-line files: git HEAD and refs, version files
	maxMetaHead   = 8 << 10  // METADATA and PKG-INFO: their headers
	maxSmall      = 64 << 10 // direct_url.json, .pth, .egg-link, an editable finder, torch/version.py
	maxConfig     = 1 << 20  // .git/config, CUDA's version.json
	maxPackedRefs = 64 << 20 // scanned a line at a time
	maxEnviron    = 4 << 20
	maxMaps       = 256 << 20 // /proc/PID/maps: 65530 mappings (the default limit) are ~10 MB
	maxDirEntries = 200000    // a site directory or a checkout's directory
)

// follow: a Python path is full of links (lib64 -> lib, Nix, Spack, a
// linked METADATA); read with the user's rights, where one leads is the
// kernel's to allow.
var follow = readas.Opts{Follow: true}

func (r Roots) readHead(path string, n int64) ([]byte, error) {
	b, err := readas.ReadHead(path, n, follow)
	r.log.add(path, err)
	return b, err
}

func (r Roots) readSmall(path string, max int64) ([]byte, error) {
	b, err := readas.ReadFile(path, max, follow)
	r.log.add(path, err)
	return b, err
}

func (r Roots) openFile(path string) (*os.File, error) {
	f, err := readas.Open(path, follow)
	r.log.add(path, err)
	return f, err
}

// readDir lists a directory by name, as os.ReadDir does, without blocking
// on a FIFO in its place and with at most maxDirEntries entries.
func (r Roots) readDir(path string) ([]os.DirEntry, error) {
	ents, err := readas.ReadDir(path, maxDirEntries)
	if !errors.Is(err, syscall.ENOTDIR) { // a zip on the path, a file named like a checkout
		r.log.add(path, err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return ents, err
}

// readTrim is a one-line file's text (its first 4 KiB), "" when it cannot be read.
func (r Roots) readTrim(p string) string {
	b, _ := r.readHead(p, maxHead)
	return strings.TrimSpace(string(b))
}

// readLog keeps what the readers of one interpreter's path would not or
// could not read, for the report's notes: a short report is then not
// mistaken for a small stack, and a refused link is seen as one.
type readLog struct {
	n     int
	first []string
}

const loggedFiles = 5

func (l *readLog) add(path string, err error) {
	if l == nil || err == nil || errors.Is(err, fs.ErrNotExist) {
		return
	}
	var why string
	var ref *readas.RefusedError
	switch {
	case errors.As(err, &ref):
		why = ref.Why
	case errors.Is(err, fs.ErrPermission):
		why = "its user may not read it"
	case errors.Is(err, readas.ErrTooLarge):
		why = "too large"
	default:
		return
	}
	l.n++
	if len(l.first) < loggedFiles {
		l.first = append(l.first, path+" ("+why+")")
	}
}

// note is the log as one line, "" when nothing was left unread.
func (l *readLog) note(whose string) string {
	if l == nil || l.n == 0 {
		return ""
	}
	s := fmt.Sprintf("%s: %d file%s on the Python path not read: %s", whose, l.n, plural(l.n), strings.Join(l.first, "; "))
	if l.n > len(l.first) {
		s += fmt.Sprintf("; and %d more", l.n-len(l.first))
	}
	return s
}
