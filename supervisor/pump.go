package supervisor

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stream copies one output of the child (a pty master or a pipe) to where
// kcrash's own stdout or stderr goes, and every chunk to the ring and log.
//
// One goroutine does read → ring/log → write in a tight loop: no handoff
// between goroutines and no queue, so a chunk costs one read and one write
// (script(1)'s loop). A reader slower than the child paces it, as it would
// pace the bare command. A reader that makes no progress at all for
// stallAfter (a stuck pipe, a terminal paused with ^S) no longer holds the
// child: a watchdog notices the write that has not returned and starts a
// rescue reader that keeps draining the child into the ring and log, counting
// what stdout missed, until the write returns. A reader that is gone (EPIPE:
// `| head -1`) is passed on to the child, which would have met it itself
// without kcrash (see readerGone). A reader that fails otherwise is dropped
// for good.
type stream struct {
	c   *Child
	src *os.File // a pty master or a pipe, read through the runtime's poller
	rc  syscall.RawConn
	w   io.Writer
	wfd int // w's fd when it is a file (written directly), else -1

	readMu   sync.Mutex   // one reader at a time: the pump, or the rescue while the pump's write is stuck
	writing  atomic.Int64 // unix nanos when the write in progress began; 0: none
	writeLen atomic.Int64 // its length
	stalled  atomic.Bool
	broken   atomic.Bool
	gone     atomic.Bool // the reader went away (EPIPE) and the child was told
	pty      bool        // src is a pty master, not a pipe
	dropped  atomic.Int64
	eofOnce  sync.Once
	eof      chan struct{} // the source reached its end (or the drain gave up on it)
	done     chan struct{} // the pump returned
	buf      []byte
	rescueMu sync.Mutex
}

// stallAfter is how long a reader may make no progress at all before the
// child stops waiting for it.
const stallAfter = 2 * time.Second

func newStream(c *Child, src *os.File, w io.Writer) *stream {
	s := &stream{c: c, src: src, w: w, wfd: -1,
		eof: make(chan struct{}), done: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		s.wfd = int(f.Fd())
	}
	// readMore must never block: only a descriptor the poller owns
	// (non-blocking) qualifies.
	if rc, err := src.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			if fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err == nil && fl&unix.O_NONBLOCK != 0 {
				s.rc = rc
			}
			_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
			s.pty = err == nil
		})
	}
	// A pty hands out at most 4 KiB a read (readMore gathers 64 KiB of
	// them); a pipe hands out all it holds in one read: as much as kcrash
	// made it hold (pipeSize), so that a fast child costs one read and one
	// write per quarter MiB.
	s.buf = make([]byte, 64<<10)
	if !s.pty {
		s.buf = make([]byte, pipeSize)
	}
	return s
}

// read returns the next chunk of the source, 0 at its end: a pipe's EOF, a
// pty master's EIO (every slave fd is closed), or the drain's deadline.
func (s *stream) read(buf []byte) int {
	for {
		n, err := s.src.Read(buf)
		if n > 0 {
			return n
		}
		if err != nil {
			return 0
		}
	}
}

// readMore reads what the source already holds into buf, without waiting.
func (s *stream) readMore(buf []byte) int {
	if s.rc == nil {
		return 0
	}
	total := 0
	for len(buf) >= 4096 {
		var n int
		s.rc.Read(func(fd uintptr) bool {
			n, _ = unix.Read(int(fd), buf)
			return true // never wait for more
		})
		if n <= 0 {
			break
		}
		total += n
		buf = buf[n:]
	}
	return total
}

// take hands a chunk read from the child to the ring and the log.
func (s *stream) take(b []byte) {
	s.c.output.Store(time.Now().UnixNano())
	s.c.fanMu.Lock()
	s.c.fan.Write(b)
	s.c.fanMu.Unlock()
}

