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
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/internal/redact"
)

// DefaultBudget is the default cap on a bundle's size, compressed (SPEC §4).
const DefaultBudget = 50 << 20

// Name is the bundle's base name without extension:
// kcrash-<UTC YYYYMMDDTHHMMSSZ>-<host>-<pid>[-r<rank>].
func Name(t time.Time, host string, pid int, rank string) string {
	host = sanitize(host)
	n := fmt.Sprintf("kcrash-%s-%s-%d", t.UTC().Format("20060102T150405Z"), host, pid)
	if rank != "" {
		n += "-r" + sanitize(rank)
	}
	return n
}

func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_':
			return r
		}
		return '_'
	}, s)
	if s == "" {
		return "unknown"
	}
	return s
}

// Stage is a bundle being assembled: a private directory that collectors fill.
type Stage struct {
	Dir  string // files go here, by their names inside the bundle
	Name string
}

// NewStage makes a private staging directory under tmp (os.TempDir when empty).
func NewStage(tmp, name string) (*Stage, error) {
	if tmp == "" {
		tmp = os.TempDir()
	}
	dir, err := os.MkdirTemp(tmp, ".kcrash-stage-")
	if err != nil {
		return nil, err
	}
	return &Stage{Dir: dir, Name: name}, nil
}

// Remove deletes the staging directory.
func (s *Stage) Remove() error { return os.RemoveAll(s.Dir) }

// WriteOptions control how a Stage becomes a bundle file.
type WriteOptions struct {
	Out      string           // directory that receives the bundle
	Fallback string           // used when Out cannot take it; os.TempDir() when empty
	Budget   int64            // compressed size cap; DefaultBudget when 0
	Redactor *redact.Redactor // applied to every file, the manifest included
}

// Result says where a bundle went.
type Result struct {
	Path     string
	Size     int64
	Fallback error // non-nil when Out failed and the bundle went to Fallback instead
}

// Write redacts and truncates the staged files to the budget, writes m as
// manifest.json, and links one tar.gz into place under Out, or under Fallback
// when Out is unwritable or full. m.Truncated is filled in.
func (s *Stage) Write(m *Manifest, o WriteOptions) (Result, error) {
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
	}
	if o.Redactor == nil {
		o.Redactor = redact.New(nil)
	}
	files, err := s.files()
	if err != nil {
		return Result{}, err
	}
	// Uncompressed per-file cap: logs compress ~5-10x, so twice the compressed
	// budget per file keeps a bundle near budget without cutting anything that fits.
	capBytes := 2 * o.Budget
	m.Truncated = m.Truncated[:0:0]
	for _, f := range files {
		if f.size > capBytes {
			m.Truncated = append(m.Truncated, f.name)
		}
		if err := redactInPlace(f.path, capBytes, o.Redactor); err != nil {
			return Result{}, fmt.Errorf("redacting %s: %v", f.name, err)
		}
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Result{}, err
	}
	mj = append(o.Redactor.Bytes(mj), '\n')

	var res Result
	res.Path, res.Size, err = s.writeInto(o.Out, files, mj)
	if err != nil {
		fb := o.Fallback
		if fb == "" {
			fb = os.TempDir()
		}
		if filepath.Clean(fb) == filepath.Clean(o.Out) {
			return Result{}, err
		}
		res.Fallback = err
		res.Path, res.Size, err = s.writeInto(fb, files, mj)
		if err != nil {
			return Result{}, fmt.Errorf("%v; fallback %s: %w", res.Fallback, fb, err)
		}
	}
	return res, nil
}

type stagedFile struct {
	name string
	path string
	size int64
	mode fs.FileMode
}

func (s *Stage) files() ([]stagedFile, error) {
	var files []stagedFile
	err := filepath.WalkDir(s.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(s.Dir, p)
		if rel == "manifest.json" {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, stagedFile{name: filepath.ToSlash(rel), path: p, size: fi.Size(), mode: fi.Mode()})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return order(files[i].name) < order(files[j].name) })
	return files, err
}

// order puts the files a reader wants first at the front of the archive, so
// that `tar tzf | head` and streaming readers meet them early.
func order(name string) string {
	for i, first := range []string{"summary.md", "output.log", "kernel-api.log", "kmsg.log"} {
		if name == first {
			return fmt.Sprintf("%d", i)
		}
	}
	return "9" + name
}

