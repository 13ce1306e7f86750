package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/internal/procfs"
)

// ExitStatus is how a watched process (one kcrash did not start) ended.
type ExitStatus struct {
	// Known is false when kcrash saw the process go but could not learn its
	// status: only its parent or a tracer can, and kcrash was neither.
	Known      bool
	Code       int
	Signal     syscall.Signal // 0 when it exited normally
	CoreDumped bool
	// Reason says why Known is false ("not traced: ...").
	Reason string
	End    time.Time
	// Detached: Detach was called first and the process was left running.
	Detached bool
}

// WatchOptions chooses how Watch follows the process.
type WatchOptions struct {
	// NoPtrace, when set, says why PTRACE_SEIZE is not to be tried
	// ("--no-ptrace"); the exit status will then be unknown.
	NoPtrace string
	// Poll is the /proc polling period when neither ptrace nor pidfd works.
	Poll time.Duration
}

// Watcher follows one process that kcrash did not start until it exits or
// is detached from.
type Watcher struct {
	pid    int
	method string
	why    string
	done   chan struct{}
	detach chan struct{}
	once   sync.Once
	res    ExitStatus
}

// Watch starts watching pid. It tries PTRACE_SEIZE first (the only way to
// learn a non-child's exit status), then a pidfd, then polling /proc; Method
// and NotTracedReason say which was used and why ptrace was not.
func Watch(pid int, o WatchOptions) (*Watcher, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("invalid pid %d", pid)
	}
	if pid == os.Getpid() {
		return nil, fmt.Errorf("pid %d is kcrash itself", pid)
	}
	start, err := procStartTicks(pid)
	if err != nil {
		return nil, fmt.Errorf("no process with pid %d", pid)
	}
	w := &Watcher{pid: pid, done: make(chan struct{}), detach: make(chan struct{})}
	if o.NoPtrace != "" {
		w.why = o.NoPtrace
	} else {
		ready := make(chan error, 1)
		go w.trace(ready)
		err := <-ready
		if err == nil {
			w.method = "ptrace"
			return w, nil
		}
		w.why = seizeFailure(pid, err)
	}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		w.method = "pidfd"
		go w.pidfdWait(fd)
		return w, nil
	} else if errors.Is(err, unix.ESRCH) {
		w.method = "pidfd"
		w.finish(ExitStatus{Reason: w.unknownReason(), End: time.Now()})
		return w, nil
	}
	w.method = "poll"
	interval := o.Poll
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	go w.pollWait(start, interval)
	return w, nil
}

// Pid is the watched process.
func (w *Watcher) Pid() int { return w.pid }

// Method is "ptrace", "pidfd" or "poll".
func (w *Watcher) Method() string { return w.method }

// NotTracedReason is why ptrace is not used, "" when it is.
func (w *Watcher) NotTracedReason() string { return w.why }

// Done is closed when the process has exited or Detach has taken effect.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Wait blocks until Done and returns how the watch ended.
func (w *Watcher) Wait() ExitStatus {
	<-w.done
	return w.res
}

// Detach stops watching and leaves the process running (PTRACE_DETACH when
// traced). Wait then returns Detached, unless the process exited first.
func (w *Watcher) Detach() {
	w.once.Do(func() { close(w.detach) })
}

func (w *Watcher) finish(r ExitStatus) {
	w.res = r
	close(w.done)
}

func (w *Watcher) unknownReason() string {
	return fmt.Sprintf("not traced: %s; only the fact of exit was seen (%s), not its status", w.why, w.method)
}

// ptraceEventShift: a ptrace-stop's PTRACE_EVENT_* is in bits 16-23 of its
// wait status (x/sys/unix's TrapCause reads it only for SIGTRAP stops, and
// a group-stop under PTRACE_SEIZE reports the stopping signal).
const ptraceEventShift = 16