func (s *stream) run() {
	defer close(s.done)
	for {
		s.readMu.Lock()
		n := s.read(s.buf)
		if n > 0 {
			if s.pty {
				// A pty hands out at most 4 KiB a read: take what else is
				// already there, so that one write passes on up to 64 KiB.
				// (A pipe's read took all there was: another would be an
				// EAGAIN for nothing.)
				n += s.readMore(s.buf[n:])
			}
			s.take(s.buf[:n])
		}
		s.readMu.Unlock()
		if n == 0 {
			s.eofOnce.Do(func() { close(s.eof) })
			return
		}
		if s.broken.Load() {
			s.dropped.Add(int64(n))
			if s.gone.Load() {
				// Something still writes after the SIGPIPE (readerGone).
				s.hangup()
				return
			}
			continue
		}
		s.writeLen.Store(int64(n))
		s.writing.Store(time.Now().UnixNano())
		err := s.write(s.buf[:n])
		s.writing.Store(0)
		s.stalled.Store(false)
		if err != nil {
			s.broken.Store(true)
		}
		if errors.Is(err, unix.EPIPE) && s.readerGone() {
			return
		}
	}
}

// readerGone tells the child that the reader of its output went away, once
// what it already wrote is in the ring and log. A pipe is closed: its writer
// gets SIGPIPE at its next write (EPIPE where ignored), exactly as without
// kcrash. A pty cannot fail a write that way: the terminal's foreground
// group gets SIGPIPE, and if anything still writes after that (SIGPIPE
// ignored, as Python does), the pty is hung up (SIGHUP, EIO: what script(1)
// gives). It reports whether the stream is done.
func (s *stream) readerGone() bool {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	// What the child already wrote is what its pty or pipe holds: bounded,
	// or a child writing as fast as this drains would be drained to its end
	// and never told.
	for left := 4 * len(s.buf); left > 0; {
		n := s.readMore(s.buf[:min(len(s.buf), left)])
		if n == 0 {
			break
		}
		s.take(s.buf[:n])
		s.dropped.Add(int64(n))
		left -= n
	}
	s.gone.Store(true)
	if s.pty && s.rc != nil {
		pgrp := -s.c.pid
		s.rc.Control(func(fd uintptr) {
			if g, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil && g > 0 {
				pgrp = -g
			}
		})
		if pgrp != 0 {
			unix.Kill(pgrp, unix.SIGPIPE)
			return false // the pump goes on reading: see run
		}
	}
	s.hangup()
	return true
}

// hangup closes the source: a pipe's writer gets SIGPIPE, a pty's session
// SIGHUP.
func (s *stream) hangup() {
	s.src.Close()
	s.eofOnce.Do(func() { close(s.eof) })
}

// write writes b whole to kcrash's stdout or stderr.
func (s *stream) write(b []byte) error {
	for len(b) > 0 {
		var n int
		var err error
		if s.wfd >= 0 {
			n, err = unix.Write(s.wfd, b)
		} else {
			n, err = s.w.Write(b)
		}
		if n > 0 {
			b = b[n:]
		}
		switch {
		case err == nil:
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			// Someone made the shared descriptor non-blocking: wait until it takes more.
			if s.wfd >= 0 {
				unix.Poll([]unix.PollFd{{Fd: int32(s.wfd), Events: unix.POLLOUT}}, -1)
			} else {
				time.Sleep(time.Millisecond)
			}
		default:
			s.dropped.Add(int64(len(b)))
			return err
		}
	}
	return nil
}

// checkStall is the watchdog's look at the stream: a write that has not
// returned for stallAfter starts the rescue reader.
func (s *stream) checkStall(now time.Time) {
	w := s.writing.Load()
	if w == 0 || now.UnixNano()-w < int64(stallAfter) || s.stalled.Load() {
		return
	}
	s.stalled.Store(true)
	go s.rescue()
}

// rescue drains the child while the pump's write is stuck: into the ring
// and log only; what stdout misses is counted.
func (s *stream) rescue() {
	s.rescueMu.Lock()
	defer s.rescueMu.Unlock()
	buf := make([]byte, len(s.buf))
	for s.stalled.Load() {
		s.readMu.Lock()
		if !s.stalled.Load() {
			s.readMu.Unlock()
			return
		}
		n := s.read(buf)
		if n > 0 {
			s.take(buf[:n])
			s.dropped.Add(int64(n))
		}
		s.readMu.Unlock()
		if n == 0 {
			s.eofOnce.Do(func() { close(s.eof) })
			return
		}
	}
}

// fanout writes every chunk to the ring and the log (memory or local disk).
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
