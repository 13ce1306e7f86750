package supervisor

import (
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// FollowOptions tunes a Follower.
type FollowOptions struct {
	// Interval is how often the file is checked for growth, rotation and
	// truncation (default 250ms). Polling, like tail -F without inotify,
	// works on every filesystem a job's log can be on (NFS, Lustre, overlay).
	Interval time.Duration
	// Backlog is how many bytes of the file's existing end are copied first,
	// so a tail taken after the fact still holds what came before the attach.
	// Negative copies the whole file.
	Backlog int64
}

// FollowStats counts what happened to the followed path.
type FollowStats struct {
	Bytes       int64 // copied to the writer
	Rotations   int   // the path was replaced by another file
	Truncations int   // the file shrank under the reader
	Missing     bool  // the path did not exist when last checked
}

// Follower copies what is appended to a file into a writer, following the
// name like `tail -F`: when the file is moved away and a new one created,
// the old one is read to its end and the new one from its start; when it is
// truncated (copytruncate), reading restarts at 0.
type Follower struct {
	path string
	w    io.Writer
	o    FollowOptions

	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu    sync.Mutex
	stats FollowStats

	f      *os.File
	ino    uint64
	dev    uint64
	off    int64
	opened bool // a file was opened at least once (the backlog applies only then)
	buf    []byte
}

// Follow starts following path into w until Stop.
func Follow(path string, w io.Writer, o FollowOptions) *Follower {
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	f := &Follower{path: path, w: w, o: o, stop: make(chan struct{}), done: make(chan struct{}), buf: make([]byte, 64<<10)}
	go f.loop()
	return f
}

// Stop reads what was written up to now, then stops: the last lines before
// a crash are the ones that matter.
func (f *Follower) Stop() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}

// Stats reports what the follower has seen so far.
func (f *Follower) Stats() FollowStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *Follower) loop() {
	defer close(f.done)
	defer func() {
		if f.f != nil {
			f.f.Close()
		}
	}()
	tick := time.NewTicker(f.o.Interval)
	defer tick.Stop()
	for {
		f.step()
		select {
		case <-f.stop:
			f.step()
			return
		case <-tick.C:
		}
	}
}

func (f *Follower) step() {
	if f.f == nil {
		f.open()
		if f.f == nil {
			return
		}
	}
	f.drain()
	st, err := os.Stat(f.path)
	if err != nil {
		// Moved away and not yet replaced: the writer may still be writing
		// to the old file, so keep reading it.
		f.mu.Lock()
		f.stats.Missing = true
		f.mu.Unlock()
		return
	}
	f.mu.Lock()
	f.stats.Missing = false
	f.mu.Unlock()
	ino, dev := fileID(st)
	if ino != f.ino || dev != f.dev {
		f.drain() // what the writer added to the old file since
		f.f.Close()
		f.f = nil
		f.mu.Lock()
		f.stats.Rotations++
		f.mu.Unlock()
		f.open()
		if f.f != nil {
			f.drain()
		}
		return
	}
	if cur, err := f.f.Stat(); err == nil && cur.Size() < f.off {
		if _, err := f.f.Seek(0, io.SeekStart); err == nil {
			f.off = 0
			f.mu.Lock()
			f.stats.Truncations++
			f.mu.Unlock()
			f.drain()
		}
	}
}

// open opens the path: at its backlog the first time, at its start after a
// rotation or when the file appears later (all of it is new output).
func (f *Follower) open() {
	// Regular files only: opening a FIFO blocks until it has a writer, and a
	// device or socket is no log.
	if st, err := os.Stat(f.path); err != nil || !st.Mode().IsRegular() {
		f.mu.Lock()
		f.stats.Missing = err != nil
		f.mu.Unlock()
		// Whatever appears later was all written after the follow began.
		f.opened = true
		return
	}
	file, err := os.Open(f.path)
	if err != nil {
		return
	}
	st, err := file.Stat()
	if err != nil || !st.Mode().IsRegular() {
		file.Close()
		return
	}
	f.ino, f.dev = fileID(st)
	f.off = 0
	if !f.opened && f.o.Backlog >= 0 && st.Size() > f.o.Backlog {
		if off, err := file.Seek(st.Size()-f.o.Backlog, io.SeekStart); err == nil {
			f.off = off
		}
	}
	f.opened = true
	f.f = file
}

func (f *Follower) drain() {
	for {
		n, err := f.f.Read(f.buf)
		if n > 0 {
			f.w.Write(f.buf[:n])
			f.off += int64(n)
			f.mu.Lock()
			f.stats.Bytes += int64(n)
			f.mu.Unlock()
		}
		if err != nil || n == 0 {
			return // EOF, or an error the next step retries
		}
	}
}

func fileID(st os.FileInfo) (ino, dev uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino, uint64(s.Dev)
	}
	return 0, 0
}
