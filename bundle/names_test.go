package bundle

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/bundle/bundletest"
)

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
		bundletest.Flood(t, p, c.n, c.name, 0, `{"schema_version":1}`)
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
	bundletest.Flood(t, p, MaxEntries-1, MaxName, 0, `{"schema_version":1}`)
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
