// Package access decides who may read what the node agent holds: the peer
// of a connection (SO_PEERCRED and /proc), the processes a kernel record
// names and who owned them (Annotate, at arrival), and the rule that joins
// the two (Visible). The rules are docs/agent.md's "Who sees what".
package access

import (
	"fmt"
	"net"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/internal/procfs"
)

// Peer is the process at the other end of a connection, as the kernel and
// /proc describe it; nothing in it comes from what the peer sends.
type Peer struct {
	UID, GID, PID int
	// StartTime is the peer's start in clock ticks after boot (/proc/PID/stat):
	// with PID, the identity of the process, so a reused pid is noticed.
	StartTime uint64
	Cgroup    string // the peer's cgroup path (the unified hierarchy's, else the memory controller's)
	Job       string // the Slurm job id from the cgroup path, "" outside a job
	// Devices are the device rules of the peer's cgroup (v1 only; none
	// under cgroup v2, whose rules the agent cannot read).
	Devices DeviceRules
}

// Root reports whether the peer is root.
func (p Peer) Root() bool { return p.UID == 0 }

// FromConn reads the peer of a unix-socket connection: its credentials from
// SO_PEERCRED, its start time and cgroup from procRoot ("" is /proc), its
// device rules from sysRoot ("" is /sys). A peer
// whose /proc entry is gone (it exited, or it lives in a pid namespace the
// agent cannot see) keeps its uid and gid, with PID 0: nothing can be tied
// to a pid that is no longer its.
func FromConn(c net.Conn, procRoot, sysRoot string) (Peer, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Peer{}, fmt.Errorf("access: %T has no socket descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("access: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, fmt.Errorf("access: %w", err)
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("access: SO_PEERCRED: %w", credErr)
	}
	p := Peer{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}
	if p.PID <= 0 {
		// The peer is in a pid namespace that cannot name it to us.
		p.PID = 0
		return p, nil
	}
	fs := procfs.FS{Root: procRoot}
	st, err := fs.Stat(p.PID)
	if err != nil {
		p.PID = 0
		return p, nil
	}
	p.StartTime = st.StartTicks
	if cgs, err := fs.Cgroups(p.PID); err == nil {
		p.Cgroup = CgroupPath(cgs)
		p.Job = JobOf(cgs)
	}
	p.Devices, _ = ReadDeviceRules(procRoot, sysRoot, p.PID)
	return p, nil
}

// Recheck returns the peer as it may be trusted now: when its pid is gone
// or names another process (its start time changed), only the uid and gid
// stay, because the pid's cgroup, job and descendants are no longer its.
func (p Peer) Recheck(procRoot string) Peer {
	if p.PID == 0 {
		return p
	}
	st, err := procfs.FS{Root: procRoot}.Stat(p.PID)
	if err == nil && st.StartTicks == p.StartTime {
		return p
	}
	return Peer{UID: p.UID, GID: p.GID}
}

// CgroupPath picks the cgroup path that names a process's place: the
// unified (v2) hierarchy's, else the v1 memory controller's (where Slurm
// and container runtimes put jobs), else the first.
func CgroupPath(cgs []procfs.Cgroup) string {
	for _, c := range cgs {
		if c.Unified() && c.Path != "/" {
			return c.Path
		}
	}
	for _, c := range cgs {
		if c.Has("memory") {
			return c.Path
		}
	}
	for _, c := range cgs {
		if c.Path != "" {
			return c.Path
		}
	}
	return ""
}

// JobOf is the Slurm job of a process from any of its hierarchies: with
// cgroup v1 Slurm's job directories are in the controllers' hierarchies
// while the unified one may hold a container's or a session's path.
func JobOf(cgs []procfs.Cgroup) string {
	if j := JobFromCgroup(CgroupPath(cgs)); j != "" {
		return j
	}
	for _, c := range cgs {
		if j := JobFromCgroup(c.Path); j != "" {
			return j
		}
	}
	return ""
}

// JobFromCgroup returns N of a "job_N" component of a cgroup path: Slurm's
// cgroup plugins put a job's processes under ".../job_N/step_M/..." (v2)
// or "/slurm/uid_X/job_N/..." (v1).
func JobFromCgroup(path string) string {
	for c := range strings.SplitSeq(path, "/") {
		n, ok := strings.CutPrefix(c, "job_")
		if !ok || n == "" || len(n) > 20 {
			continue
		}
		digits := true
		for i := 0; i < len(n); i++ {
			if n[i] < '0' || n[i] > '9' {
				digits = false
				break
			}
		}
		if digits {
			return n
		}
	}
	return ""
}

// InSubtree reports whether cgroup path lies in the subtree of parent.
// Parents that would cover much of the machine (the root, a top-level
// slice such as /user.slice or /system.slice) hold no subtree: a process
// there shares it with everyone.
func InSubtree(path, parent string) bool {
	if path == "" || parent == "" {
		return false
	}
	parent = strings.TrimSuffix(parent, "/")
	if strings.Count(parent, "/") < 2 {
		return false
	}
	return path == parent || strings.HasPrefix(path, parent+"/")
}
