package collectors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/internal/testenv"
)

func TestSlurmJobIdentity(t *testing.T) {
	rec := []byte("JobId=7 JobName=x UserId=alice(4321) GroupId=staff(50) JobState=FAILED StdOut=/tmp/o\n")
	j := cluster.ParseScontrolJobs(rec)[0]
	id, err := SlurmJobIdentity(cluster.NewOutcome("7", j, rec, nil, ""), func(string) string { return "" })
	if err != nil || id.UID != 4321 || id.GID != 50 {
		t.Fatalf("%+v %v", id, err)
	}
	env := map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_UID": "4322", "SLURM_JOB_GID": "51"}
	id, err = SlurmJobIdentity(cluster.NewOutcome("7", nil, nil, nil, ""), func(k string) string { return env[k] })
	if err != nil || id.UID != 4322 || id.GID != 51 {
		t.Fatalf("from the epilog's environment: %+v %v", id, err)
	}
	// Another job's environment says nothing about this one.
	if _, err := SlurmJobIdentity(cluster.NewOutcome("8", nil, nil, nil, ""), func(k string) string { return env[k] }); err == nil {
		t.Fatal("took SLURM_JOB_UID of job 7 for job 8")
	}
}

// TestSlurmTailsUnknownUserAsRoot: root does not read the files of a job
// whose user it cannot tell.
func TestSlurmTailsUnknownUserAsRoot(t *testing.T) {
	testenv.NeedRoot(t, "the refusal applies to root only")
	dir := t.TempDir()
	out := filepath.Join(dir, "o.log")
	os.WriteFile(out, []byte("line\n"), 0o644)
	rec := []byte("JobId=9 JobName=x JobState=FAILED StdOut=" + out + "\n")
	j := cluster.ParseScontrolJobs(rec)[0]
	c := NewSlurm(cluster.NewOutcome("9", j, rec, nil, ""), nil, 1<<20, 5*time.Second)
	if len(c.Output()) != 0 || len(c.Notes()) != 1 || !strings.Contains(c.Notes()[0], "the job's user is unknown") {
		t.Fatalf("output %q notes %q", c.Output(), c.Notes())
	}
}
