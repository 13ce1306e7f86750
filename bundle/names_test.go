package bundle

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// floodBundle writes a bundle of n empty entries whose names are nameLen
// bytes (PAX records past 100 bytes), then a valid manifest: the shape that
// makes a reader's memory grow with what the names hold.
func floodBundle(t *testing.T, p string, n, nameLen int) {
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
	mj := []byte(`{"schema_version":1}`)
	tw.WriteHeader(&tar.Header{Name: "kcrash-flood/manifest.json", Mode: 0o600, Size: int64(len(mj)), Typeflag: tar.TypeReg})
	tw.Write(mj)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

// Names longer than any kcrash writes and more entries than any bundle
// holds are refused with one line, at the first one past the limit.
func TestOpenRefusesNameAndEntryFloods(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		what     string
		n, name  int
		want     string
		visitMax int
	}{
		{"long names", 50, 1<<20 - 4096, "longer than", 0},
		{"long name just past the limit", 3, MaxName + 1, "longer than", 0},
		{"many entries", MaxEntries + 5, 40, fmt.Sprintf("more than %d entries", MaxEntries), MaxEntries},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(c.what, " ", "-")+".tar.gz")
		floodBundle(t, p, c.n, c.name)
		visited := 0
		_, err := OpenFunc(p, func(string, io.Reader) error { visited++; return nil })
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || len(err.Error()) > 400 {
			t.Errorf("%s: Open = %.400v", c.what, err)
		}
		if visited > c.visitMax {
			t.Errorf("%s: %d entries visited before the refusal, want at most %d", c.what, visited, c.visitMax)
		}
	}
	// At the limits themselves, a bundle still reads.
	p := filepath.Join(dir, "at-limits.tar.gz")
	floodBundle(t, p, MaxEntries-1, MaxName)
	b, err := Open(p)
	if err != nil {
		t.Fatalf("a bundle at the limits: %.400v", err)
	}
	if got := len(b.Names()); got != MaxEntries {
		t.Errorf("%d names, want %d", got, MaxEntries)
	}
}

// What kcrash writes it reads back: a stage with more files than a bundle
// holds, or a name longer than a reader accepts, still makes a bundle that
// opens, the files left out said in a note.
func TestWriteKeepsWithinReaderLimits(t *testing.T) {
	files := map[string][]byte{"summary.md": []byte("# verdict\n")}
	for i := range MaxEntries {
		files[fmt.Sprintf("raw/f%05d", i)] = []byte("x")
	}
	files["raw/"+strings.Repeat("n", 250)+"/"+strings.Repeat("m", 250)+"/"+strings.Repeat("o", 250)+"/"+strings.Repeat("p", 250)] = []byte("long")
	st := stageWith(t, files)
	res, err := st.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(res.Path)
	if err != nil {
		t.Fatalf("kcrash's own bundle: %.300v", err)
	}
	if _, ok := b.File("summary.md"); !ok {
		t.Error("summary.md left out")
	}
	if !strings.Contains(strings.Join(b.Manifest.Notes, "\n"), "files left out") {
		t.Errorf("no note of the files left out: %q", b.Manifest.Notes)
	}
}
