package capture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/internal/acl"
	"github.com/kcrash/kcrash/internal/readas"
)

// One crash, one story: the epilog runs as root after a job whose user's
// own `kcrash run` may already have written a bundle of the same crash.
// The node agent knows those bundles (each run tells it, and the agent takes
// the job from the run's cgroup, not from the run's word); the epilog's
// bundle names them, and a small file next to each names the epilog's
// bundle, written with the user's rights in the user's directory. The
// epilog's bundle itself is readable by the job's user through an ACL, and
// by no one else: never a root-only file about a user's own job.

// jobUser is the uid and gid the job ran as: slurmd's SLURM_JOB_UID and
// SLURM_JOB_GID, else scontrol's UserId "name(1000)"; false when neither says.
func jobUser(oc *cluster.Outcome) (uid, gid int, ok bool) {
	gid = -1
	if g, err := strconv.Atoi(os.Getenv("SLURM_JOB_GID")); err == nil {
		gid = g
	}
	if u, err := strconv.Atoi(os.Getenv("SLURM_JOB_UID")); err == nil {
		return u, gid, true
	}
	if oc != nil && oc.Job != nil {
		s := oc.Job.UserID
		if i, j := strings.LastIndexByte(s, '('), strings.LastIndexByte(s, ')'); i >= 0 && j > i {
			if u, err := strconv.Atoi(s[i+1 : j]); err == nil {
				return u, gid, true
			}
		}
	}
	return 0, gid, false
}

// ownBundles asks the node agent for the bundles the job's own runs wrote;
// none when no agent answers within a second.
func (e *epilog) ownBundles() []api.CrashRecord {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	recs, err := api.New(api.SocketPath()).Crashes(ctx, e.id)
	if err != nil {
		return nil
	}
	var out []api.CrashRecord
	for _, r := range recs {
		if filepath.IsAbs(r.Bundle) {
			out = append(out, r)
		}
	}
	return out
}

// ownNotes are the epilog bundle's notes naming the job's own bundles.
func ownNotes(own []api.CrashRecord) []string {
	var notes []string
	for _, r := range own {
		notes = append(notes, fmt.Sprintf("this job's own bundle, written by its kcrash run (uid %d): %s (verdict %s)", r.UID, r.Bundle, r.Verdict))
	}
	return notes
}

// share makes the epilog's bundle at path readable by the job's user (its
// directory passable, the file readable, nothing listable), and writes,
// with that user's rights, a link next to each of the job's own bundles.
func (e *epilog) share(path string, oc *cluster.Outcome, own []api.CrashRecord) {
	uid, gid, ok := jobUser(oc)
	if !ok {
		e.logf("the job's user is not known (no SLURM_JOB_UID, no scontrol UserId): %s stays root's", path)
		return
	}
	if uid != 0 {
		if err := acl.GrantUser(e.out, uid, acl.Execute); err != nil {
			e.logf("bundle %s stays root's: %v", path, err)
			return
		}
		if err := acl.GrantUser(path, uid, acl.Read); err != nil {
			e.logf("bundle %s stays root's: %v", path, err)
			return
		}
		e.logf("bundle %s is readable by uid %d (an ACL), and by no other user", path, uid)
	}
	id := readas.LookupIdentity(uid, gid)
	for _, r := range own {
		if r.UID != uid {
			continue // another user's run in the job: not this user's directory to write in
		}
		link := r.Bundle + ".epilog"
		err := readas.Do(id, func() error {
			f, err := os.OpenFile(link, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
			if err != nil {
				return err
			}
			_, werr := fmt.Fprintf(f, "kcrash: the Slurm epilog's bundle of job %s, with the scheduler's record of how it ended: %s\n", e.id, path)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			return werr
		})
		if err != nil {
			e.logf("cannot link %s to the epilog's bundle as uid %d: %v", r.Bundle, uid, err)
			continue
		}
		e.logf("linked the job's own bundle %s to %s (%s)", r.Bundle, path, link)
	}
}
