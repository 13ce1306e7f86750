package crashsig

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/corpus-signatures.txt from the current rules")

// The signature of every corpus log, as a reviewed file: a change to the rules
// or the table shows up as a diff of this file (Socorro's old/new/same).
func TestCorpusSignatures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "[1-6]-*", "*.txt"))
	sort.Strings(files)
	if len(files) < 50 {
		t.Fatalf("only %d corpus files", len(files))
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# crashsig v%d over testdata/corpus: FILE, then title, fine, coarse, class and key\n", Version)
	for _, f := range files {
		rel, _ := filepath.Rel(corpusDir, f)
		s := sigOf(t, rel, corpusText(t, rel), "")
		if len([]rune(s.Title)) > MaxTitle || s.Title == "" {
			t.Errorf("%s: title %q", rel, s.Title)
		}
		if len(s.Fine) != 16 || len(s.Coarse) != 16 {
			t.Errorf("%s: fine %q coarse %q", rel, s.Fine, s.Coarse)
		}
		fmt.Fprintf(&out, "\n%s\n  title:  %s\n  fine:   %s\n  coarse: %s\n  class:  %s\n  key:    %s\n", rel, s.Title, s.Fine, s.Coarse, s.Class, s.Key)
	}
	golden := filepath.Join("testdata", "corpus-signatures.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./crashsig -run TestCorpusSignatures -update)", err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("signatures changed; review `diff` after go test ./crashsig -run TestCorpusSignatures -update, and bump Version if a released signature changed\n%s", firstDiff(string(want), got))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y)
		}
	}
	return ""
}
