package supervisor

import (
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"unsafe"

	"github.com/kcrash/kcrash/internal/procfs"
	"golang.org/x/sys/unix"
)

// Reaping orphans. As a container's PID 1, or as a child subreaper (tini's
// subreaper-proxy, a runtime's shim), kcrash is where the job's orphans are
// reparented, and it is the job's own parent: the job sees its orphaned
// descendants as its parent's children until kcrash reaps them (tini's
// reaping test waits for exactly that), as it would under tini.
//
// A wait4(-1) would also take the exit of kcrash's own children, whose
// statuses os/exec waits for (the job, the collectors' tools), so orphans
// are told apart by what kcrash's own children always are: the job, or a
// process in kcrash's session that leads its own process group (execx's
// tools, the --no-pty job) or is in kcrash's group (a plain exec.Command).
// An orphan comes from the job's tree or a tool's: in the job's or the
// tool's group (no leader), or in a session of its own. Only an orphan that
// made itself a group leader in kcrash's session (a --no-pty job's shell
// with job control) is left a zombie until kcrash ends.

var reaper struct {
	once sync.Once
	mu   sync.Mutex       // held while a job starts, so that its pid is known before a sweep sees it
	jobs map[int]struct{} // the supervised jobs not waited for yet: Child.Wait takes their status
}

// reapsOrphans says whether orphans are reparented to this process.
func reapsOrphans() bool {
	if os.Getpid() == 1 {
		return true
	}
	var v int32
	unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0)
	return v != 0
}

// startJob starts the job (StartChild) so that a sweep cannot take it for an
// orphan, and, where orphans come to kcrash, starts reaping them.
func startJob(cmd *exec.Cmd) error {
	reaper.once.Do(func() {
		if !reapsOrphans() {
			return
		}
		reaper.jobs = map[int]struct{}{}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGCHLD)
		go func() {
			for range ch {
				sweepOrphans()
			}
		}()
	})
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	err := StartChild(cmd, cmd.Start)
	if err == nil && reaper.jobs != nil {
		reaper.jobs[cmd.Process.Pid] = struct{}{}
	}
	return err
}

// jobDone is called once the job's status was taken.
func jobDone(pid int) {
	reaper.mu.Lock()
	delete(reaper.jobs, pid)
	reaper.mu.Unlock()
}

// sweepOrphans reaps the children of kcrash that have ended and are orphans.
// Each is reaped by its own pid, never wait4(-1): a status os/exec waits for
// is never taken.
func sweepOrphans() {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	var fs procfs.FS
	kids, err := fs.Children(os.Getpid())
	if err != nil {
		return
	}
	sid, _ := unix.Getsid(0)
	pgrp := unix.Getpgrp()
	buf := make([]byte, 1024)
	for _, pid := range kids {
		if _, ok := reaper.jobs[pid]; ok {
			continue
		}
		st, err := fs.StatInto(pid, buf)
		if err != nil || st.State != 'Z' {
			continue
		}
		if st.Session == sid && (st.PGrp == pid || st.PGrp == pgrp) {
			continue // kcrash's own: os/exec waits for it
		}
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != unix.EINTR {
				break
			}
		}
	}
}
