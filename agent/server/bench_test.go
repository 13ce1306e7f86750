package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/access"
	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
)

// hourLines are a busy GPU node's kernel lines, with whom the agent would
// have found each to name: 0 a process, 1 a process on a GPU, 2 nothing.
var hourLines = []struct {
	text string
	kind int
}{
	{"NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python3, Graphics SM Warp Exception on (GPC 4, TPC 1, SM 0): Out Of Range Address", 0},
	{"amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32770, for process python3 pid %d thread python3 pid %[1]d)", 1},
	{"audit: type=1400 audit(1733200000.123:%d): apparmor=\"DENIED\" operation=\"open\" class=\"file\" profile=\"snap.lxd\"", 2},
	{"e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex, Flow Control: Rx/Tx (%d)", 2},
	{"python3[%d]: segfault at 7f2a3c000000 ip 00007f2a4b1e2c3d sp 00007ffd5e6f7a80 error 4 in libcuda.so.550.54.15[7f2a4a000000+1a00000]", 0},
	{"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,task=python3,pid=%d,uid=1000", 0},
	{"usb 1-1.4: new high-speed USB device number %d using xhci_hcd", 2},
	{"nvme nvme0: I/O %d QID 7 timeout, completion polled", 2},
}

// hourJournal holds n records over the hour before end; one process record
// in ten is uid's, the others another user's.
func hourJournal(b *testing.B, n, uid int, end time.Time) *journal.Journal {
	b.Helper()
	j, err := journal.Open(b.TempDir(), journal.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	start, step := end.Add(-time.Hour), time.Hour/time.Duration(n)
	for i := range n {
		l := hourLines[i%len(hourLines)]
		pid, owner := 10000+i%5000, 4242
		if i%10 == 0 {
			owner = uid
		}
		mono := 3*24*time.Hour + time.Duration(i)*step
		e := journal.Entry{Boot: bootID, Wall: start.Add(time.Duration(i) * step),
			Rec: api.Record{Seq: uint64(i + 1), Mono: mono, Level: 3, Text: fmt.Sprintf(l.text, pid)}}
		cg := fmt.Sprintf("/user.slice/user-%d.slice/session-1.scope", owner)
		switch l.kind {
		case 0:
			e.Subject.Procs = []journal.Proc{{Pid: pid, UID: owner, Cgroup: cg}}
		case 1:
			e.Subject.Procs = []journal.Proc{{Pid: pid, UID: owner, Cgroup: cg}}
			e.Subject.Devices = []journal.Device{{BDF: "0000:c1:00.0", Holders: []journal.Holder{{Pid: pid, UID: owner, Cgroup: cg}}}}
		}
		if err := j.Append(e); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Sync(); err != nil {
		b.Fatal(err)
	}
	return j
}

// cpuTime is the CPU this process has used, every thread (the GC's too).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKmsgHour is a client's query of the last hour, end to end but
// for the socket: the route, the access rule for each record, the JSON
// answer, and the client's decoding of it (api.DecodeKmsgResponse). The cost target is 20 ms.
// "typical" is an ordinary node's hour, "flood" an hour at 10,000 records
// a minute (the answer cap, 20,000 records, keeps the newest).
func BenchmarkKmsgHour(b *testing.B) {
	end := time.Now().UTC()
	const uid = 990
	for _, c := range []struct {
		name    string
		records int
	}{{"typical", 2000}, {"flood", 600_000}} {
		b.Run(c.name, func(b *testing.B) {
			j := hourJournal(b, c.records, uid, end)
			h := (&Server{Journal: j, BootID: bootID}).Handler()
			for _, who := range []struct {
				name string
				peer access.Peer
			}{{"root", access.Peer{}}, {"user", access.Peer{UID: uid, GID: uid, Cgroup: "/user.slice/user-990.slice/session-2.scope"}}} {
				// api.Client asks for the compact form; a client of before
				// it, the full one.
				for _, form := range []string{"compact", "full"} {
					b.Run(who.name+"/"+form, func(b *testing.B) {
						v := url.Values{"since": {end.Add(-time.Hour).Format(time.RFC3339Nano)}, "until": {end.Format(time.RFC3339Nano)}}
						if form == "compact" {
							v.Set(api.FormParam, api.FormCompact)
						}
						target := api.PathKmsg + "?" + v.Encode()
						ctx := context.WithValue(context.Background(), peerKey{}, who.peer)
						var got int
						// One answer's buffer for every query: the recorder's
						// growing of it is the benchmark's cost, not the agent's
						// (whose answer goes to a socket).
						body := bytes.NewBuffer(make([]byte, 0, 16<<20))
						cpu0 := cpuTime()
						for b.Loop() {
							rec := httptest.NewRecorder()
							body.Reset()
							rec.Body = body
							h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil))
							if rec.Code != http.StatusOK {
								b.Fatalf("%d %s", rec.Code, rec.Body.String())
							}
							resp, err := api.DecodeKmsgResponse(rec.Body.Bytes()) // as the client reads it
							if err != nil {
								b.Fatalf("%d %s", rec.Code, rec.Body.String())
							}
							got = len(resp.Records)
						}
						// CPU time too: on a busy machine wall time says more of
						// the other tenants than of the query.
						b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
						b.ReportMetric(float64(got), "records")
					})
				}
			}
		})
	}
}