func (s *Stage) writeInto(out string, files []stagedFile, manifest []byte) (string, int64, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", 0, err
	}
	tmp, err := os.CreateTemp(out, ".kcrash-*.tar.gz.tmp")
	if err != nil {
		return "", 0, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	tmp.Chmod(0o644) // a bundle is for sharing; CreateTemp makes it 0600
	bw := bufio.NewWriterSize(tmp, 256<<10)
	gz, _ := gzip.NewWriterLevel(bw, gzip.DefaultCompression)
	tw := tar.NewWriter(gz)
	now := time.Now()
	add := func(name string, data []byte, mode fs.FileMode) error {
		hdr := &tar.Header{Name: s.Name + "/" + name, Mode: int64(mode.Perm() | 0o400), Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: s.Name + "/", Mode: 0o755, ModTime: now, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
		return "", 0, err
	}
	wroteManifest := false
	for _, f := range files {
		// manifest.json goes right after summary.md: `kcrash show` reads only the head.
		if !wroteManifest && order(f.name) >= "1" {
			if err := add("manifest.json", manifest, 0o644); err != nil {
				return "", 0, err
			}
			wroteManifest = true
		}
		if err := addFile(tw, s.Name+"/"+f.name, f, now); err != nil {
			return "", 0, err
		}
	}
	if !wroteManifest {
		if err := add("manifest.json", manifest, 0o644); err != nil {
			return "", 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return "", 0, err
	}
	if err := gz.Close(); err != nil {
		return "", 0, err
	}
	if err := bw.Flush(); err != nil {
		return "", 0, err
	}
	if err := tmp.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return "", 0, err
	}
	fi, err := tmp.Stat()
	if err != nil {
		return "", 0, err
	}
	if err := tmp.Close(); err != nil {
		return "", 0, err
	}
	final, err := place(tmp.Name(), filepath.Join(out, s.Name), ".tar.gz")
	if err != nil {
		return "", 0, err
	}
	ok = true
	return final, fi.Size(), nil
}

// place links tmp to base+ext, or base-2+ext, base-3+ext... when taken, and
// removes tmp. A hard link fails rather than replace, so concurrent writers
// into one shared directory can never overwrite each other's bundles.
func place(tmp, base, ext string) (string, error) {
	defer os.Remove(tmp)
	for i := 1; i < 1000; i++ {
		name := base + ext
		if i > 1 {
			name = fmt.Sprintf("%s-%d%s", base, i, ext)
		}
		err := os.Link(tmp, name)
		if err == nil {
			return name, nil
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		// Filesystems without hard links: fall back to an exclusive create check
		// then rename; the window is tiny and names carry host and pid.
		if _, serr := os.Lstat(name); serr == nil {
			continue
		}
		if rerr := os.Rename(tmp, name); rerr != nil {
			return "", rerr
		}
		return name, nil
	}
	return "", fmt.Errorf("%s: too many bundles with this name", base+ext)
}

// addFile streams one redacted staged file into the archive.
func addFile(tw *tar.Writer, name string, f stagedFile, now time.Time) error {
	src, err := os.Open(f.path)
	if err != nil {
		msg := []byte(fmt.Sprintf("kcrash: could not read staged file: %v\n", err))
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(msg)), ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = tw.Write(msg)
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(f.mode.Perm() | 0o400), Size: fi.Size(), ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}

// redactChunk is how much of a staged file is redacted at a time: memory
// stays small however large the output ring is.
const redactChunk = 1 << 20

// redactInPlace rewrites a staged file with secrets masked, keeping only its
// last max bytes (the end of a log is what explains a crash). It works in
// chunks cut at line ends, so a token is never split across two chunks;
// a private-key block is kept whole up to 1 MiB.
func redactInPlace(path string, max int64, r *redact.Redactor) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if fi.Size() > max {
		if _, err := in.Seek(fi.Size()-max, io.SeekStart); err != nil {
			return err
		}
	}
	out, err := os.CreateTemp(filepath.Dir(path), ".redact-*")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	br := bufio.NewReaderSize(io.LimitReader(in, max), redactChunk)
	bw := bufio.NewWriterSize(out, 256<<10)
	chunk := make([]byte, 0, redactChunk+64<<10)
	for {
		chunk = chunk[:0]
		for len(chunk) < redactChunk {
			line, err := br.ReadSlice('\n')
			chunk = append(chunk, line...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				break
			}
			if len(chunk) >= redactChunk-64<<10 && !openKeyBlock(chunk) {
				break
			}
		}
		if len(chunk) == 0 {
			break
		}
		if _, err := bw.Write(r.Bytes(chunk)); err != nil {
			out.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(out.Name(), path)
}

// openKeyBlock reports whether b ends inside a PEM private-key block.
func openKeyBlock(b []byte) bool {
	i := bytes.LastIndex(b, []byte("-----BEGIN "))
	return i >= 0 && !bytes.Contains(b[i:], []byte("-----END "))
}
