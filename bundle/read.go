package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/visible"
)

// Limits on what a bundle may hold. A bundle is read by people who did not
// make it: a 3 MB file may claim a 3 GiB entry, or decompress without end.
// Anything beyond these is refused with one line, never read into memory.
const (
	MaxEntry    = 1 << 30  // one file inside a bundle (the writer cuts to this too)
	MaxTotal    = 8 << 30  // all files together, uncompressed
	MaxManifest = 16 << 20 // manifest.json
	maxKeepFile = 8 << 20  // a file larger than this is streamed, not kept for File
	maxKeepAll  = 16 << 20 // all kept files together (report and diff keep their own)
	// Every entry's name is kept (Names, the list); a tar lets a name be
	// 1 MiB and the entries be millions, so both are capped far above what
	// kcrash writes (names under 200 bytes, a few hundred files).
	MaxName    = 1024 // bytes of one entry's name, its top directory included
	MaxEntries = 4096 // entries of any type in one archive
)

// Bundle is a bundle read back from its tar.gz. Memory stays bounded: the
// manifest and the small files are kept (File), larger ones only streamed
// past OpenFunc's visit.
type Bundle struct {
	Path     string
	Dir      string // the top directory inside the archive
	Manifest Manifest
	files    map[string][]byte
	names    []string
}

// Open reads a bundle file, verifying it to its end (gzip checksum included).
func Open(p string) (*Bundle, error) { return OpenFunc(p, nil) }

// OpenManifest reads and verifies a bundle keeping only its manifest
// (File("manifest.json")): what a reader of the manifest alone uses.
func OpenManifest(p string) (*Bundle, error) { return open(p, nil, false) }

// Scan is OpenFunc keeping only the manifest (File("manifest.json")): the
// visit keeps what it needs of the other files.
func Scan(p string, visit func(name string, r io.Reader) error) (*Bundle, error) {
	return open(p, visit, false)
}

// OpenFunc is Open that also passes every file's content to visit (when
// non-nil), in archive order, whatever its size: what a scan of the whole
// bundle uses without holding it in memory.
func OpenFunc(p string, visit func(name string, r io.Reader) error) (*Bundle, error) {
	return open(p, visit, true)
}

func open(p string, visit func(name string, r io.Reader) error, keepSmall bool) (*Bundle, error) {
	f, err := OpenRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, p, visit, keepSmall)
}

// ReadFunc is OpenFunc over a stream already open (a bundle inside a
// tarball of bundles); p names it in errors and in Bundle.Path.
func ReadFunc(f io.Reader, p string, visit func(name string, r io.Reader) error) (*Bundle, error) {
	return read(f, p, visit, true)
}

// read reads a bundle from f, keeping its small files in memory when
// keepSmall (the manifest always).
func read(f io.Reader, p string, visit func(name string, r io.Reader) error, keepSmall bool) (*Bundle, error) {
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: not a kcrash bundle (gzip: %v)", p, err)
	}
	return readTar(gz, tar.NewReader(gz), nil, p, visit, keepSmall)
}

// readTar reads a bundle from tr, a tar inside gz; taken are the headers a
// caller already took from tr, in order (OpenOrArchive looked at them).
func readTar(gz *gzip.Reader, tr *tar.Reader, taken []*tar.Header, p string, visit func(name string, r io.Reader) error, keepSmall bool) (*Bundle, error) {
	b := &Bundle{Path: p, files: map[string][]byte{}}
	seen := map[string]bool{}
	var total, kept int64
	damaged := func(err error) error { return fmt.Errorf("%s: damaged bundle: %v", p, err) }
	for entries := 0; ; entries++ {
		var hdr *tar.Header
		var err error
		if len(taken) > 0 {
			hdr, taken = taken[0], taken[1:]
		} else {
			hdr, err = tr.Next()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, damaged(err)
		}
		if entries == MaxEntries {
			return nil, fmt.Errorf("%s: refusing to read: more than %d entries, more than any kcrash bundle holds", p, MaxEntries)
		}
		if len(hdr.Name) > MaxName {
			return nil, fmt.Errorf("%s: refusing to read: entry %d's name is %s long, longer than any kcrash bundle's (%d bytes): %s...", p, entries+1, human.Bytes(int64(len(hdr.Name))), MaxName, visible.Line(hdr.Name[:64]))
		}
		clean := path.Clean(hdr.Name)
		if clean == "." && hdr.Typeflag == tar.TypeDir {
			continue // "./", the root of an archive made with tar -C DIR .
		}
		dir, name, _ := strings.Cut(clean, "/")
		if strings.HasPrefix(hdr.Name, "/") || dir == ".." || dir == "." || dir == "" || strings.HasPrefix(name, "../") || name == ".." {
			return nil, fmt.Errorf("%s: not a kcrash bundle (entry %q is outside one top directory)", p, hdr.Name)
		}
		if b.Dir == "" {
			b.Dir = dir
		} else if dir != b.Dir {
			return nil, fmt.Errorf("%s: not a kcrash bundle (a second top-level directory %q besides %q)", p, dir, b.Dir)
		}
		if hdr.Typeflag != tar.TypeReg || name == "" {
			continue
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: not a kcrash bundle (%s appears twice)", p, name)
		}
		seen[name] = true
		b.names = append(b.names, name)
		if hdr.Size > MaxEntry || name == "manifest.json" && hdr.Size > MaxManifest {
			lim := int64(MaxEntry)
			if name == "manifest.json" {
				lim = MaxManifest
			}
			return nil, fmt.Errorf("%s: refusing to read: %s claims %s, more than any kcrash bundle holds (%s)", p, name, human.Bytes(hdr.Size), human.Bytes(lim))
		}
		if total += hdr.Size; total > MaxTotal {
			return nil, fmt.Errorf("%s: refusing to read: its files add up to more than %s", p, human.Bytes(MaxTotal))
		}
		var r io.Reader = tr
		var data []byte
		keep := name == "manifest.json" || keepSmall && hdr.Size <= maxKeepFile && kept+hdr.Size <= maxKeepAll
		if keep {
			// its exact size: io.ReadAll would grow a buffer to twice that
			data = make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, data); err != nil {
				return nil, damaged(err)
			}
			b.files[name] = data
			kept += int64(len(data))
			r = bytes.NewReader(data)
		}
		if visit != nil {
			if err := visit(name, r); err != nil {
				return nil, err
			}
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return nil, damaged(err)
		}
	}
	// The tar ends before the gzip stream does: read on to its end, where
	// the checksum is verified (a flipped bit must not read as a bundle).
	if _, err := io.Copy(io.Discard, io.LimitReader(gz, 1<<20)); err != nil {
		return nil, damaged(err)
	}
	if n, _ := io.Copy(io.Discard, io.LimitReader(gz, 1)); n > 0 {
		return nil, damaged(errors.New("data after the end of the archive"))
	}
	mj, ok := b.files["manifest.json"]
	if !ok {
		return nil, fmt.Errorf("%s: not a kcrash bundle (no manifest.json)", p)
	}
	var probe struct {
		SchemaVersion *int `json:"schema_version"`
	}
	if err := json.Unmarshal(mj, &probe); err != nil {
		return nil, fmt.Errorf("%s: manifest.json: %v", p, err)
	}
	if probe.SchemaVersion == nil || *probe.SchemaVersion != SchemaVersion {
		v := "none"
		if probe.SchemaVersion != nil {
			v = fmt.Sprint(*probe.SchemaVersion)
		}
		return nil, fmt.Errorf("%s: manifest schema_version %s is not one this kcrash reads (%d): made by another version of kcrash?", p, v, SchemaVersion)
	}
	if err := DecodeManifest(mj, &b.Manifest); err != nil {
		return nil, fmt.Errorf("%s: manifest.json: %v", p, err)
	}
	return b, nil
}

