package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dieOf ends kcrash by sig, as the child ended, so that a shell sees a
// signal death (a for loop stops at ^C). kcrash's own core dump is disabled
// first: the child's is the one that matters. It returns only where the
// signal cannot kill kcrash (PID 1 of a namespace ignores default-action
// signals); the caller then exits 128+N.
func dieOf(sig syscall.Signal) {
	if os.Getpid() == 1 {
		return
	}
	unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	// A core_pattern pipe (systemd-coredump, apport) ignores RLIMIT_CORE;
	// a process that is not dumpable gets no core at all.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	runtime.LockOSThread()
	// The Go runtime owns the handlers; set the default action under it,
	// as the runtime's own dieFromSignal does.
	var act [4]uint64 // struct kernel_sigaction: handler SIG_DFL, flags, restorer, mask
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act[0])), 0, 8, 0, 0)
	set := uint64(1) << (uint(sig) - 1)
	unix.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_UNBLOCK, uintptr(unsafe.Pointer(&set)), 0, 8, 0, 0)
	unix.Tgkill(os.Getpid(), unix.Gettid(), sig)
	time.Sleep(100 * time.Millisecond)
}

// signalByName accepts "USR2", "SIGUSR2" or "12".
func signalByName(name string) (syscall.Signal, bool) {
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), true
	}
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	s := unix.SignalNum(n)
	return s, s != 0
}
