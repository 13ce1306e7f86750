package supervisor

import (
	"errors"
	"io"
	"sync"
	"syscall"
	"time"
)

// passthrough forwards the child's output to kcrash's stdout from its own
// goroutine through a fixed circular buffer, so nothing is allocated per
// chunk. A reader that is slower than the child paces it, as it would pace
// the bare command, and loses nothing; a reader that makes no progress at all
// for stallAfter (a stuck pipe, a terminal paused with ^S) no longer holds the
// child: what does not fit is counted as dropped, and is still in the ring
// and the --log file. A reader that fails (EPIPE: ` + "`| head -1`" + `) is dropped.
type passthrough struct {
	w       io.Writer
	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte
	head    int // next byte to write out
	n       int // bytes queued
	closed  bool
	broken  bool
	stalled bool
	dropped int64
	lastOut time.Time // last time the writer made progress
	done    chan struct{}
}

// stallAfter is how long a reader may make no progress at all before the
// child stops waiting for it.
const stallAfter = 2 * time.Second

func newPassthrough(w io.Writer, size int) *passthrough {
	p := &passthrough{w: w, buf: make([]byte, size), done: make(chan struct{}), lastOut: time.Now()}
	p.cond = sync.NewCond(&p.mu)
	go p.loop()
	return p
}

// Write queues b; it blocks only while a live reader catches up.
func (p *passthrough) Write(b []byte) (int, error) {
	total := len(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		p.lastOut = time.Now() // an idle writer has not stalled
	}
	for len(b) > 0 && !p.broken {
		free := len(p.buf) - p.n
		if free == 0 {
			if p.stalled || time.Since(p.lastOut) > stallAfter {
				p.stalled = true
				p.dropped += int64(len(b))
				return total, nil
			}
			p.mu.Unlock()
			time.Sleep(200 * time.Microsecond)
			p.mu.Lock()
			continue
		}
		tail := (p.head + p.n) % len(p.buf)
		end := min(len(p.buf), tail+free)
		c := copy(p.buf[tail:end], b)
		p.n += c
		b = b[c:]
		p.cond.Signal()
	}
	return total, nil
}

func (p *passthrough) loop() {
	defer close(p.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for p.n == 0 && !p.closed {
			p.cond.Wait()
		}
		if p.n == 0 {
			return
		}
		// Write the contiguous part without the lock; the writer only
		// appends behind it.
		chunk := p.buf[p.head:min(len(p.buf), p.head+p.n)]
		p.mu.Unlock()
		_, err := writeAll(p.w, chunk)
		p.mu.Lock()
		p.head = (p.head + len(chunk)) % len(p.buf)
		p.n -= len(chunk)
		p.lastOut = time.Now()
		p.stalled = false
		if err != nil {
			p.broken = true
			p.dropped += int64(p.n)
			p.n = 0
		}
	}
}

func writeAll(w io.Writer, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := w.Write(b[n:])
		n += m
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) {
				time.Sleep(time.Millisecond)
				continue
			}
			return n, err
		}
	}
	return n, nil
}

// close flushes what is queued, waiting at most wait for a stuck writer.
// It reports the bytes that never reached the writer.
func (p *passthrough) close(wait time.Duration) (dropped int64, broken bool) {
	p.mu.Lock()
	p.closed = true
	p.cond.Signal()
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-time.After(wait):
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped + int64(p.n), p.broken
}

// fanout writes every chunk to the ring and log synchronously (both are
// memory or local disk) and to the passthrough queue.
type fanout struct {
	sinks  []io.Writer
	logW   io.Writer
	logErr error
}

func (f *fanout) Write(b []byte) (int, error) {
	for _, s := range f.sinks {
		s.Write(b)
	}
	if f.logW != nil && f.logErr == nil {
		if _, err := f.logW.Write(b); err != nil {
			f.logErr = err // a full disk stops the log, never the child
		}
	}
	return len(b), nil
}
