package access

import (
	"strings"

	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/kernlog"
)

// facilityKernel is the syslog facility of the kernel's own records; user
// space writing to /dev/kmsg gets facility 1 (user) at least.
const facilityKernel = 0

// Visible decides whether peer may read e, and says why. mark is the
// caller's test token ("" for none). tr, which may be nil, knows the
// process tree for the descendant rule. The rules, in order:
//
//  1. a marked test record of another token than mark: no;
//  2. root: yes;
//  3. a record naming processes: yes if one is the peer's uid, in the
//     peer's Slurm job or cgroup subtree, or the peer's pid or a
//     descendant of it; otherwise no;
//  4. a record naming GPUs and no process: yes if a process of the peer's
//     uid or job held one of their device files, or the peer's cgroup v1
//     device rules name one of those files (DeviceRules.Grants);
//  5. a record naming nothing: yes for the kernel's own facility, no for
//     user-space writers. A marked record of the peer's token stands for
//     the driver's line after the mark, whatever facility wrote it.
//
// Gap entries concern no one and everyone: yes.
func Visible(p Peer, e *journal.Entry, mark string, tr Lineage) (bool, string) {
	if e.Gap != nil {
		return true, "a gap in the journal"
	}
	marked := false
	if token, ok := testToken(e.Rec.Text); ok {
		if token != mark || mark == "" {
			return false, "another test's marked record"
		}
		marked = true
	}
	if p.Root() {
		return true, "root"
	}
	s := e.Subject
	if len(s.Procs) > 0 {
		for _, pr := range s.Procs {
			if ok, why := ownsProc(p, pr, tr); ok {
				return true, why
			}
		}
		return false, "another user's process"
	}
	if len(s.Devices) > 0 {
		for _, d := range s.Devices {
			for _, h := range d.Holders {
				if h.UID >= 0 && h.UID == p.UID {
					return true, "a GPU your uid's process held (" + d.BDF + ")"
				}
				if p.Job != "" && JobFromCgroup(h.Cgroup) == p.Job {
					return true, "a GPU your Slurm job's process held (" + d.BDF + ")"
				}
			}
			if p.Devices.GrantsAny(d.Nodes) {
				return true, "a GPU your cgroup's device rules give you (" + d.BDF + ")"
			}
		}
		return false, "a GPU none of your processes held"
	}
	if marked {
		return true, "your test's marked record naming no process"
	}
	if e.Rec.Facility == facilityKernel {
		return true, "a kernel record naming no process"
	}
	return false, "a user-space writer's record"
}

func ownsProc(p Peer, pr journal.Proc, tr Lineage) (bool, string) {
	if pr.UID >= 0 && pr.UID == p.UID {
		return true, "your uid's process"
	}
	if p.Job != "" && JobFromCgroup(pr.Cgroup) == p.Job {
		return true, "a process of your Slurm job"
	}
	// A cgroup counts only for a process whose owner is unknown (gone
	// before the agent saw it): one cgroup can hold several users'
	// processes (a shared container, a login node's slice set up so), and
	// another user's known process is never shown.
	if pr.UID < 0 && InSubtree(pr.Cgroup, p.Cgroup) {
		return true, "a process of unknown owner in your cgroup"
	}
	if tr != nil && p.PID > 0 && pr.Pid > 0 && tr.IsDescendant(pr.Pid, p.PID) && tr.Started(p.PID, p.StartTime) {
		return true, "your descendant process"
	}
	return false, ""
}

// testToken returns the token of a marked test record.
func testToken(text string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimLeft(text, " \t"), kernlog.TestMarkPrefix)
	if !ok {
		return "", false
	}
	token, _, ok := strings.Cut(rest, "]: ")
	return token, ok
}

// Lineage knows the process tree (a *Tracker, or a query's Memo of one).
type Lineage interface {
	IsDescendant(pid, ancestor int) bool
	Started(pid int, start uint64) bool
}

// Memo is a Lineage for one query: it remembers each answer of tr. A query
// judges thousands of records naming the same few pids, and each pid the
// tracker never saw costs a look at /proc (the records of another user's
// hour of faults cost a flood hour's query most of its time). Nil when tr
// is.
func Memo(tr *Tracker) Lineage {
	if tr == nil {
		return nil
	}
	return &memo{tr: tr, desc: map[[2]int]bool{}, started: map[startKey]bool{}}
}

type memo struct {
	tr      *Tracker
	desc    map[[2]int]bool
	started map[startKey]bool
}

type startKey struct {
	pid   int
	start uint64
}

func (m *memo) IsDescendant(pid, ancestor int) bool {
	k := [2]int{pid, ancestor}
	v, ok := m.desc[k]
	if !ok {
		v = m.tr.IsDescendant(pid, ancestor)
		m.desc[k] = v
	}
	return v
}

func (m *memo) Started(pid int, start uint64) bool {
	k := startKey{pid, start}
	v, ok := m.started[k]
	if !ok {
		v = m.tr.Started(pid, start)
		m.started[k] = v
	}
	return v
}

// SubjectDenies says whether Visible withholds from p every record whose
// subject is s, whatever its text, facility and the caller's mark: for a
// subject naming processes or GPUs, rules 3 and 4 decide by the subject
// alone, and rule 1 only withholds more. A query judges most lines of a
// flood so, by whom they name, before reading their records (and once for
// every line naming the same subject). False where the text could matter:
// root, and a subject naming no one.
func SubjectDenies(p Peer, s *journal.Subject, tr Lineage) bool {
	if p.Root() || (len(s.Procs) == 0 && len(s.Devices) == 0) {
		return false
	}
	ok, _ := Visible(p, &journal.Entry{Subject: *s}, "", tr)
	return !ok
}
