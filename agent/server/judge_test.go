package server

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/access"
	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
)

// countingJournal counts the lines a query dropped by their subject
// alone, so that the comparison below is known to have gone both ways.
type countingJournal struct {
	*journal.Journal
	skipped int
}

func (j *countingJournal) ScanNewest(ctx context.Context, since, until time.Time, subjects bool, skip func(boot, subject string) bool, fn func(e *journal.Entry, rec string, sp *api.RecordSpans) bool) error {
	var counted func(boot, subject string) bool
	if skip != nil {
		counted = func(boot, subject string) bool {
			ok := skip(boot, subject)
			if ok {
				j.skipped++
			}
			return ok
		}
	}
	return j.Journal.ScanNewest(ctx, since, until, subjects, counted, fn)
}

// judgeLines are kernel lines of the kinds a journal holds, with the
// escapes the line writer produces (quotes, tabs, a dictionary's
// newlines, non-ASCII) and a text that itself says `"subject":{`.
var judgeLines = []string{
	"NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python3, Graphics SM Warp Exception on (GPC 4, TPC 1, SM 0): Out Of Range Address",
	"amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32770, for process python3 pid %d thread python3 pid %[1]d)",
	"python3[%d]: segfault at 7f2a3c000000 ip 00007f2a4b1e2c3d sp 00007ffd5e6f7a80 error 4 in libcuda.so.550.54.15[7f2a4a000000+1a00000]",
	"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,task=python3,pid=%d,uid=1000",
	"audit: type=1400 audit(1733200000.123:%d): apparmor=\"DENIED\" operation=\"open\" profile=\"snap.lxd\"",
	"\tkcrash-test[%d]: a line starting with a tab",
	"x\\\"},\"subject\":{\"procs\":[{\"pid\":%d,\"uid\":990}]}} \u00e9\u4e2d",
	"usb 1-1.4: new high-speed USB device number %d using xhci_hcd",
}

