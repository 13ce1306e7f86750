// Package kmsg reads the kernel's message ring through /dev/kmsg: one
// record parser and one reading loop for every reader of it (a run's
// collector, the node agent's journal).
package kmsg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/internal/wake"
)

// Record is one record of /dev/kmsg (Documentation/ABI/testing/dev-kmsg):
// "prio,seq,usec,flags[,...];text\n[ KEY=VALUE\n]...".
type Record struct {
	Seq      uint64
	Mono     time.Duration // since boot, on the kernel's printk clock
	Level    uint8         // syslog severity, 0 emerg .. 7 debug
	Facility uint8         // 0 kern; 1 user for anything written to /dev/kmsg from user space
	Text     string        // unescaped, except control characters other than tab and newline
	Dict     string        // the record's KEY=VALUE lines (SUBSYSTEM=pci, DEVICE=+pci:...), newline-separated
}

var ErrMalformed = errors.New("malformed /dev/kmsg record")

// Parse parses one record as read(2) returns it. It is on the hot
// path of a kernel flood, so it walks the bytes once and allocates only the
// strings it keeps.
func Parse(b []byte) (Record, error) {
	var r Record
	i := 0
	field := func() (uint64, bool) {
		start, v := i, uint64(0)
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			v = v*10 + uint64(b[i]-'0')
			i++
		}
		return v, i > start && i < len(b)
	}
	prio, ok := field()
	if !ok || b[i] != ',' {
		return r, ErrMalformed
	}
	i++
	seq, ok := field()
	if !ok || b[i] != ',' {
		return r, ErrMalformed
	}
	i++
	usec, ok := field()
	if !ok || (b[i] != ',' && b[i] != ';') {
		return r, ErrMalformed
	}
	// Flags and any fields later kernels add (caller id) are not needed.
	for i < len(b) && b[i] != ';' {
		i++
	}
	if i == len(b) {
		return r, ErrMalformed
	}
	i++
	r.Seq, r.Mono = seq, time.Duration(usec)*time.Microsecond
	r.Level, r.Facility = uint8(prio&7), uint8(prio>>3)

	body := b[i:]
	text := body
	var dict []byte
	for j, c := range body {
		if c == '\n' {
			text, dict = body[:j], body[j+1:]
			break
		}
	}
	r.Text = unescape(text)
	if len(dict) > 0 {
		r.Dict = parseDict(dict)
	}
	return r, nil
}

// unescape undoes the kernel's \xNN escaping of bytes outside printable
// ASCII (UTF-8 text, tabs in amdgpu's fault dumps, newlines of multi-line
// messages) but keeps other control characters escaped, so that kmsg.log
// holds no terminal escape sequences.
func unescape(b []byte) string {
	j := bytes.IndexByte(b, '\\')
	if j < 0 {
		return string(b)
	}
	// A Builder hands its buffer over as the string: one allocation.
	var out strings.Builder
	out.Grow(len(b))
	out.Write(b[:j])
	for k := j; k < len(b); k++ {
		c := b[k]
		if c == '\\' && k+3 < len(b) && b[k+1] == 'x' {
			if hi, ok1 := unhex(b[k+2]); ok1 {
				if lo, ok2 := unhex(b[k+3]); ok2 {
					v := hi<<4 | lo
					if v >= ' ' && v != 0x7f || v == '\t' || v == '\n' {
						out.WriteByte(v)
						k += 3
						continue
					}
				}
			}
		}
		out.WriteByte(c)
	}
	return out.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// parseDict turns " KEY=VALUE\n KEY=VALUE\n" into "KEY=VALUE\nKEY=VALUE".
func parseDict(b []byte) string {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		line := b
		rest := []byte(nil)
		for j, c := range b {
			if c == '\n' {
				line, rest = b[:j], b[j+1:]
				break
			}
		}
		b = rest
		if len(line) > 0 && line[0] == ' ' {
			line = line[1:]
		}
		if len(line) == 0 {
			continue
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out = append(out, line...)
	}
	return string(out)
}

// Level and facility names as `dmesg -x` spells them.
var Levels = [8]string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}

