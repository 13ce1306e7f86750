// Package gzcap un-gzips a file kcrash did not write with a cap on what it
// decompresses to: gzip reaches 1000:1, so a 10 MB attachment would
// otherwise be read as 10 GB, for minutes.
package gzcap

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/kcrash/kcrash/internal/human"
)

// Default is the cap without a flag: far above a real log (and the largest
// file a bundle holds).
const Default = 1 << 30

// TooLarge is the error of a stream that decompressed past its cap.
type TooLarge struct {
	Name string
	Max  int64
}

func (e *TooLarge) Error() string {
	return fmt.Sprintf("%s: more than %s once decompressed (--max-log-bytes raises the limit)", e.Name, human.Size(e.Max))
}

// Reader is a gzip stream (all its members) that fails with *TooLarge past
// max bytes.
type Reader struct {
	zr   *gzip.Reader
	name string
	max  int64
	left int64
}

// NewReader reads the gzip stream r, named name in errors, up to max bytes
// decompressed (Default when max <= 0).
func NewReader(r io.Reader, name string, max int64) (*Reader, error) {
	if max <= 0 {
		max = Default
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	return &Reader{zr: zr, name: name, max: max, left: max}, nil
}

func (c *Reader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// at the cap exactly: only the end of the stream is fine
		var one [1]byte
		n, err := c.zr.Read(one[:])
		if n > 0 || err == nil {
			return 0, &TooLarge{Name: c.name, Max: c.max}
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.zr.Read(p)
	c.left -= int64(n)
	return n, err
}

// Close closes the gzip reader (not the underlying one).
func (c *Reader) Close() error { return c.zr.Close() }

// IsTooLarge reports whether err is, or wraps, a *TooLarge.
func IsTooLarge(err error) bool {
	var t *TooLarge
	return errors.As(err, &t)
}
