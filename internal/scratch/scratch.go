// Package scratch makes kcrash's own directories under $TMPDIR (a run's
// work directory, the Python-stacks hook), each named for the process that
// made it, and removes those that a kcrash killed before it could remove
// them (SIGKILL after a time limit, the OOM killer) left behind: without
// that they would pile up, one or two for every killed run.
package scratch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Mkdir makes a new private directory under $TMPDIR named
// prefix + "<pid namespace>.<pid>-" + a random part.
func Mkdir(prefix string) (string, error) {
	return os.MkdirTemp("", fmt.Sprintf("%s%d.%d-", prefix, pidNamespace(), os.Getpid()))
}

// Sweep removes the directories under $TMPDIR that Mkdir made with prefix
// for a kcrash process that no longer exists: only this user's, only of this
// pid namespace (a /tmp shared with another container holds directories of
// live processes this one cannot see), never through a symlink. With
// onlyEmpty, one that holds anything stays: a killed run's evidence.
func Sweep(prefix string, onlyEmpty bool) {
	ns := pidNamespace()
	if ns == 0 {
		return
	}
	tmp := os.TempDir()
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		owner, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		id, _, ok := strings.Cut(owner, "-")
		nsText, pidText, ok2 := strings.Cut(id, ".")
		if !ok || !ok2 || nsText != strconv.FormatUint(ns, 10) {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || !(Owner{Pid: pid, PidNS: ns}).Gone() {
			continue
		}
		path := filepath.Join(tmp, e.Name())
		var st syscall.Stat_t
		if syscall.Lstat(path, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || int(st.Uid) != os.Geteuid() {
			continue
		}
		if onlyEmpty {
			os.Remove(path) // fails, and keeps it, unless empty
		} else {
			os.RemoveAll(path)
		}
	}
}

// alive reports whether pid names a process (one of another user's too).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// pidNamespace is the inode of this process's pid namespace, 0 if unknown.
func pidNamespace() uint64 {
	var st syscall.Stat_t
	if syscall.Stat("/proc/self/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
}
