// Package wake turns a context's end into a readable fd, so that a loop
// sleeping in poll(2) on a kernel source (/dev/kmsg, a netlink socket) wakes
// at once when the run ends instead of polling on a timer.
package wake

import (
	"context"

	"golang.org/x/sys/unix"
)

// Waker's Fd becomes readable when its context is done.
type Waker struct {
	r, w        int
	quit, woken chan struct{}
}

// New starts watching ctx.
func New(ctx context.Context) (*Waker, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	w := &Waker{r: p[0], w: p[1], quit: make(chan struct{}), woken: make(chan struct{})}
	go func() {
		defer close(w.woken)
		select {
		case <-ctx.Done():
			unix.Write(w.w, []byte{0})
		case <-w.quit:
		}
	}()
	return w, nil
}

// PollFd is the entry to add to a poll(2) set.
func (w *Waker) PollFd() unix.PollFd { return unix.PollFd{Fd: int32(w.r), Events: unix.POLLIN} }

// Close stops watching; the watcher is done with the pipe before its fds
// are closed (a closed fd number is soon someone else's).
func (w *Waker) Close() {
	close(w.quit)
	<-w.woken
	unix.Close(w.r)
	unix.Close(w.w)
}
