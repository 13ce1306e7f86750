package supervisor

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/kcrash/kcrash/internal/procfs"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// A shell's job control sees kcrash and its child as one job, as it saw the
// bare command: started with `&` the job runs in the background until it
// reads the terminal; ^Z or kill -TSTP suspends it and the shell gets its
// prompt back; fg and bg resume it. sudo with its pty works the same way.
//
// kcrash touches the terminal (raw mode, reading stdin, handing it to a
// --no-pty child) only while its process group is the terminal's
// foreground: from the background the kernel would stop kcrash with
// SIGTTIN/SIGTTOU although the bare command never touched the terminal.
// When the child stops (a --no-pty child typed ^Z or reading the terminal
// from the background, or a stop kcrash asked for), kcrash gives the
// terminal its settings back and stops itself with the same signal, so the
// shell reports the job stopped as it would have; the SIGCONT of fg or bg
// resumes both, the terminal raw again only in the foreground.

// foreground reports whether kcrash's process group is the terminal fd's
// foreground group.
func foreground(fd int) bool {
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// goRaw puts the user's terminal in raw mode if the run is interactive, kcrash
// is in the terminal's foreground and the terminal is not raw yet. It returns
// what was typed before, still in the terminal's line buffer: whole lines,
// and each end of file typed as the child's VEOF (once raw, an end of file
// would read as a NUL).
func (c *Child) goRaw() []byte {
	c.termMu.Lock()
	defer c.termMu.Unlock()
	if !c.keys || c.raw || !foreground(c.inFd) {
		return nil
	}
	pending := pendingInput(c.inFd, c.veof)
	st, err := term.MakeRaw(c.inFd)
	if err != nil {
		return pending
	}
	c.cooked, c.raw = st, true
	return pending
}

// goCooked gives the terminal back the settings it had before goRaw.
func (c *Child) goCooked() {
	c.termMu.Lock()
	defer c.termMu.Unlock()
	c.cookedLocked()
}

func (c *Child) cookedLocked() {
	if !c.raw {
		return
	}
	// From the background (the shell already took the terminal) the
	// kernel would answer with SIGTTOU: a restore must still happen.
	withSignalIgnored(syscall.SIGTTOU, func() { term.Restore(c.inFd, c.cooked) })
	c.raw = false
}

// goCookedUnlessBusy is goCooked, unless a read of the terminal holds it:
// one that met SIGTTIN (kcrash stopped from outside, then sent to the
// background) restarts until kcrash stops, and the shell that put kcrash in
// the background has set the terminal for itself already.
func (c *Child) goCookedUnlessBusy() {
	if !c.termMu.TryLock() {
		return
	}
	defer c.termMu.Unlock()
	c.cookedLocked()
}

// giveTerminal hands the terminal to a --no-pty child's process group, the
// foreground the bare command would have had, when kcrash holds it.
func (c *Child) giveTerminal() {
	if c.opts.NoPty && c.inFd >= 0 && c.pid > 0 && foreground(c.inFd) {
		unix.IoctlSetPointerInt(c.inFd, unix.TIOCSPGRP, c.pid)
	}
}

// takeTerminal takes the terminal back from a --no-pty child's group after
// the run, only if that group still holds it: never from the shell.
func (c *Child) takeTerminal() {
	if pgrp, err := unix.IoctlGetInt(c.inFd, unix.TIOCGPGRP); err == nil && pgrp == c.pid {
		withSignalIgnored(syscall.SIGTTOU, func() { unix.IoctlSetPointerInt(c.inFd, unix.TIOCSPGRP, unix.Getpgrp()) })
	}
}

// withSignalIgnored runs f with sig ignored, then puts back the handler it
// had (the runtime's, or the default), without going through os/signal,
// which would leave the runtime's handler installed afterwards.
func withSignalIgnored(sig syscall.Signal, f func()) {
	ign := kernelSigaction{sigIgn}
	var old kernelSigaction
	rtSigaction(sig, &ign, &old)
	defer rtSigaction(sig, &old, nil)
	f()
}

// suspend is the job asked to stop with sig (SIGTSTP, SIGTTIN or SIGTTOU
// sent to kcrash, ^Z typed through the pty, or the kernel's SIGTTOU for a
// write of kcrash's to a tostop terminal from the background): the child's
// group stops, and watchStops then stops kcrash with sig. The group gets
// SIGSTOP, as dumb-init does: under the pty it is orphaned (it leads its own
// session), where the kernel would drop a SIGTSTP, and a child that handles
// SIGTSTP must not keep the job running while kcrash stops (^Z typed on the
// terminal of a --no-pty child reaches the child itself, handlers and all).
// In an orphaned group of its own (no shell to resume it) kcrash does what
// the kernel would do to the bare command: nothing.
//
// A SIGTTIN or SIGTTOU while kcrash is not in its terminal's foreground is
// the kernel's, for kcrash's own read or write of the terminal (a write with
// tostop set): kcrash itself must stop, as the bare command would, whether
// or not a child is left to stop; the write restarts once it is resumed.
func (c *Child) suspend(sig syscall.Signal) {
	if groupOrphaned(procfs.FS{}) {
		return
	}
	if (sig == syscall.SIGTTIN || sig == syscall.SIGTTOU) && c.ttyFd >= 0 && !foreground(c.ttyFd) {
		c.signalGroup(syscall.SIGSTOP) // a stop watchStops leaves alone
		c.goCookedUnlessBusy()
		stopSelf(sig)
		return
	}
	c.stopWith.Store(int32(sig))
	c.signalGroup(syscall.SIGSTOP)
}

// resume is SIGCONT sent to kcrash (the shell's fg or bg): a --no-pty child
// gets the terminal back if kcrash is in the foreground, then the child's
// group continues, and the terminal goes raw again if the run is
// interactive and in the foreground.
func (c *Child) resume() {
	c.stopWith.Store(0)
	c.giveTerminal()
	if c.keys {
		if p := c.goRaw(); len(p) > 0 {
			c.ptmx.Write(p)
		}
		copySize(c.inFd, c.ptmx)
	}
	select {
	case c.resumed <- struct{}{}:
	default:
	}
}

// watchStops follows the child's stops (SIGCHLD, then a waitid that reports
// a stop and never reaps) and stops kcrash with it: a stop kcrash asked for
// (suspend), or a terminal's stop of a --no-pty child (^Z, reading the
// terminal from the background). A plain SIGSTOP someone sent the child
// (Slurm's suspend, a debugger) leaves kcrash running: it may come back to
// life before the child does, and must not stop after the job was resumed.
// ch gets SIGCHLD from before the child's start: a child that stops at once
// (reading the terminal from the background) is not missed.
func (c *Child) watchStops(ch chan os.Signal) {
	defer signal.Stop(ch)
	pidfd, err := unix.PidfdOpen(c.pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(pidfd)
	for {
		select {
		case <-ch:
		case <-c.exited:
			return
		}
		sig, ok := stoppedBy(pidfd)
		if !ok {
			continue
		}
		if want := syscall.Signal(c.stopWith.Swap(0)); want != 0 {
			sig = want
		} else if !ttyStop(sig) || groupOrphaned(procfs.FS{}) {
			continue
		}
		c.goCookedUnlessBusy()
		stopSelf(sig)
	}
}

func ttyStop(sig syscall.Signal) bool {
	return sig == syscall.SIGTSTP || sig == syscall.SIGTTIN || sig == syscall.SIGTTOU
}

// childInfo is the kernel's siginfo_t as waitid fills it for a child (64-bit
// layout: signo, errno, code, padding, then pid, uid, status).
type childInfo struct {
	signo, errno, code, _ int32
	pid, uid, status      int32
	_                     [100]byte
}

const (
	pPidfd     = 3 // waitid's P_PIDFD
	cldStopped = 5 // CLD_STOPPED
)

// stoppedBy reports the signal the child stopped with, if it has stopped
// since the last call; the report is consumed, the child never reaped.
func stoppedBy(pidfd int) (syscall.Signal, bool) {
	var info childInfo
	_, _, e := unix.Syscall6(unix.SYS_WAITID, pPidfd, uintptr(pidfd), uintptr(unsafe.Pointer(&info)), unix.WSTOPPED|unix.WNOHANG, 0, 0)
	if e != 0 || info.pid == 0 || info.code != cldStopped {
		return 0, false
	}
	return syscall.Signal(info.status), true
}

// stopSelf stops kcrash with sig as the kernel's default action would (the
// shell then reports how the job stopped: "Stopped", "Stopped (tty
// input)"...), and returns once kcrash is continued. The signal is sent to
// this very thread with the default action in place for that moment: the
// stop happens on the way back from the send. It is unblocked there, were it
// blocked at start.
func stopSelf(sig syscall.Signal) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, oldMask unix.Sigset_t
	set.Val[(sig-1)/64] = 1 << (uint(sig-1) % 64)
	unix.PthreadSigmask(unix.SIG_UNBLOCK, &set, &oldMask)
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &oldMask, nil)
	dfl := kernelSigaction{sigDfl}
	var old kernelSigaction
	rtSigaction(sig, &dfl, &old)
	unix.Tgkill(unix.Getpid(), unix.Gettid(), unix.Signal(sig))
	rtSigaction(sig, &old, nil)
}

// groupOrphaned reports whether kcrash's process group is orphaned: no
// member has a parent in another group of the same session, so no shell's
// job control will resume it, and the kernel drops the terminal's stop
// signals sent there.
func groupOrphaned(fs procfs.FS) bool {
	me, err := fs.Stat(os.Getpid())
	if err != nil {
		return false
	}
	pids, err := fs.Pids()
	if err != nil {
		return false
	}
	buf := make([]byte, 1024)
	for _, pid := range pids {
		st, err := fs.StatInto(pid, buf)
		if err != nil || st.PGrp != me.PGrp {
			continue
		}
		parent, err := fs.StatInto(st.PPid, buf)
		if err == nil && parent.PGrp != me.PGrp && parent.Session == me.Session {
			return false
		}
	}
	return true
}

// awaitForeground waits until kcrash is in the terminal's foreground (woken
// by SIGCONT, or a look twice a second): false when the child ended first.
func (c *Child) awaitForeground() bool {
	for !foreground(c.inFd) {
		select {
		case <-c.exited:
			return false
		case <-c.resumed:
		case <-time.After(500 * time.Millisecond):
		}
	}
	return true
}