// ptraceRaw makes requests x/sys/unix has no wrapper for with these
// arguments (SEIZE with options, LISTEN, DETACH or CONT with a signal).
func ptraceRaw(req, pid int, addr, data uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, uintptr(req), uintptr(pid), addr, data, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// trace is the tracer: every ptrace request must come from the thread that
// seized, so this goroutine owns its OS thread for its whole life and never
// unlocks it (the thread then exits with the goroutine, which also detaches
// anything still traced should we return early).
func (w *Watcher) trace(ready chan<- error) {
	runtime.LockOSThread()
	// PTRACE_SEIZE, unlike ATTACH, does not stop the target; TRACEEXIT gives a
	// stop at exit even when the final wait status would be lost.
	if err := ptraceRaw(unix.PTRACE_SEIZE, w.pid, 0, unix.PTRACE_O_TRACEEXIT); err != nil {
		ready <- err
		return
	}
	ready <- nil

	// wait4 cannot be interrupted to serve Detach, so wait without blocking
	// and sleep on SIGCHLD (sent to the tracer at every tracee stop), with a
	// ticker in case a SIGCHLD is coalesced.
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	defer signal.Stop(sigchld)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()

	var eventExit *unix.WaitStatus // status read at PTRACE_EVENT_EXIT
	detaching := false
	detachReq := w.detach
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(w.pid, &ws, unix.WALL|unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD: the trace link is gone without an exit report (a
			// thread other than the one seized called execve and took over
			// the pid).
			r := ExitStatus{End: time.Now()}
			if eventExit != nil {
				r = statusOf(*eventExit, r.End)
			} else {
				r.Reason = fmt.Sprintf("trace lost (wait4: %v) before the exit status was seen", err)
			}
			w.finish(r)
			return
		}
		if wpid == 0 {
			select {
			case <-detachReq:
				detachReq = nil
				detaching = true
				// The target is running; it must be in a ptrace-stop for
				// PTRACE_DETACH, and INTERRUPT makes one without a signal.
				if err := ptraceRaw(unix.PTRACE_INTERRUPT, w.pid, 0, 0); err != nil && !errors.Is(err, unix.ESRCH) {
					w.finish(ExitStatus{Detached: true, End: time.Now(), Reason: fmt.Sprintf("PTRACE_INTERRUPT: %v", err)})
					return
				}
			case <-sigchld:
			case <-tick.C:
			}
			continue
		}
		switch {
		case ws.Exited() || ws.Signaled():
			w.finish(statusOf(ws, time.Now()))
			return
		case ws.Stopped():
			event := (uint32(ws) >> ptraceEventShift) & 0xff
			sig := ws.StopSignal()
			switch event {
			case unix.PTRACE_EVENT_EXIT:
				if msg, err := unix.PtraceGetEventMsg(w.pid); err == nil {
					st := unix.WaitStatus(msg)
					eventExit = &st
				}
				// Dying: let it finish even if a detach is pending; its
				// exit is worth more than leaving it alone.
				ptraceRaw(unix.PTRACE_CONT, w.pid, 0, 0)
			case unix.PTRACE_EVENT_STOP:
				switch {
				case detaching:
					// A group-stopped target goes back into its group stop on
					// detach. Should DETACH fail otherwise, this thread's exit
					// detaches all the same.
					if err := ptraceRaw(unix.PTRACE_DETACH, w.pid, 0, 0); err == nil || !errors.Is(err, unix.ESRCH) {
						w.finish(ExitStatus{Detached: true, End: time.Now()})
						return
					}
				case isStopSignal(sig):
					// Group-stop (SIGSTOP, ^Z): LISTEN keeps it stopped, as it
					// would be untraced, while still reporting SIGCONT; CONT
					// would silently undo the stop.
					ptraceRaw(unix.PTRACE_LISTEN, w.pid, 0, 0)
				default:
					ptraceRaw(unix.PTRACE_CONT, w.pid, 0, 0)
				}
			default:
				// Signal-delivery-stop: the signal must be re-injected or the
				// target never receives it (its SIGSEGV, SIGTERM, SIGCHLD...).
				if detaching {
					if err := ptraceRaw(unix.PTRACE_DETACH, w.pid, 0, uintptr(sig)); err == nil || !errors.Is(err, unix.ESRCH) {
						w.finish(ExitStatus{Detached: true, End: time.Now()})
						return
					}
					continue
				}
				ptraceRaw(unix.PTRACE_CONT, w.pid, 0, uintptr(sig))
			}
		}
	}
}

func isStopSignal(s syscall.Signal) bool {
	switch s {
	case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return true
	}
	return false
}

func statusOf(ws unix.WaitStatus, end time.Time) ExitStatus {
	r := ExitStatus{Known: true, End: end}
	if ws.Signaled() {
		r.Signal = ws.Signal()
		r.CoreDumped = ws.CoreDump()
	} else {
		r.Code = ws.ExitStatus()
	}
	return r
}

// seizeFailure explains a failed PTRACE_SEIZE in terms a user can act on.
func seizeFailure(pid int, err error) string {
	msg := fmt.Sprintf("PTRACE_SEIZE: %v", err)
	if !errors.Is(err, unix.EPERM) {
		return msg
	}
	if tp := tracerPid(pid); tp > 0 {
		name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", tp))
		return fmt.Sprintf("%s (pid %d is already traced by pid %d %s)", msg, pid, tp, strings.TrimSpace(string(name)))
	}
	if b, e := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); e == nil {
		if s := strings.TrimSpace(string(b)); s != "0" {
			return fmt.Sprintf("%s (kernel.yama.ptrace_scope is %s; run as root or with CAP_SYS_PTRACE)", msg, s)
		}
	}
	if os.Geteuid() != 0 {
		return msg + " (another user's process, or a setuid one: run as root or with CAP_SYS_PTRACE)"
	}
	return msg + " (no CAP_SYS_PTRACE in this container?)"
}

func tracerPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// pidfdWait waits for the pidfd to become readable: the process is gone
// (exited or a zombie). Its status is not available to a non-parent.
func (w *Watcher) pidfdWait(fd int) {
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		select {
		case <-w.detach:
			w.finish(ExitStatus{Detached: true, End: time.Now()})
			return
		default:
		}
		n, err := unix.Poll(fds, 200)
		if errors.Is(err, unix.EINTR) || err == nil && n == 0 {
			continue
		}
		w.finish(ExitStatus{Reason: w.unknownReason(), End: time.Now()})
		return
	}
}

// pollWait is the last resort (no pidfd: kernels before 5.3): the pid is
// gone, a zombie, or reused by a process with another start time.
func (w *Watcher) pollWait(start uint64, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-w.detach:
			w.finish(ExitStatus{Detached: true, End: time.Now()})
			return
		case <-tick.C:
		}
		st, err := procStartTicks(w.pid)
		if err != nil || st != start || procState(w.pid) == 'Z' {
			w.finish(ExitStatus{Reason: w.unknownReason(), End: time.Now()})
			return
		}
	}
}

// proc is where the watcher reads processes.
var proc procfs.FS

func procState(pid int) byte {
	st, err := proc.Stat(pid)
	if err != nil {
		return 0
	}
	return st.State
}

// procStartTicks is field 22 (starttime, clock ticks since boot): with the
// pid it identifies a process across pid reuse.
func procStartTicks(pid int) (uint64, error) {
	st, err := proc.Stat(pid)
	return st.StartTicks, err
}

// ProcStartTime is when pid started. /proc/PID/stat counts clock ticks
// since boot; /proc/uptime (centiseconds) places boot more precisely than
// /proc/stat's btime (whole seconds).
func ProcStartTime(pid int) (time.Time, error) {
	ticks, err := procStartTicks(pid)
	if err != nil {
		return time.Time{}, err
	}
	now := time.Now()
	b, err := os.ReadFile(proc.Path("uptime"))
	if err != nil {
		return time.Time{}, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return time.Time{}, errors.New("/proc/uptime: empty")
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("/proc/uptime: %v", err)
	}
	boot := now.Add(-time.Duration(up * float64(time.Second)))
	return boot.Add(procfs.Since(ticks)).Round(time.Second / procfs.UserHZ), nil
}
