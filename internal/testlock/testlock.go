// Package testlock serialises tests of different packages that share the
// kernel's message ring: `go test ./...` runs packages in parallel, and a
// device-wide GPU fault one test writes into /dev/kmsg is, rightly, tied by
// another test's run to itself.
package testlock

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Kmsg holds an exclusive lock on the kernel message ring for the rest of
// the test, for tests that write to /dev/kmsg. Its release stamps the lock
// file, so that KmsgQuiet knows when the ring last got test records.
func Kmsg(t testing.TB) {
	t.Helper()
	lock(t)
}

// KmsgQuiet is Kmsg for a test whose verdict depends on the ring: it also
// waits until no other test has written for margin (kcrash reads kernel
// messages from a margin before the run's start).
func KmsgQuiet(t testing.TB, margin time.Duration) {
	t.Helper()
	p := lock(t)
	if fi, err := os.Stat(p); err == nil {
		if wait := time.Until(fi.ModTime().Add(margin)); wait > 0 {
			time.Sleep(wait)
		}
	}
}

func lock(t testing.TB) string {
	p := filepath.Join(os.TempDir(), "kcrash-test-kmsg.lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("kmsg test lock: %v", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("kmsg test lock: %v", err)
	}
	t.Cleanup(func() {
		now := time.Now()
		os.Chtimes(p, now, now)
		f.Close()
	})
	return p
}
