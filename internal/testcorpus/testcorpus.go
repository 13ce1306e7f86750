// Package testcorpus finds the crash-evidence corpus the tests read: public
// captures copied unedited (with their source: and expect: lines) into the
// module's testdata/corpus, so that a fresh clone tests itself with nothing
// beside it. A missing corpus or file fails the test: it is part of the
// checkout, never optional.
package testcorpus

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	once    sync.Once
	rootDir string
	rootErr error
)

// Dir is the absolute path of testdata/corpus at the module root (found
// from the working directory, which go test sets to the package's).
func Dir(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				rootDir = filepath.Join(dir, "testdata", "corpus")
				_, rootErr = os.Stat(filepath.Join(rootDir, "INDEX.md"))
				return
			}
			up := filepath.Dir(dir)
			if up == dir {
				rootErr = os.ErrNotExist
				return
			}
			dir = up
		}
	})
	if rootErr != nil {
		t.Fatalf("corpus (testdata/corpus at the module root) missing: %v", rootErr)
	}
	return rootDir
}

// File is the path of one corpus file, rel to testdata/corpus (slashes).
func File(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(Dir(t), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("corpus file missing: %v", err)
	}
	return p
}

// Body is a corpus file without its 3 header lines (source:, expect:,
// blank): the capture exactly as `tail -n +4` prints it.
func Body(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(File(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(b), "\n", 4)
	if len(parts) < 4 || !strings.HasPrefix(parts[0], "source:") || !strings.HasPrefix(parts[1], "expect:") || parts[2] != "" {
		t.Fatalf("%s: not a corpus file with the 3-line header (source:, expect:, blank)", rel)
	}
	return parts[3]
}

// Glob is the corpus files matching pattern (relative to testdata/corpus);
// none is a failure, since every pattern a test names has files.
func Glob(t testing.TB, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(Dir(t), filepath.FromSlash(pattern)))
	if err != nil || len(m) == 0 {
		t.Fatalf("no corpus files match %s: %v", pattern, err)
	}
	return m
}
