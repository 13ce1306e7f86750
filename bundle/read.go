package bundle

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// Bundle is a bundle read back from its tar.gz, every file in memory: bundles
// are budgeted to tens of MB.
type Bundle struct {
	Path     string
	Dir      string // the top directory inside the archive
	Manifest Manifest
	files    map[string][]byte
}

// Open reads a bundle file.
func Open(p string) (*Bundle, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: not a kcrash bundle (gzip: %v)", p, err)
	}
	tr := tar.NewReader(gz)
	b := &Bundle{Path: p, files: map[string][]byte{}}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: damaged bundle: %v", p, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		dir, name, ok := strings.Cut(path.Clean(hdr.Name), "/")
		if !ok {
			continue
		}
		if b.Dir == "" {
			b.Dir = dir
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: damaged bundle: %v", p, err)
		}
		b.files[name] = data
	}
	mj, ok := b.files["manifest.json"]
	if !ok {
		return nil, fmt.Errorf("%s: not a kcrash bundle (no manifest.json)", p)
	}
	if err := json.Unmarshal(mj, &b.Manifest); err != nil {
		return nil, fmt.Errorf("%s: manifest.json: %v", p, err)
	}
	return b, nil
}

// File returns one file's content by its name inside the bundle ("summary.md", "raw/x").
func (b *Bundle) File(name string) ([]byte, bool) {
	d, ok := b.files[name]
	return d, ok
}

// Names lists the files in the bundle, sorted.
func (b *Bundle) Names() []string {
	var n []string
	for k := range b.files {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
