package gzcap

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

func gz(data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// A stream of exactly the cap reads whole; one byte more is an error naming
// the file and the flag, after at most the cap was returned.
func TestCapExact(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	for _, c := range []struct {
		max     int64
		tooBig  bool
		members int
	}{{64 << 10, false, 1}, {64<<10 - 1, true, 1}, {128 << 10, false, 2}, {128<<10 - 1, true, 2}} {
		src := bytes.Repeat(gz(data), c.members)
		r, err := NewReader(bytes.NewReader(src), "x.log.gz", c.max)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if c.tooBig {
			if !IsTooLarge(err) || !strings.Contains(err.Error(), "x.log.gz: more than") || int64(len(got)) > c.max {
				t.Errorf("max %d: %d bytes, %v", c.max, len(got), err)
			}
		} else if err != nil || len(got) != len(data)*c.members {
			t.Errorf("max %d: %d bytes, %v", c.max, len(got), err)
		}
	}
}
