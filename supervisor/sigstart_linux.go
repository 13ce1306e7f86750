package supervisor

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// blockedAtStart is the set of signals blocked when kcrash started, as far
// as it can still be known: the Go runtime unblocks on every thread, before
// any of kcrash's code runs, the signals it must handle itself (SIGTERM,
// SIGINT, SIGHUP, SIGQUIT, SIGSEGV, SIGILL...), so only the others (SIGUSR1,
// SIGUSR2, SIGALRM, real-time signals...) are seen here. It is read before
// os/signal changes any thread's mask. The child inherits the same set from
// the runtime's fork; such signals are not forwarded either.
var blockedAtStart = readSigBlk()

func readSigBlk() uint64 {
	f, err := os.Open("/proc/thread-self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "SigBlk:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n
		}
	}
	return 0
}

// BlockedAtStart reports whether s was blocked when kcrash started (as far
// as can be known; see blockedAtStart).
func BlockedAtStart(s syscall.Signal) bool { return blockedAtStartup(s) }

func blockedAtStartup(s syscall.Signal) bool {
	return s >= 1 && s <= 64 && blockedAtStart&(1<<(uint(s)-1)) != 0
}
