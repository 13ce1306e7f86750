package software

import (
	"os"
	"sort"

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

func readHead(path string, n int64) ([]byte, error) { return readas.ReadHead(path, n, follow) }

func readSmall(path string, max int64) ([]byte, error) { return readas.ReadFile(path, max, follow) }

func openFile(path string) (*os.File, error) { return readas.Open(path, follow) }

// readDir lists a directory by name, as os.ReadDir does, without blocking
// on a FIFO in its place and with at most maxDirEntries entries.
func readDir(path string) ([]os.DirEntry, error) {
	ents, err := readas.ReadDir(path, maxDirEntries)
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return ents, err
}
