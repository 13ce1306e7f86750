// Package ringbuf keeps the last N bytes written to it. Writes never block
// and never fail, so the output pump can always afford its copy.
package ringbuf

import (
	"io"
	"sync"
)

// Ring is a fixed-size byte ring, safe for one writer and concurrent readers.
type Ring struct {
	mu    sync.Mutex
	buf   []byte
	start int // index of the oldest byte when full
	full  bool
	total int64 // bytes ever written
	last  byte  // the last byte ever written, kept through Free
}

// New returns a ring keeping the last size bytes.
func New(size int) *Ring {
	if size < 1 {
		size = 1
	}
	return &Ring{buf: make([]byte, 0, size)}
}

// Write appends p, discarding the oldest bytes beyond the ring's size.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	r.mu.Lock()
	r.total += int64(n)
	if n > 0 {
		r.last = p[n-1]
	}
	size := cap(r.buf)
	if len(p) >= size {
		r.buf = append(r.buf[:0], p[len(p)-size:]...)
		r.start, r.full = 0, true
		r.mu.Unlock()
		return n, nil
	}
	if !r.full {
		room := size - len(r.buf)
		if len(p) <= room {
			r.buf = append(r.buf, p...)
			r.mu.Unlock()
			return n, nil
		}
		r.buf = append(r.buf, p[:room]...)
		p = p[room:]
		r.full, r.start = true, 0
	}
	for len(p) > 0 {
		c := copy(r.buf[r.start:], p)
		p = p[c:]
		r.start = (r.start + c) % size
	}
	r.mu.Unlock()
	return n, nil
}

// Bytes returns a copy of the kept bytes, oldest first.
func (r *Ring) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]byte(nil), r.buf...)
	}
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
}

// WriteTo writes the kept bytes, oldest first, without copying the ring:
// the bundle's output.log is written straight from it.
func (r *Ring) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := [][]byte{r.buf}
	if r.full {
		parts = [][]byte{r.buf[r.start:], r.buf[:r.start]}
	}
	var n int64
	for _, p := range parts {
		m, err := w.Write(p)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Free drops the buffer once its contents are on disk, so that writing the
// bundle does not hold the ring and its copies at once. Writes after Free
// are counted and discarded.
func (r *Ring) Free() {
	r.mu.Lock()
	r.buf, r.start, r.full = make([]byte, 0, 1), 0, false
	r.mu.Unlock()
}

// Total is the number of bytes ever written.
func (r *Ring) Total() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Last is the last byte ever written and the count of bytes written so
// far (0 and 0 before any): whether the output left the cursor mid-line.
func (r *Ring) Last() (byte, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.total
}

// Size is the ring's capacity.
func (r *Ring) Size() int { return cap(r.buf) }
