package bundle

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// archiveOf packs files into a tar (gzip'd when gz) under entry names,
// after a directory entry when dir is set, as sites archive a day's bundles.
func archiveOf(t *testing.T, gz bool, dir string, names []string, files []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "day.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	var w io.Writer = f
	var z *gzip.Writer
	if gz {
		z = gzip.NewWriter(f)
		w = z
	}
	tw := tar.NewWriter(w)
	if dir != "" {
		tw.WriteHeader(&tar.Header{Name: dir, Mode: 0o755, Typeflag: tar.TypeDir})
	}
	for i, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Name: names[i], Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if z != nil {
		z.Close()
	}
	f.Close()
	return p
}

// One open reads a bundle as Open does, and a tarball of bundles (gzip'd
// or not, with directory entries first or not) as its bundles in order;
// anything else is one line.
func TestOpenOrArchive(t *testing.T) {
	one, two := goodBundle(t), goodBundle(t)
	b, err := OpenOrArchive(one, func(string, io.Reader) error { t.Fatal("a bundle read as an archive"); return nil })
	if err != nil || b == nil || b.Manifest.SchemaVersion != SchemaVersion {
		t.Fatalf("bundle: %v %+v", err, b)
	}
	if want, _ := Open(one); want.Dir != b.Dir || strings.Join(want.Names(), ",") != strings.Join(b.Names(), ",") {
		t.Errorf("OpenOrArchive %v, Open %v", b.Names(), want.Names())
	}
	for _, c := range []struct {
		name string
		gz   bool
		dir  string
	}{{"tar.gz", true, ""}, {"tar.gz with a directory entry first", true, "day/"}, {"plain tar", false, "day/"}} {
		p := archiveOf(t, c.gz, c.dir, []string{"day/a.tar.gz", "day/b.tar.gz"}, []string{one, two})
		var got []string
		b, err := OpenOrArchive(p, func(name string, r io.Reader) error {
			in, err := ReadFunc(r, name, nil)
			if err != nil {
				return err
			}
			got = append(got, name+"="+in.Dir)
			return nil
		})
		if err != nil || b != nil || len(got) != 2 || !strings.HasPrefix(got[0], "day/a.tar.gz=") || !strings.HasPrefix(got[1], "day/b.tar.gz=") {
			t.Errorf("%s: %v %v %v", c.name, err, b, got)
		}
	}
	notBundle := archiveOf(t, false, "", []string{"notes.txt"}, []string{one})
	if _, err := OpenOrArchive(notBundle, nil); err == nil || !strings.Contains(err.Error(), "not a bundle nor a tarball of bundles") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a tar of something else: %v", err)
	}
	garbage := filepath.Join(t.TempDir(), "x.tar.gz")
	os.WriteFile(garbage, []byte{0x1f, 0x8b, 1, 2, 3}, 0o600)
	if _, err := OpenOrArchive(garbage, nil); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("garbage: %v", err)
	}
}
