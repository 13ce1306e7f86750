package supervisor

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/wake"
	"golang.org/x/sys/unix"
)

// The kernel's process events connector (linux/cn_proc.h) reports every
// fork, exec and exit as it happens. Sampling /proc once a second misses a
// worker that is started and killed in between, and the kernel later names
// exactly that pid (the OOM killer, a segfault line); the events catch it,
// and say how each descendant died although nobody waited for it.
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procEventFork     = 0x00000001
	procEventExec     = 0x00000002
	procEventExit     = 0x80000000
	cnMsgLen          = 20 // struct cn_msg without data
	procEventHdrLen   = 16 // what, cpu, timestamp_ns
)

// Events follows process events until ctx is done. It returns an error at
// once when the connector cannot be used (not root, a container without
// CAP_NET_ADMIN): sampling then stands alone.
func (t *Tracker) Events(ctx context.Context) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc, Pid: uint32(os.Getpid())}); err != nil {
		return err
	}
	if err := listen(fd); err != nil {
		return err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	// Sleep in poll until an event or the run's end: no periodic wakeups
	// while the node is quiet, and no delay between the run's end and the bundle.
	wk, err := wake.New(ctx)
	if err != nil {
		return err
	}
	defer wk.Close()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, wk.PollFd()}
	buf := make([]byte, 64<<10)
	for ctx.Err() == nil {
		n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				unix.Poll(fds, -1)
				continue
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.ENOBUFS) {
				continue // events were lost; the next sample catches up
			}
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			t.handleEvent(m.Data)
		}
	}
	return nil
}

func listen(fd int) error {
	msg := make([]byte, unix.NLMSG_HDRLEN+cnMsgLen+4)
	le := binary.LittleEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.NLMSG_DONE)
	le.PutUint32(msg[12:], uint32(os.Getpid()))
	cn := msg[unix.NLMSG_HDRLEN:]
	le.PutUint32(cn[0:], cnIdxProc)
	le.PutUint32(cn[4:], cnValProc)
	le.PutUint16(cn[16:], 4)
	le.PutUint32(cn[cnMsgLen:], procCnMcastListen)
	return unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// handleEvent applies one proc_event (after its cn_msg header).
func (t *Tracker) handleEvent(data []byte) {
	if len(data) < cnMsgLen+procEventHdrLen+8 {
		return
	}
	ev := data[cnMsgLen:]
	le := binary.LittleEndian
	what := le.Uint32(ev[0:])
	d := ev[procEventHdrLen:]
	switch what {
	case procEventFork:
		if len(d) < 16 {
			return
		}
		parentTgid, childPid, childTgid := int32(le.Uint32(d[4:])), int32(le.Uint32(d[8:])), int32(le.Uint32(d[12:]))
		if childPid != childTgid {
			return // a new thread, not a process
		}
		t.forked(parentTgid, childTgid)
	case procEventExec:
		t.execed(int32(le.Uint32(d[4:])))
	case procEventExit:
		if len(d) < 16 {
			return
		}
		pid, tgid := int32(le.Uint32(d[0:])), int32(le.Uint32(d[4:]))
		if pid != tgid {
			return // a thread
		}
		t.exited(tgid, syscall.WaitStatus(le.Uint32(d[8:])))
	}
}

func (t *Tracker) forked(parent, child int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.procs[parent]
	if !ok || p.Exited {
		return
	}
	now := time.Now()
	// A fork is a copy of its parent until it execs.
	rec := &evidence.Process{Pid: child, PPid: parent, Name: p.Name, Cmdline: p.Cmdline, StartTime: now, FirstSeen: now, LastSeen: now}
	t.procs[child] = rec
	t.starts[child] = seeded
}

func (t *Tracker) execed(pid int32) {
	t.mu.Lock()
	rec, ok := t.procs[pid]
	t.mu.Unlock()
	if !ok {
		return
	}
	// Read outside the lock: /proc of a process that is exiting can be slow.
	comm, err := t.fs.Comm(int(pid))
	if err != nil {
		return
	}
	args, _ := t.fs.Args(int(pid))
	t.mu.Lock()
	defer t.mu.Unlock()
	rec.Name = strings.TrimSpace(comm)
	if len(args) > 0 && args[0] != "" {
		rec.Cmdline = args
	}
	rec.LastSeen = time.Now()
}

func (t *Tracker) exited(pid int32, ws syscall.WaitStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec, ok := t.procs[pid]
	if !ok || rec.Exited {
		return
	}
	rec.Exited = true
	rec.LastSeen = time.Now()
	switch {
	case ws.Signaled():
		rec.ExitSignal = unix.SignalName(ws.Signal())
		rec.CoreDumped = ws.CoreDump()
	case ws.Exited():
		c := ws.ExitStatus()
		rec.ExitCode = &c
	}
}
