// Package report renders a bundle as one self-contained HTML page (SPEC §4
// report.html, `kcrash report`): the verdict and its evidence above, the
// run's timelines on one shared time axis as inline SVG drawn here, and the
// output tail, kernel messages and collector statuses below. The page loads
// nothing (a Content-Security-Policy forbids it), needs no JavaScript, and
// every piece of bundle text in it is escaped: a bundle is untrusted input.
package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/kcrash/kcrash/bundle"
)

// What the page reads of each file. The JSON timelines are streamed up to
// jsonMax, keeping a bounded reduction of them (timelines.go); summary.md
// and software.json are kept whole up to keptMax (real ones are a few KiB);
// of the logs only the tail is kept: the page shows their last lines.
const (
	jsonMax = 64 << 20
	keptMax = 2 << 20
	tailMax = 512 << 10
)

// jsonFiles and tailFiles are the bundle files the page (and show) is made of.
var (
	jsonFiles = []string{"gpu.json", "memory.json", "processes.json", "raw/kmsg-findings.json", "summary.md", "software.json"}
	tailFiles = []string{"output.log", "kmsg.log", "kernel-api.log"}
)

// Input is what a page is made of: the manifest and the files it draws from.
type Input struct {
	Name     string // the bundle's directory name
	Manifest bundle.Manifest
	files    map[string][]byte
	cut      map[string]bool // files of which only the tail was kept
	names    []string        // every file of the bundle
	tl       timelines       // the streamed files, reduced as read
}

func newInput(name string) *Input {
	return &Input{Name: name, files: map[string][]byte{}, cut: map[string]bool{}}
}

func (in *Input) file(name string) []byte { return in.files[name] }

// Has reports whether the bundle holds name, read or not.
func (in *Input) Has(name string) bool {
	for _, n := range in.names {
		if n == name {
			return true
		}
	}
	return false
}

// File is one of the files the page keeps (summary.md, software.json; of
// the logs their tail), as read. The JSON timelines are not kept: they are
// reduced as they are read (timelines.go).
func (in *Input) File(name string) ([]byte, bool) {
	b, ok := in.files[name]
	return b, ok
}

func wanted(name string) (limit int64, tail, ok bool) {
	for _, n := range jsonFiles {
		if n == name && streamed[n] {
			return jsonMax, false, true
		}
		if n == name {
			return keptMax, false, true
		}
	}
	for _, n := range tailFiles {
		if n == name {
			return tailMax, true, true
		}
	}
	return 0, false, false
}

// keep reads r into the input: whole up to limit, or its last limit bytes.
func (in *Input) keep(name string, r io.Reader) error {
	limit, tail, ok := wanted(name)
	if !ok {
		return nil
	}
	if streamed[name] {
		in.parse(name, r)
		return nil
	}
	if !tail {
		data, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			return err
		}
		if int64(len(data)) > limit {
			return fmt.Errorf("%s: larger than %d MiB, not shown", name, limit>>20)
		}
		in.files[name] = data
		return nil
	}
	buf := make([]byte, 0, 64<<10)
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if int64(len(buf)) > 2*limit {
			buf = append(buf[:0], buf[int64(len(buf))-limit:]...)
			in.cut[name] = true
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if int64(len(buf)) > limit {
		buf = buf[int64(len(buf))-limit:]
		in.cut[name] = true
	}
	in.files[name] = buf
	return nil
}

// Load reads a bundle for its page: a bundle file (read once, gzip checksum
// verified, with bounded memory), or an extracted bundle directory (one that
// holds manifest.json).
func Load(path string) (*Input, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return loadDir(path)
	}
	in := newInput("")
	var bad []string
	b, err := bundle.Scan(path, func(name string, r io.Reader) error {
		in.names = append(in.names, name)
		if err := in.keep(name, r); err != nil {
			bad = append(bad, err.Error())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	in.Name = b.Dir
	in.Manifest = b.Manifest
	if len(bad) > 0 {
		in.Manifest.Notes = append(in.Manifest.Notes, bad...)
	}
	return in, nil
}

func loadDir(dir string) (*Input, error) {
	f, err := bundle.OpenRegular(filepath.Join(dir, "manifest.json"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: a directory without manifest.json is not an extracted bundle", dir)
		}
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(f, bundle.MaxManifest+1))
	f.Close()
	if err != nil {
		return nil, err
	}
	if len(raw) > bundle.MaxManifest {
		return nil, fmt.Errorf("%s: manifest.json is larger than %d MiB, more than any kcrash bundle holds", dir, bundle.MaxManifest>>20)
	}
	var m bundle.Manifest
	if err := bundle.DecodeManifest(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: manifest.json: %v", dir, err)
	}
	if m.SchemaVersion != bundle.SchemaVersion {
		return nil, fmt.Errorf("%s: manifest schema_version %d is not one this kcrash reads (%d)", dir, m.SchemaVersion, bundle.SchemaVersion)
	}
	return FromDir(dir, filepath.Base(filepath.Clean(dir)), &m)
}

// FromDir reads the page's files from a directory laid out as a bundle (an
// extracted bundle, or a stage whose files are already redacted) with m as
// its manifest.
func FromDir(dir, name string, m *bundle.Manifest) (*Input, error) {
	in := newInput(name)
	in.Manifest = *m
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		in.names = append(in.names, rel)
		if _, tail, ok := wanted(rel); ok {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if fi, err := f.Stat(); err == nil && tail && fi.Size() > tailMax {
				if _, err := f.Seek(fi.Size()-tailMax, io.SeekStart); err != nil {
					return err
				}
				in.cut[rel] = true
			}
			if err := in.keep(rel, f); err != nil {
				in.Manifest.Notes = append(in.Manifest.Notes, err.Error())
			}
		}
		return nil
	})
	sort.Strings(in.names)
	return in, err
}

// FromBundle is the input of a bundle already read with bundle.Open: only
// the files it kept in memory are drawn (bundle.Open keeps files up to 8 MiB).
// Load reads a bundle file within less memory.
func FromBundle(b *bundle.Bundle) *Input {
	in := newInput(b.Dir)
	in.Manifest = b.Manifest
	in.names = b.Names()
	for _, n := range in.names {
		if data, ok := b.File(n); ok {
			if err := in.keep(n, bytes.NewReader(data)); err != nil {
				in.Manifest.Notes = append(in.Manifest.Notes, err.Error())
			}
		}
	}
	return in
}

// Render writes the page of a bundle read with bundle.Open.
func Render(w io.Writer, b *bundle.Bundle) error { return Write(w, FromBundle(b)) }
