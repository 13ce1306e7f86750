// Package testlock is the one door through which tests write into the
// kernel's message ring (/dev/kmsg). Such a test runs only when asked
// (KCRASH_TEST_KMSG=1, which .ci/run sets; without it the test skips, and
// fails under CI=true), as root; every record it writes carries the marker
// kernlog.TestMark(token) with a token of its own, which kcrash reads as
// evidence only in a process whose kernlog.TestMarkEnv holds that token
// (Kmsg sets it for the test and the kcrash it starts). So a GPU fault one
// test writes is invisible to every other test's kcrash and to any kcrash
// run on the host later, and tests of different packages may run at once.
//
// Kmsg also takes an exclusive flock on /dev/kmsg itself for the rest of
// the test (no lock file is created anywhere), and KmsgQuiet adds a quiet
// period, measured on the ring, after other tests' marked records.
package testlock

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/kernlog"
	"golang.org/x/sys/unix"
)

// KmsgEnv is the variable that lets tests write into /dev/kmsg.
const KmsgEnv = "KCRASH_TEST_KMSG"

// Writer writes marked records for one test.
type Writer struct {
	// Token is this test's token; kernlog.TestMarkEnv holds it for the
	// rest of the test.
	Token string
}

// Mark is the marker every record of this test starts with.
func (w *Writer) Mark() string { return kernlog.TestMark(w.Token) }

// Write writes one record at the level (0..7), every line of it marked (a
// record of several lines is how NVRM prints "fallen off the bus"). One
// open per record: the kernel rate-limits each writer
// (printk_devkmsg=ratelimit lets 10 in).
func (w *Writer) Write(t testing.TB, level int, text string) {
	t.Helper()
	text = strings.ReplaceAll(text, "\n", "\n"+w.Mark())
	if err := os.WriteFile("/dev/kmsg", fmt.Appendf(nil, "<%d>%s%s\n", level, w.Mark(), text), 0); err != nil {
		t.Fatalf("write /dev/kmsg: %v", err)
	}
}

// Kmsg is for a test that writes into /dev/kmsg: it skips (fails under CI)
// unless asked and able, holds the ring's lock for the rest of the test,
// and returns the test's writer.
func Kmsg(t testing.TB) *Writer {
	t.Helper()
	if os.Getenv(KmsgEnv) != "1" {
		testenv.Skip(t, "writes records into the host's kernel log (/dev/kmsg); set %s=1 to run", KmsgEnv)
	}
	testenv.NeedRoot(t, "writing records into /dev/kmsg")
	if f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err != nil {
		testenv.Skip(t, "/dev/kmsg not writable: %v", err)
	} else {
		f.Close()
	}
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		testenv.Skip(t, "/dev/kmsg not readable: %v", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		t.Fatalf("lock /dev/kmsg: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	w := &Writer{Token: strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(os.Getpid())}
	t.Setenv(kernlog.TestMarkEnv, w.Token)
	return w
}

// KmsgQuiet is Kmsg for a test whose verdict depends on the ring: it also
// waits until margin has passed since the newest marked record (of any
// test) in the ring; kcrash reads kernel messages from a margin before the
// run's start.
func KmsgQuiet(t testing.TB, margin time.Duration) *Writer {
	t.Helper()
	w := Kmsg(t)
	last, err := lastMarked()
	if err != nil {
		t.Fatalf("read /dev/kmsg: %v", err)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	// The ring stamps records with the kernel's local clock, close to but
	// not CLOCK_MONOTONIC: the wait is capped at margin.
	if wait := min(last+margin-time.Duration(ts.Nano()), margin); last > 0 && wait > 0 {
		time.Sleep(wait) // no event to wait for: the quiet period is time itself
	}
	return w
}

// lastMarked is the time since boot of the newest marked record in the
// ring, 0 if none.
func lastMarked() (time.Duration, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var last time.Duration
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return last, nil
		case errors.Is(err, unix.EPIPE):
			continue // overwritten while reading: the next read goes on
		case err != nil:
			return last, err
		case n == 0:
			return last, nil
		}
		// "prio,seq,usec,flags[,...];text\n"
		head, text, ok := bytes.Cut(buf[:n], []byte{';'})
		if !ok || !bytes.HasPrefix(text, []byte(kernlog.TestMarkPrefix)) {
			continue
		}
		f := bytes.SplitN(head, []byte{','}, 4)
		if len(f) < 3 {
			continue
		}
		if us, err := strconv.ParseInt(string(f[2]), 10, 64); err == nil {
			last = max(last, time.Duration(us)*time.Microsecond)
		}
	}
}
