package kmsgsource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/internal/wake"
)

// fakeRing plays the kernel's ring behind /dev/kmsg: every descriptor
// opened on it starts at the oldest record, a read returns one record, and
// a descriptor whose next record was overwritten gets EPIPE once and then
// the oldest record left. A pipe stands for the ring's poll wakeups.
type fakeRing struct {
	t    testing.TB
	mu   sync.Mutex
	recs []ringRec // oldest first
	errs []error   // the next reads fail with these
	seq  uint64
	r, w int

	opens int
	waits []time.Duration // every Wait's timeout, for the idle check
}

type ringRec struct {
	seq uint64
	raw string
}

func newRing(t testing.TB) *fakeRing {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	g := &fakeRing{t: t, r: p[0], w: p[1]}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return g
}

// write adds records at KERN_INFO with the next seqs; the text is
// "<prefix> <seq>".
func (g *fakeRing) write(n int, prefix string) { g.writeLevel(6, n, prefix) }

// writeLevel is write at syslog severity level.
func (g *fakeRing) writeLevel(level, n int, prefix string) {
	g.mu.Lock()
	for range n {
		g.seq++
		// The printk clock: a record every 10 ms.
		usec := g.seq * 10_000
		g.recs = append(g.recs, ringRec{g.seq, fmt.Sprintf("%d,%d,%d,-;%s %d\n", level, g.seq, usec, prefix, g.seq)})
	}
	g.mu.Unlock()
	g.notify()
}

// overwrite drops the records up to seq, as the kernel does when the ring is full.
func (g *fakeRing) overwrite(seq uint64) {
	g.mu.Lock()
	for len(g.recs) > 0 && g.recs[0].seq <= seq {
		g.recs = g.recs[1:]
	}
	g.mu.Unlock()
}

// fail makes the next read fail with err.
func (g *fakeRing) fail(err error) {
	g.mu.Lock()
	g.errs = append(g.errs, err)
	g.mu.Unlock()
	g.notify()
}

// reboot empties the ring: the next boot's seqs start again at 0.
func (g *fakeRing) reboot() {
	g.mu.Lock()
	g.recs, g.seq = nil, 0
	g.mu.Unlock()
}

func (g *fakeRing) notify() { unix.Write(g.w, []byte{0}) }

func (g *fakeRing) open(string) (device, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.opens++
	return &ringReader{ring: g}, nil
}

type ringReader struct {
	ring    *fakeRing
	next    uint64
	started bool
}

func (d *ringReader) Read(p []byte) (int, error) {
	g := d.ring
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) > 0 {
		err := g.errs[0]
		g.errs = g.errs[1:]
		return 0, err
	}
	if len(g.recs) == 0 {
		return 0, syscall.EAGAIN
	}
	if !d.started {
		d.started, d.next = true, g.recs[0].seq
	}
	if g.recs[0].seq > d.next {
		d.next = g.recs[0].seq
		return 0, syscall.EPIPE
	}
	for _, r := range g.recs {
		if r.seq >= d.next {
			if len(r.raw) > len(p) {
				return 0, syscall.EINVAL
			}
			d.next = r.seq + 1
			return copy(p, r.raw), nil
		}
	}
	return 0, syscall.EAGAIN
}

func (d *ringReader) ready() bool {
	g := d.ring
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) > 0 {
		return true
	}
	return len(g.recs) > 0 && (!d.started || g.recs[len(g.recs)-1].seq >= d.next)
}

func (d *ringReader) Wait(ctx context.Context, timeout time.Duration) error {
	d.ring.mu.Lock()
	d.ring.waits = append(d.ring.waits, timeout)
	d.ring.mu.Unlock()
	if d.ready() {
		return nil
	}
	wk, err := wake.New(ctx)
	if err != nil {
		return err
	}
	defer wk.Close()
	fds := []unix.PollFd{{Fd: int32(d.ring.r), Events: unix.POLLIN}, wk.PollFd()}
	_, err = unix.Poll(fds, max(1, int(timeout/time.Millisecond)))
	if errors.Is(err, unix.EINTR) {
		err = nil
	}
	var b [64]byte
	for {
		if n, _ := unix.Read(d.ring.r, b[:]); n <= 0 {
			break
		}
	}
	return err
}

func (d *ringReader) Close() error { return nil }