// OpenOrArchive reads p, which is either one bundle or a tarball of bundles
// (a tar, gzip'd or not, whose first file is a .tar.gz), opening and
// inflating it once. A bundle is returned as Open returns it; for a tarball
// each is called with every .tar.gz file inside it, in order, and the
// Bundle is nil. An error from each ends the walk and is returned.
func OpenOrArchive(p string, each func(name string, r io.Reader) error) (*Bundle, error) {
	f, err := OpenRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var gz *gzip.Reader
	var tr *tar.Reader
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		if gz, err = gzip.NewReader(br); err != nil {
			return nil, fmt.Errorf("%s: not a bundle nor a tarball of bundles (gzip: %v)", p, err)
		}
		tr = tar.NewReader(gz)
	} else {
		tr = tar.NewReader(br)
	}
	// The first regular file decides, as in a bundle the directory entries
	// before it are kept for readTar.
	var taken []*tar.Header
	var first *tar.Header
	for first == nil {
		hdr, err := tr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%s: not a bundle nor a tarball of bundles (no file in it)", p)
			}
			return nil, fmt.Errorf("%s: not a bundle nor a tarball of bundles (%v)", p, err)
		}
		if len(taken) == MaxEntries || len(hdr.Name) > MaxName {
			return nil, fmt.Errorf("%s: refusing to read: more than %d entries before its first file, or a name longer than %d bytes", p, MaxEntries, MaxName)
		}
		taken = append(taken, hdr)
		if hdr.Typeflag == tar.TypeReg {
			first = hdr
		}
	}
	if !strings.HasSuffix(first.Name, ".tar.gz") {
		if gz == nil {
			return nil, fmt.Errorf("%s: not a bundle nor a tarball of bundles (an uncompressed tar whose first file %s is not a bundle)", p, visible.Line(first.Name))
		}
		return readTar(gz, tr, taken, p, nil, true)
	}
	for hdr := first; ; {
		if len(hdr.Name) > MaxName {
			return nil, fmt.Errorf("%s: refusing to read: an entry's name is longer than %d bytes", p, MaxName)
		}
		if hdr.Typeflag == tar.TypeReg && strings.HasSuffix(hdr.Name, ".tar.gz") {
			if err := each(hdr.Name, io.LimitReader(tr, hdr.Size)); err != nil {
				return nil, err
			}
		}
		if hdr, err = tr.Next(); err == io.EOF {
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
	}
}

// OpenRegular opens p for reading only if it is a regular file: a FIFO or a
// device named like a bundle must not block or feed the reader forever. The
// open itself does not block (O_NONBLOCK), the type is checked on the open
// file, then the file is read normally.
func OpenRegular(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file (%s)", p, fileType(fi.Mode()))
	}
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func fileType(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a plain file"
}

// File returns one file's content by its name inside the bundle ("summary.md",
// "raw/x"). Files too large to keep in memory are not returned (use OpenFunc).
func (b *Bundle) File(name string) ([]byte, bool) {
	d, ok := b.files[name]
	return d, ok
}

// Names lists the files in the bundle, sorted.
func (b *Bundle) Names() []string {
	n := append([]string(nil), b.names...)
	sort.Strings(n)
	return n
}
