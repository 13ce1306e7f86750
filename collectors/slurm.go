package collectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kcrash/kcrash/cluster"
)

// Slurm writes what Slurm said about a job into raw/: the job record,
// accounting, the batch script and the tails of its output files. It is
// created for `attach --slurm-job` and `collect --slurm-epilog` only, never
// registered as a default collector.
type Slurm struct {
	outcome *cluster.Outcome
	tails   []slurmTailFile
	notes   []string
}

// NewSlurm reads the tails (at most tail bytes each, each within timeout) of
// the job's StdOut and StdErr and of logs, so that Output has them before
// the collectors run. Every one of them is a path the job (or its user)
// chose, so when kcrash is root they are read with the job user's rights
// (OpenAs): a file that user could not read, a symlink, a FIFO or a device
// stays out of the bundle, and a note says why.
func NewSlurm(oc *cluster.Outcome, logs []string, tail int64, timeout time.Duration) *Slurm {
	c := &Slurm{outcome: oc}
	id, err := SlurmJobIdentity(oc, os.Getenv)
	if err != nil && os.Geteuid() == 0 {
		c.refuseTails(logs, fmt.Sprintf("refused: %v, and kcrash runs as root: the job's files are read only with its user's rights", err))
		return c
	}
	c.readTails(logs, tail, timeout, id)
	return c
}

// SlurmJobIdentity is the job's user: UserId and GroupId of the job record,
// or, for the epilog's own job when scontrol did not answer, slurmd's
// SLURM_JOB_UID and SLURM_JOB_GID.
func SlurmJobIdentity(oc *cluster.Outcome, getenv func(string) string) (*Identity, error) {
	uid, gid := -1, -1
	if j := oc.Job; j != nil {
		uid = idInParens(j.UserID)
		gid = idInParens(j.Fields["GroupId"])
	}
	if uid < 0 && oc.JobID != "" && (getenv("SLURM_JOB_ID") == oc.JobID || getenv("SLURM_JOBID") == oc.JobID) {
		uid, gid = atoiOr(getenv("SLURM_JOB_UID"), -1), atoiOr(getenv("SLURM_JOB_GID"), -1)
	}
	if uid < 0 {
		return nil, fmt.Errorf("the job's user is unknown (no UserId from scontrol, no SLURM_JOB_UID)")
	}
	return LookupIdentity(uid, gid), nil
}

// idInParens reads scontrol's "alice(1001)"; -1 when there is no number.
func idInParens(s string) int {
	i, j := strings.LastIndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return atoiOr(s, -1)
	}
	return atoiOr(s[i+1:j], -1)
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return def
	}
	return n
}

// Notes says which tails could not be read.
func (c *Slurm) Notes() []string { return c.notes }

type slurmTailFile struct {
	name string // in the bundle
	path string // on disk
	data []byte
	err  error
}

// refuseTails notes that none of the job's files is read.
func (c *Slurm) refuseTails(logs []string, why string) {
	c.listTails(logs)
	for i := range c.tails {
		t := &c.tails[i]
		t.err = errors.New(why)
		c.notes = append(c.notes, fmt.Sprintf("%s (%s) not read: %v", t.name, t.path, t.err))
	}
}

// readTails reads the tails of the job's StdOut and StdErr (one file when
// they are the same) and of --log files, each within timeout, with id's
// rights (kcrash's own when nil).
func (c *Slurm) readTails(logs []string, tail int64, timeout time.Duration, id *Identity) {
	c.listTails(logs)
	for i := range c.tails {
		t := &c.tails[i]
		t.data, t.err = tailWithin(id, t.path, tail, timeout)
		if t.err != nil {
			c.notes = append(c.notes, fmt.Sprintf("%s (%s) not read: %v", t.name, t.path, t.err))
		}
	}
}

func (c *Slurm) listTails(logs []string) {
	j := c.outcome.Job
	if j != nil {
		if j.StdOut != "" {
			c.tails = append(c.tails, slurmTailFile{name: "raw/slurm-stdout.log", path: j.StdOut})
		}
		if j.StdErr != "" && j.StdErr != j.StdOut {
			c.tails = append(c.tails, slurmTailFile{name: "raw/slurm-stderr.log", path: j.StdErr})
		}
	}
	for i, l := range logs {
		c.tails = append(c.tails, slurmTailFile{name: fmt.Sprintf("raw/log-%d-%s", i+1, filepath.Base(l)), path: l})
	}
}

// Output is output.log: the job's stdout tail, then its stderr tail (when a
// separate file), then the --log tails.
func (c *Slurm) Output() []byte {
	var b []byte
	for _, t := range c.tails {
		if t.err != nil || len(t.data) == 0 {
			continue
		}
		b = append(b, t.data...)
		if b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
	}
	return b
}

func (c *Slurm) Collect(_ context.Context, _ *Env, out *Output) error {
	oc := c.outcome
	var errs []string
	job := oc.JobRaw
	if len(job) == 0 {
		job = []byte(fmt.Sprintf("# scontrol show job -o %s: %s\n", oc.JobID, dashIfEmpty(oc.JobErr)))
	}
	if err := out.WriteFile("raw/slurm-job.txt", job); err != nil {
		errs = append(errs, err.Error())
	}
	var acct []byte
	if oc.Acct != nil {
		acct = append([]byte("# "+strings.Join(oc.Acct.Command, " ")+"\n"+strings.Join(cluster.SacctFields, "|")+"\n"), oc.Acct.Raw...)
	} else {
		acct = []byte("# sacct: " + dashIfEmpty(oc.AcctErr) + "\n")
	}
	if err := out.WriteFile("raw/sacct.txt", acct); err != nil {
		errs = append(errs, err.Error())
	}
	if oc.Script != nil {
		if err := out.WriteFile("raw/slurm-batch-script.sh", oc.Script); err != nil {
			errs = append(errs, err.Error())
		}
	}
	sum, _ := json.MarshalIndent(oc.Summary(), "", "  ")
	if err := out.WriteFile("raw/slurm.json", append(sum, '\n')); err != nil {
		errs = append(errs, err.Error())
	}
	for _, t := range c.tails {
		if t.err != nil {
			continue
		}
		if err := out.WriteFile(t.name, t.data); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// tailWithin reads the last n bytes of path with id's rights, giving up
// after timeout (a file on a hung network mount must not hold up the bundle).
func tailWithin(id *Identity, path string, n int64, timeout time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, _, err := TailFileAs(id, path, n)
		ch <- res{b, err}
	}()
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(timeout):
		return nil, fmt.Errorf("reading took over %s", timeout)
	}
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
