// Package software reads what was running in a process tree without running
// anything: the native libraries each process mapped (/proc/PID/maps, ELF
// build ids), the Python packages on its interpreter's path (dist-info and
// egg-info metadata, editable installs and their git checkouts), and the
// GPU driver and runtime versions of the host. It flags the build problems
// behind many first crashes on a new stack: a stale or replaced extension,
// two copies of one GPU runtime in a process, PyTorch built for another
// CUDA or ROCm than the host has.
package software

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
)

// Mapping is one line of /proc/PID/maps that maps a file.
type Mapping struct {
	Start, End uint64
	Perms      string
	Offset     uint64
	Dev        string // "fd:01"
	Inode      uint64
	Path       string
	Deleted    bool // the kernel appended " (deleted)": the file was unlinked (replaced) after it was mapped
}

// Exec says whether the mapping holds code.
func (m Mapping) Exec() bool { return strings.IndexByte(m.Perms, 'x') >= 0 }

// ParseMaps reads /proc/PID/maps and returns the file-backed mappings
// (anonymous memory, [heap], [stack], memfd: and the like are left out).
// A malformed line is skipped.
func ParseMaps(r io.Reader) []Mapping {
	var out []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if m, ok := parseMapsLine(sc.Bytes()); ok {
			out = append(out, m)
		}
	}
	return out
}

// parseMapsLine parses "start-end perms offset dev inode    path".
func parseMapsLine(line []byte) (Mapping, bool) {
	var m Mapping
	var f [5][]byte
	rest := line
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		j := bytes.IndexByte(rest, ' ')
		if j < 0 {
			return m, false
		}
		f[i], rest = rest[:j], rest[j+1:]
	}
	path := string(bytes.TrimLeft(rest, " "))
	if !strings.HasPrefix(path, "/") {
		return m, false
	}
	lo, hi, ok := strings.Cut(string(f[0]), "-")
	if !ok {
		return m, false
	}
	var err error
	if m.Start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return m, false
	}
	if m.End, err = strconv.ParseUint(hi, 16, 64); err != nil {
		return m, false
	}
	m.Perms = string(f[1])
	if m.Offset, err = strconv.ParseUint(string(f[2]), 16, 64); err != nil {
		return m, false
	}
	m.Dev = string(f[3])
	if m.Inode, err = strconv.ParseUint(string(f[4]), 10, 64); err != nil {
		return m, false
	}
	if p, ok := strings.CutSuffix(path, " (deleted)"); ok {
		path, m.Deleted = p, true
	}
	m.Path = path
	return m, true
}
