// Package bundletest builds hostile bundles for the tests of every bundle
// reader (bundle's own, and the commands' memory checks). It imports
// nothing of bundle, so bundle's tests can use it too.
package bundletest

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Flood writes to p a tar.gz of n empty entries whose names are nameLen
// bytes (PAX records past 100 bytes), then full files of 8 MiB each (the
// most a reader keeps of one), then manifest as manifest.json: the shapes
// that make a reader's memory grow with what the names and files hold.
func Flood(t testing.TB, p string, n, nameLen, full int, manifest string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	for i := range n {
		id := fmt.Sprintf("f%d-", i)
		name := "kcrash-flood/" + id + strings.Repeat("n", max(nameLen-len("kcrash-flood/")-len(id), 1))
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
	}
	line := []byte(strings.Repeat("a line of output ", 7) + "\n")
	for i := range full {
		const size = 8 << 20
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("kcrash-flood/raw/full-%d.log", i), Mode: 0o600, Size: size, Typeflag: tar.TypeReg})
		for n := 0; n < size; n += len(line) {
			tw.Write(line[:min(len(line), size-n)])
		}
	}
	mj := []byte(manifest)
	tw.WriteHeader(&tar.Header{Name: "kcrash-flood/manifest.json", Mode: 0o600, Size: int64(len(mj)), Typeflag: tar.TypeReg})
	tw.Write(mj)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}
