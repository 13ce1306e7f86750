package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"unsafe"

	"github.com/kcrash/kcrash/supervisor"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// reaperEnv tells a kcrash started by kcrash's own init process (PID 1 or a
// child subreaper) that it runs under it; the init sets it, the run removes it.
const reaperEnv = "KCRASH_UNDER_INIT"

// underInit is reaperEnv's value at start: "pid1", "subreaper" or "".
var underInit string

// needsInit reports whether `kcrash run` must be an init: PID 1 of a
// container or a child subreaper, orphans of the job are reparented to it
// and must be reaped.
func needsInit(args []string) bool {
	if len(args) == 0 || args[0] != "run" || os.Getenv(reaperEnv) != "" {
		return false
	}
	if os.Getpid() == 1 {
		return true
	}
	var v int32
	unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0)
	return v != 0
}

// initSignals are passed on from the init to the kcrash it runs (docker
// stop's SIGTERM above all), as tini does: the ones the run forwards to its
// child, and SIGWINCH, which it turns into its pty's size.
var initSignals = append(slices.Clone(supervisor.Forwarded), syscall.SIGWINCH)

// runInit is kcrash as an init, the way tini is one: it runs the real
// `kcrash run` as its only child and reaps everything else reparented to it.
// Reaping all children with wait4(-1) is safe here and only here: this
// process starts nothing else, so no status is taken from a Wait elsewhere
// (the run itself, with its collectors' helper commands, is the child).
// It returns the exit code (the child's, 128+N for a signal death) and the
// signal to die of where the init is not PID 1.
func runInit(args []string) (int, syscall.Signal) {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	sigs := make(chan os.Signal, 64)
	watch := []os.Signal{syscall.SIGCHLD}
	for _, s := range initSignals {
		if !supervisor.IgnoredAtStart(s) { // else stays ignored, not forwarded
			watch = append(watch, s)
		}
	}
	signal.Notify(sigs, watch...)
	cmd := exec.Command(self, args...)
	role := "subreaper"
	if os.Getpid() == 1 {
		role = "pid1"
	}
	cmd.Env = append(os.Environ(), reaperEnv+"="+role)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Its own process group, in the terminal's foreground: keys typed there
	// signal it alone, not it and the init that would forward them again.
	attr := &syscall.SysProcAttr{Setpgid: true}
	if term.IsTerminal(0) {
		if pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && pgrp == unix.Getpgrp() {
			attr.Foreground, attr.Ctty = true, 0
		}
	}
	cmd.SysProcAttr = attr
	if err := supervisor.StartChild(cmd, cmd.Start); err != nil {
		fmt.Fprintf(os.Stderr, "kcrash: cannot start: %v\n", err)
		return 125, 0
	}
	child := cmd.Process.Pid
	for {
		// Reap whatever has ended: orphans, and the run itself.
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.EINTR {
				continue
			}
			if pid <= 0 || err != nil {
				break
			}
			if pid != child {
				continue
			}
			cmd.Process.Release()
			if ws.Signaled() {
				return 128 + int(ws.Signal()), ws.Signal()
			}
			return ws.ExitStatus(), 0
		}
		s := <-sigs
		if s != syscall.SIGCHLD && !supervisor.BlockedAtStart(s.(syscall.Signal)) { // a blocked one is dropped
			syscall.Kill(child, s.(syscall.Signal))
		}
	}
}
