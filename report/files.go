package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/internal/visible"
)

// Entry is one file of a bundle.
type Entry struct {
	Name string
	Size int64
}

// List is the files of a bundle file with their sizes, in archive order,
// read with bundle.Scan (bounded memory, checksum verified).
func List(path string) ([]Entry, error) {
	var out []Entry
	_, err := bundle.Scan(path, func(name string, r io.Reader) error {
		n, err := io.Copy(io.Discard, r)
		out = append(out, Entry{name, n})
		return err
	})
	return out, err
}

// Extract copies one file of a bundle to w as it streams past, whatever its
// size. With visibleText, control characters are written as escapes (for a
// terminal). The rest of the bundle is still read, so that a damaged
// archive is reported, unless the file was found and w failed.
func Extract(path, name string, w io.Writer, visibleText bool) error {
	found := false
	_, err := bundle.Scan(path, func(n string, r io.Reader) error {
		if n != name {
			return nil
		}
		found = true
		if !visibleText {
			_, err := io.Copy(w, r)
			return err
		}
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := br.ReadSlice('\n')
			if len(line) > 0 {
				if _, werr := w.Write(visible.Bytes(line)); werr != nil {
					return werr
				}
			}
			if err == io.EOF {
				return nil
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return err
			}
		}
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%s: no file %q in the bundle (kcrash show --list %s names them)", path, name, path)
	}
	return nil
}
