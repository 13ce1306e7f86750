package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Newest is the newest bundle file (kcrash-*.tar.gz, by modification time,
// then name) directly inside dir. Only regular files count: a FIFO named
// like a bundle would block its reader.
func Newest(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var best string
	var bestMod int64
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, "kcrash-") || !strings.HasSuffix(n, ".tar.gz") {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		mod := fi.ModTime().UnixNano()
		if best == "" || mod > bestMod || mod == bestMod && n > filepath.Base(best) {
			best, bestMod = filepath.Join(dir, n), mod
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s: no kcrash-*.tar.gz bundle in this directory", dir)
	}
	return best, nil
}

// Resolve turns what a user gave into what to read: a bundle file as is,
// an extracted bundle directory (it holds manifest.json) as is, another
// directory as the newest bundle inside it.
func Resolve(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return p, nil
	}
	if _, err := os.Stat(filepath.Join(p, "manifest.json")); err == nil {
		return p, nil
	}
	return Newest(p)
}