var facilities = [...]string{"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news",
	"uucp", "cron", "authpriv", "ftp", "12", "13", "14", "15",
	"local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"}

func Facility(f uint8) string {
	if int(f) < len(facilities) {
		return facilities[f]
	}
	return fmt.Sprint(f)
}

// ReadBuf fits the largest record the kernel hands out (text plus
// dictionary, CONSOLE_EXT_LOG_MAX); a smaller buffer makes read fail with EINVAL.
const ReadBuf = 8192

// Read reads records from src until src is caught up (EAGAIN on a
// non-blocking descriptor: nil), ends (io.EOF, which the ring never
// does: something else is mounted in its place), ctx is done, or a read
// fails otherwise. Each read returns one record. EPIPE means the kernel overwrote
// the record the reader stood on; the next read returns the oldest record
// still there, and the jump in sequence numbers tells how many were lost, so
// reading goes on (euank/go-kmsg-parser v2 compares the wrapped error with
// ==, misses it and stops: node-problem-detector's dead kernel monitor).
// add is called with each record.
func Read(ctx context.Context, src io.Reader, buf []byte, add func(Record), malformed func()) error {
	for n := 0; ; n++ {
		if n&255 == 255 && ctx.Err() != nil {
			return ctx.Err()
		}
		m, err := src.Read(buf)
		if m > 0 {
			if r, perr := Parse(buf[:m]); perr == nil {
				add(r)
			} else {
				malformed()
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EINTR):
		case errors.Is(err, syscall.EAGAIN):
			return nil
		default:
			return err
		}
	}
}

// BootTime is the wall time at which CLOCK_MONOTONIC was zero. The printk
// clock that stamps records runs within milliseconds of it (measured: 1.5 ms
// after 23 minutes of uptime), which a window's margin absorbs. /proc/stat's
// btime is whole seconds, and dmesg's own ISO times were 0.7 s early on the
// same records: too coarse to cut a window at a run's start.
func BootTime() time.Time {
	var r1, m, r2 unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &r1)
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m)
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &r2)
	wall := time.Unix(r1.Unix()).Add(time.Unix(r2.Unix()).Sub(time.Unix(r1.Unix())) / 2)
	return wall.Add(-time.Duration(m.Nano()))
}

// FD is a raw non-blocking /dev/kmsg descriptor. An os.File would hand
// it to Go's poller, which turns EAGAIN ("caught up") into waiting; the
// final drain needs to know where the ring ends.
type FD int

func Open(path string) (FD, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	return FD(fd), nil
}

// Read is one read(2), made as a raw system call: on a non-blocking
// descriptor of the ring it never sleeps (it returns EAGAIN once caught
// up), so the runtime's bookkeeping of a call that may block is not
// needed, and that bookkeeping woke the runtime's monitor thread, which
// then polled every 20 µs while the pass lasted: under a flood that
// polling cost the agent more than the reads themselves (perf).
func (f FD) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(f), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	if n == 0 {
		return 0, io.EOF
	}
	return int(n), nil
}

// Wait sleeps in poll(2) until a record arrives, wk fires, or d passes.
func (f FD) Wait(wk *wake.Waker, d time.Duration) error {
	fds := []unix.PollFd{{Fd: int32(f), Events: unix.POLLIN}, wk.PollFd()}
	_, err := unix.Poll(fds, max(1, int(d/time.Millisecond)))
	if errors.Is(err, unix.EINTR) {
		return nil
	}
	return err
}

func (f FD) Close() error { return unix.Close(int(f)) }

// Probe opens path as a reader of the ring would, and closes it again: the
// error says why it cannot be read (not root, no CAP_SYSLOG, no device).
func Probe(path string) error {
	fd, err := Open(path)
	if err != nil {
		return err
	}
	return fd.Close()
}