// judgeJournal is a journal of n entries over the hour before end, their
// subjects drawn at random from the shapes access.Visible tells apart.
func judgeJournal(t *testing.T, n int, end time.Time, seed uint64) *journal.Journal {
	t.Helper()
	j, err := journal.Open(t.TempDir(), journal.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	rng := rand.New(rand.NewPCG(seed, 1))
	uids := []int{990, 4242, -1, 0}
	cgroups := []string{"", "/user.slice/user-990.slice/session-2.scope", "/user.slice/user-990.slice/session-2.scope/app",
		"/user.slice/user-4242.slice/session-9.scope", "/slurm/uid_990/job_77/step_0", "/slurm/uid_4242/job_78/step_0", "/"}
	nodes := [][]string{nil, {"c 195:0"}, {"c 195:1"}, {"c 226:128", "c 226:0"}}
	marks := []string{"", "kcrash-test[mine]: ", "kcrash-test[theirs]: "}
	start, step := end.Add(-time.Hour), time.Hour/time.Duration(n)
	pick := func(s int) int { return rng.IntN(s) }
	for i := range n {
		if i%997 == 500 {
			gap := journal.Entry{Boot: bootID, Wall: start.Add(time.Duration(i) * step), Gap: &journal.GapInfo{From: uint64(i), To: uint64(i + 3), Why: "overwritten"}}
			if err := j.Append(gap); err != nil {
				t.Fatal(err)
			}
			continue
		}
		pid := 1000 + pick(40) // few pids: the same subjects again and again, as in a flood
		text := marks[pick(len(marks))] + fmt.Sprintf(judgeLines[pick(len(judgeLines))], pid)
		e := journal.Entry{Boot: bootID, Wall: start.Add(time.Duration(i) * step),
			Rec: api.Record{Seq: uint64(i + 1), Mono: 72*time.Hour + time.Duration(i)*step, Level: 3, Facility: uint8(pick(2)), Text: text}}
		if pick(4) == 0 {
			e.Rec.Dict = "SUBSYSTEM=pci\nDEVICE=+pci:0000:c1:00.0"
		}
		if pick(20) == 0 {
			e.Boot = "00000000-0000-4000-8000-0000000000ff" // another boot's
		}
		owner := func() (int, int, string) { return pid, uids[pick(len(uids))], cgroups[pick(len(cgroups))] }
		switch pick(6) {
		case 0, 1:
			p, u, c := owner()
			e.Subject.Procs = []journal.Proc{{Pid: p, UID: u, Cgroup: c}}
			if pick(3) == 0 {
				p, u, c := owner()
				e.Subject.Procs = append(e.Subject.Procs, journal.Proc{Pid: p + 1, UID: u, Cgroup: c})
			}
		case 2:
			d := journal.Device{BDF: "0000:3b:00.0", Nodes: nodes[pick(len(nodes))]}
			if pick(2) == 0 {
				p, u, c := owner()
				d.Holders = []journal.Holder{{Pid: p, UID: u, Cgroup: c}}
			}
			e.Subject.Devices = []journal.Device{d}
		case 3:
			p, u, c := owner()
			e.Subject.Procs = []journal.Proc{{Pid: p, UID: u, Cgroup: c}}
			e.Subject.Inherited = true
		}
		if err := j.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestSubjectJudgeEqualsEachLine holds a query that withholds lines by
// their subject, judged once per subject, to one that decodes and judges
// every line with access.Visible: the answers, counts and notes included,
// must be the same bytes, for every kind of caller, with and without a
// test mark, cut by the answer's cap or not.
func TestSubjectJudgeEqualsEachLine(t *testing.T) {
	end := time.Now().UTC()
	peers := map[string]access.Peer{
		"user":    {UID: 990, GID: 990, Cgroup: "/user.slice/user-990.slice/session-2.scope"},
		"job":     {UID: 990, GID: 990, Cgroup: "/slurm/uid_990/job_77/step_0", Job: "77"},
		"devices": {UID: 990, GID: 990, Devices: access.DeviceRules{Cgroup: "/slurm/uid_990/job_77", Allow: []string{"c 195:0 rw"}}},
		"other":   {UID: 4242, GID: 4242},
		"root":    {},
	}
	for _, seed := range []uint64{1, 2, 3} {
		j := &countingJournal{Journal: judgeJournal(t, 4000, end, seed)}
		for _, maxRecords := range []int{0, 300} {
			judged := &Server{Journal: j, BootID: bootID, MaxRecords: maxRecords}
			each := &Server{Journal: j, BootID: bootID, MaxRecords: maxRecords, judgeEachLine: true}
			for name, p := range peers {
				for _, mark := range []string{"", "mine"} {
					j.skipped = 0
					a := query(t, judged, p, end, mark)
					skipped := j.skipped
					b := query(t, each, p, end, mark)
					if j.skipped != skipped {
						t.Fatalf("judging each line still skipped %d lines", j.skipped-skipped)
					}
					if !bytes.Equal(a, b) {
						t.Fatalf("seed %d, cap %d, %s, mark %q: judged by subject:\n%.600s\njudged each line:\n%.600s", seed, maxRecords, name, mark, a, b)
					}
					if name != "root" && skipped == 0 {
						t.Fatalf("seed %d, %s: no line was judged by its subject", seed, name)
					}
					resp, err := api.DecodeKmsgResponse(a)
					if err != nil {
						t.Fatal(err)
					}
					// The compact form is the same answer, but for the
					// records' shape.
					c := query(t, judged, p, end, mark, api.FormParam, api.FormCompact)
					if !bytes.Contains(c, []byte(`"recs":[`)) || len(c) >= len(a) && len(resp.Records) > 0 {
						t.Fatalf("not a compact answer: %.300s", c)
					}
					compact, err := api.DecodeKmsgResponse(c)
					if err != nil || !reflect.DeepEqual(compact, resp) {
						t.Fatalf("the compact answer read %+v (%v)\nthe full one %+v", compact, err, resp)
					}
					if name != "root" && resp.Withheld == 0 {
						t.Fatalf("%s: nothing withheld", name)
					}
				}
			}
		}
	}
}

func query(t *testing.T, s *Server, p access.Peer, end time.Time, mark string, param ...string) []byte {
	t.Helper()
	v := url.Values{"since": {end.Add(-time.Hour).Format(time.RFC3339Nano)},
		"until": {end.Format(time.RFC3339Nano)}, "mark": {mark}}
	for i := 0; i+1 < len(param); i += 2 {
		v.Set(param[i], param[i+1])
	}
	target := api.PathKmsg + "?" + v.Encode()
	ctx := context.WithValue(context.Background(), peerKey{}, p)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes()
}
