package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A child of kcrash begins with the signal state kcrash itself began with,
// as it would have without kcrash (tini's "sigconf"): the same blocked
// signals and the same ignored ones. The Go runtime takes over most signals
// before any of kcrash's code runs: it installs its own handlers (which a
// fork resets to the default action, losing an inherited SIG_IGN) and
// unblocks on every thread the signals it must see (SIGTERM, SIGINT,
// SIGQUIT, SIGSEGV, SIGILL...). What kcrash began with is then known
// exactly only from the runtime's own record of it (startsignals_runtime_linux.go,
// built with -tags kcrash_startsignals); without that tag it is known for
// the signals the runtime leaves alone, and for SIGHUP and SIGINT ignored.
type signalSet uint64

func (s signalSet) has(sig syscall.Signal) bool {
	return sig >= 1 && sig <= 64 && s&(1<<(uint(sig)-1)) != 0
}

func (s signalSet) String() string { return strconv.FormatUint(uint64(s), 16) }

var (
	// ignoredAtStart and blockedAtStart are read once, at package
	// initialisation, before any os/signal call changes them.
	ignoredAtStart, blockedAtStart = readStartSignals()
)

// selfIgnored are the signals kcrash would forward or die of: ignored at
// start, kcrash ignores them too (the job was meant to), which also leaves
// them ignored for the child. Any other signal ignored at start (SIGSEGV,
// SIGILL, SIGCHLD, SIGPIPE... which the runtime needs or kcrash relies on)
// is set to SIG_IGN for the child alone, by execStep.
var selfIgnored = []syscall.Signal{syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM}

// execEnv asks a kcrash process to be the exec step of a child start (see
// StartChild): "IGNORED:BLOCKED:PATH", the two signal sets in hexadecimal.
const execEnv = "KCRASH_EXEC_SIGNALS"

func init() {
	// Before anything else: a kcrash started as a child's exec step never
	// gets further than this. Package initialisation is the earliest point
	// that also holds in a test binary standing in for kcrash.
	if v, ok := os.LookupEnv(execEnv); ok {
		execStep(v)
	}
	for _, s := range selfIgnored {
		if ignoredAtStart.has(s) && !signal.Ignored(s) {
			signal.Ignore(s)
		}
	}
}

func readStartSignals() (ignored, blocked signalSet) {
	for s := syscall.Signal(1); s <= 64; s++ {
		if disposition(s) == sigIgn {
			ignored |= 1 << (uint(s) - 1)
		}
	}
	var cur unix.Sigset_t
	unix.PthreadSigmask(unix.SIG_BLOCK, nil, &cur)
	blocked = signalSet(cur.Val[0])
	if ign, blk, ok := runtimeStartSignals(); ok {
		ignored |= ign
		blocked = blk
	}
	return ignored, blocked
}

// StartSignalsExact reports whether this build knows every signal ignored
// or blocked when it started (see runtimeStartSignals).
func StartSignalsExact() bool { return startSignalsExact }

// IgnoredAtStart reports whether s was ignored when kcrash started: it
// stays ignored, by kcrash and the child alike, and is not forwarded.
func IgnoredAtStart(s syscall.Signal) bool { return ignoredAtStart.has(s) || signal.Ignored(s) }

// BlockedAtStart reports whether s was blocked when kcrash started: the
// child starts with it blocked, and kcrash does not forward it (SPEC §2).
// kcrash must still catch it where the runtime unblocked it (SIGTERM,
// SIGINT, SIGHUP, SIGQUIT), or it would die of it.
func BlockedAtStart(s syscall.Signal) bool { return blockedAtStart.has(s) }

const (
	sigDfl = 0
	sigIgn = 1
)

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64:
// handler, flags, restorer, mask.
type kernelSigaction [4]uint64

// rtSigaction is rt_sigaction(2) itself, past os/signal and the runtime:
// act (when not nil) becomes sig's action, old (when not nil) gets the one
// before.
func rtSigaction(sig syscall.Signal, act, old *kernelSigaction) syscall.Errno {
	var a, o uintptr
	if act != nil {
		a = uintptr(unsafe.Pointer(&act[0]))
	}
	if old != nil {
		o = uintptr(unsafe.Pointer(&old[0]))
	}
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), a, o, 8, 0, 0)
	return e
}

func disposition(s syscall.Signal) uint64 {
	var old kernelSigaction
	if rtSigaction(s, nil, &old) != 0 {
		return sigDfl
	}
	return old[0]
}

// StartChild runs start, which forks and execs cmd, so that the program
// begins with the signal mask and the ignored signals kcrash began with.
// The mask is the forking thread's: set on a locked thread for the fork.
// An ignored signal survives an exec but not the runtime's fork, which
// resets every signal it handles to the default; where kcrash's own
// dispositions differ from the start's (a signal ignored at start that the
// runtime handles, or one kcrash ignores for itself), the child goes through
// an exec step (kcrash again, see execStep) that sets them and execs the
// program: one more exec, only then.
func StartChild(cmd *exec.Cmd, start func() error) error {
	differ := false
	for s := syscall.Signal(1); s <= 64 && !differ; s++ {
		differ = s != syscall.SIGKILL && s != syscall.SIGSTOP && ignoredAtStart.has(s) != (disposition(s) == sigIgn)
	}
	if differ {
		env := cmd.Env
		if env == nil {
			env = os.Environ()
		}
		cmd.Env = append(env[:len(env):len(env)], fmt.Sprintf("%s=%s:%s:%s", execEnv, ignoredAtStart, blockedAtStart, cmd.Path))
		cmd.Path = "/proc/self/exe"
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var want, old unix.Sigset_t
	want.Val[0] = uint64(blockedAtStart)
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &want, &old); err != nil {
		return start()
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return start()
}

// execStep is the child's side of StartChild: every signal ignored or at the
// default as at kcrash's start (this process's own runtime has just taken
// them over again), the mask as at the start, then exec the program with
// this process's arguments and environment (less execEnv). It does not
// return.
func execStep(v string) {
	os.Unsetenv(execEnv)
	f := strings.SplitN(v, ":", 3)
	var sets [2]uint64
	ok := len(f) == 3
	for i := 0; ok && i < 2; i++ {
		var err error
		sets[i], err = strconv.ParseUint(f[i], 16, 64)
		ok = err == nil
	}
	if !ok {
		fmt.Fprintf(os.Stderr, "kcrash: bad %s value %q\n", execEnv, v)
		os.Exit(126)
	}
	runtime.LockOSThread()
	for s := syscall.Signal(1); s <= 64; s++ {
		act := kernelSigaction{sigDfl}
		if signalSet(sets[0]).has(s) {
			act[0] = sigIgn
		}
		rtSigaction(s, &act, nil)
	}
	var mask unix.Sigset_t
	mask.Val[0] = sets[1]
	unix.PthreadSigmask(unix.SIG_SETMASK, &mask, nil)
	err := syscall.Exec(f[2], os.Args, os.Environ())
	fmt.Fprintf(os.Stderr, "kcrash: cannot run %s: %v\n", os.Args[0], err)
	if err == syscall.ENOENT {
		os.Exit(127)
	}
	os.Exit(126)
}
