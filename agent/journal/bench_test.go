package journal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
)

// benchLines are kernel lines of a busy GPU node, cycled through.
var benchLines = []string{
	"NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python3, Graphics SM Warp Exception on (GPC 4, TPC 1, SM 0): Out Of Range Address",
	"amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32770, for process python3 pid %d thread python3 pid %d)",
	"audit: type=1400 audit(1733200000.123:%d): apparmor=\"DENIED\" operation=\"open\" class=\"file\" profile=\"snap.lxd\" name=\"/proc/sys/kernel/random/boot_id\"",
	"e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex, Flow Control: Rx/Tx (%d)",
	"python3[%d]: segfault at 7f2a3c000000 ip 00007f2a4b1e2c3d sp 00007ffd5e6f7a80 error 4 in libcuda.so.550.54.15[7f2a4a000000+1a00000]",
	"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/slurm/uid_1000/job_%d,task_memcg=/slurm/uid_1000/job_4242/step_0,task=python3,pid=4243,uid=1000",
	"usb 1-1.4: new high-speed USB device number %d using xhci_hcd",
	"nvme nvme0: I/O %d QID 7 timeout, completion polled",
}

const benchMark = "kcrash-test[bench]: "

// benchJournal holds n records spread evenly over the hour before end; one
// in 10,000 is marked, which is what the benchmark's filter keeps.
func benchJournal(b *testing.B, n int, end time.Time) *Journal {
	b.Helper()
	j, err := Open(b.TempDir(), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	step := time.Hour / time.Duration(n)
	start := end.Add(-time.Hour)
	for i := range n {
		text := fmt.Sprintf(benchLines[i%len(benchLines)], 4000+i%3000, 4000+i%3000)
		if i%10000 == 5000 {
			text = benchMark + text
		}
		text, _, _ = strings.Cut(text, "%!") // lines with one verb drop fmt's complaint
		mono := time.Duration(i) * step
		e := Entry{Boot: testBoot, Wall: start.Add(mono), Rec: api.Record{
			Seq: uint64(i + 1), Mono: 3*24*time.Hour + mono, Level: uint8(3 + i%4), Facility: 0, Text: text,
		}}
		if i%8 == 1 {
			e.Rec.Dict = "SUBSYSTEM=pci\nDEVICE=+pci:0000:c1:00.0"
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

// BenchmarkJournalQueryHour is a client's query of the last hour: the cost
// target is 20 ms. "flood" holds an hour at 10,000 records a minute, the
// rate the agent is sized for; "sparse" an ordinary node's hour.
func BenchmarkJournalQueryHour(b *testing.B) {
	end := time.Now().UTC()
	for _, c := range []struct {
		name    string
		records int
		window  time.Duration
	}{
		{"flood", 600_000, time.Hour},
		{"flood-last-5min", 600_000, 5 * time.Minute},
		{"sparse", 100, time.Hour},
	} {
		b.Run(c.name, func(b *testing.B) {
			j := benchJournal(b, c.records, end)
			st := j.Stats()
			b.ReportMetric(float64(st.Bytes)/(1<<20), "journal-MiB")
			b.ResetTimer()
			for b.Loop() {
				kept, seen := 0, 0
				err := j.Query(context.Background(), end.Add(-c.window), end, func(e *Entry) bool {
					seen++
					if strings.HasPrefix(e.Rec.Text, benchMark) {
						kept++
					}
					return true
				})
				if err != nil {
					b.Fatal(err)
				}
				if want := int(float64(c.records) * c.window.Seconds() / 3600); seen < want-1 || seen > want+1 {
					b.Fatalf("query saw %d records, want %d", seen, want)
				}
			}
		})
	}
	// The server's way: newest first, stopping at its answer cap.
	b.Run("flood-newest-20000", func(b *testing.B) {
		j := benchJournal(b, 600_000, end)
		for b.Loop() {
			seen := 0
			err := j.QueryNewest(context.Background(), end.Add(-time.Hour), end, func(e *Entry) bool {
				seen++
				return seen < 20_000
			})
			if err != nil || seen != 20_000 {
				b.Fatalf("saw %d records: %v", seen, err)
			}
		}
	})
}
