package supervisor

import (
	"errors"
	"io"
	"sync"
	"syscall"
	"time"
)

// passthrough forwards the child's output to kcrash's stdout from its own
// goroutine through a bounded queue. A reader that is slower than the child
// paces it, as it would pace the bare command, and loses nothing; a reader
// that makes no progress at all for stallAfter (a closed or stuck pipe, a
// terminal paused with ^S) no longer holds the child: what does not fit is
// counted as dropped and is still in the ring and the --log file.
type passthrough struct {
	w       io.Writer
	mu      sync.Mutex
	cond    *sync.Cond
	queue   [][]byte
	queued  int
	max     int
	closed  bool // no more input
	broken  bool // the writer failed (EPIPE: `| head -1`)
	dropped int64
	stalled bool
	lastOut time.Time // last time the writer made progress
	done    chan struct{}
	pool    sync.Pool
}

// stallAfter is how long a reader may make no progress at all before the
// child stops waiting for it.
const stallAfter = 2 * time.Second

func newPassthrough(w io.Writer, max int) *passthrough {
	p := &passthrough{w: w, max: max, done: make(chan struct{}), lastOut: time.Now()}
	p.cond = sync.NewCond(&p.mu)
	p.pool.New = func() any { b := make([]byte, 0, 32<<10); return &b }
	go p.loop()
	return p
}

// Write queues a copy of b; it never blocks on the underlying writer.
func (p *passthrough) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken {
		return len(b), nil
	}
	for p.queued > 0 && p.queued+len(b) > p.max && !p.broken {
		if p.stalled || time.Since(p.lastOut) > stallAfter {
			p.stalled = true
			p.dropped += int64(len(b))
			return len(b), nil
		}
		p.mu.Unlock()
		time.Sleep(200 * time.Microsecond)
		p.mu.Lock()
	}
	if p.broken {
		return len(b), nil
	}
	if p.queued == 0 {
		p.lastOut = time.Now() // an idle writer has not stalled
	}
	bp := p.pool.Get().(*[]byte)
	c := append((*bp)[:0], b...)
	p.queue = append(p.queue, c)
	p.queued += len(c)
	p.cond.Signal()
	return len(b), nil
}

func (p *passthrough) loop() {
	defer close(p.done)
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.closed {
			p.cond.Wait()
		}
		if len(p.queue) == 0 {
			p.mu.Unlock()
			return
		}
		b := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		p.mu.Unlock()
		_, err := writeAll(p.w, b)
		p.mu.Lock()
		p.queued -= len(b)
		p.lastOut = time.Now()
		p.stalled = false
		if err != nil {
			p.broken = true
			for _, q := range p.queue {
				p.dropped += int64(len(q))
			}
			p.queue, p.queued = nil, 0
		}
		p.mu.Unlock()
		b = b[:0]
		p.pool.Put(&b)
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
	return p.dropped + int64(p.queued), p.broken
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
