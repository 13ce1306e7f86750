// Command agent-load drives bench/agent.sh: it writes marked records into
// the real /dev/kmsg at a steady rate, fills an agent's journal with an hour
// of records, and times a client's queries of the agent.
//
//	agent-load flood -rate 10000 -for 90s -token T
//	agent-load fill -state DIR -records 600000 -uid 990
//	agent-load query -socket SOCK -n 20
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/agent/kmsgsource"
	"github.com/kcrash/kcrash/internal/kmsg"
	"github.com/kcrash/kcrash/kernlog"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agent-load flood|fill|query [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "flood":
		err = flood(os.Args[2:])
	case "fill":
		err = fill(os.Args[2:])
	case "query":
		err = query(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-load:", err)
		os.Exit(1)
	}
}

// flood writes rate records a minute for a while, each marked with the
// token and harmless (no driver's words, level debug: not on a console).
// Each record gets its own open: the kernel rate-limits a writer per open
// file (printk_devkmsg=ratelimit lets 10 in every 5 s), so the sysctl
// stays as it is. It holds the flock internal/testlock takes on
// /dev/kmsg, so that no kcrash test reads the ring while the flood
// overwrites it.
func flood(args []string) error {
	fs := flag.NewFlagSet("flood", flag.ExitOnError)
	rate := fs.Int("rate", 10000, "records a minute")
	dur := fs.Duration("for", time.Minute, "how long")
	token := fs.String("token", "", "the test-mark token of every record")
	fs.Parse(args)
	if *token == "" || *rate <= 0 {
		return fmt.Errorf("flood needs -token and a positive -rate")
	}
	lock, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(lock)
	if err := unix.Flock(lock, unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock /dev/kmsg: %w", err)
	}
	mark := kernlog.TestMark(*token)
	pid := os.Getpid()
	start := time.Now()
	total := int(int64(*rate) * int64(*dur) / int64(time.Minute))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	written := 0
	for written < total {
		due := min(total, int(int64(*rate)*int64(time.Since(start))/int64(time.Minute))+1)
		for ; written < due; written++ {
			// One in eight names a live pid (this one): the agent looks
			// its owner up, as it does for a driver's fault line.
			text := fmt.Sprintf("<7>%sagent bench record %d", mark, written)
			if written%8 == 0 {
				text += fmt.Sprintf(" pid=%d", pid)
			}
			f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = f.WriteString(text + "\n")
			f.Close()
			if err != nil {
				return fmt.Errorf("write /dev/kmsg: %w", err)
			}
		}
		<-tick.C
	}
	fmt.Printf("wrote %d records in %.1fs\n", written, time.Since(start).Seconds())
	return nil
}

// fillLines are kernel lines of a busy GPU node, cycled through; kind says
// whom each names, which is what the agent would have annotated.
var fillLines = []struct {
	text string
	kind int // 0: a process, 1: a process on a GPU, 2: nothing
}{
	{"NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python3, Graphics SM Warp Exception on (GPC 4, TPC 1, SM 0): Out Of Range Address", 0},
	{"amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32770, for process python3 pid %d thread python3 pid %[1]d)", 1},
	{"audit: type=1400 audit(1733200000.123:%d): apparmor=\"DENIED\" operation=\"open\" class=\"file\" profile=\"snap.lxd\" name=\"/proc/sys/kernel/random/boot_id\"", 2},
	{"e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex, Flow Control: Rx/Tx (%d)", 2},
	{"python3[%d]: segfault at 7f2a3c000000 ip 00007f2a4b1e2c3d sp 00007ffd5e6f7a80 error 4 in libcuda.so.550.54.15[7f2a4a000000+1a00000]", 0},
	{"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/slurm/uid_1000/job_4242,task_memcg=/slurm/uid_1000/job_4242/step_0,task=python3,pid=%d,uid=1000", 0},
	{"usb 1-1.4: new high-speed USB device number %d using xhci_hcd", 2},
	{"nvme nvme0: I/O %d QID 7 timeout, completion polled", 2},
}

// fill writes an hour of records, ending now, into the journal under
// -state, of the running boot. One process record in ten is the querying
// user's (-uid), the others another user's.
func fill(args []string) error {
	fs := flag.NewFlagSet("fill", flag.ExitOnError)
	state := fs.String("state", "", "the agent's state directory")
	n := fs.Int("records", 2000, "records in the hour")
	uid := fs.Int("uid", 65534, "the querying user's uid")
	other := fs.Int("other-uid", 4242, "another user's uid")
	fs.Parse(args)
	boot, err := kmsgsource.ReadBootID()
	if err != nil {
		return err
	}
	j, err := journal.Open(*state, journal.Limits{})
	if err != nil {
		return err
	}
	end := time.Now()
	start := end.Add(-time.Hour)
	bootTime := kmsg.BootTime()
	step := time.Hour / time.Duration(*n)
	for i := range *n {
		l := fillLines[i%len(fillLines)]
		pid := 10000 + i%5000
		wall := start.Add(time.Duration(i) * step)
		// Sequence numbers past the ring's: the agent skips what the ring
		// holds (read already, as far as it knows), so the journal holds
		// this hour alone.
		e := journal.Entry{Boot: boot, Wall: wall, Rec: api.Record{
			Seq: 1<<40 + uint64(i), Mono: wall.Sub(bootTime), Level: 3, Text: fmt.Sprintf(l.text, pid),
		}}
		owner := *other
		if i%10 == 0 {
			owner = *uid
		}
		cg := fmt.Sprintf("/user.slice/user-%d.slice/session-1.scope", owner)
		switch l.kind {
		case 0:
			e.Subject.Procs = []journal.Proc{{Pid: pid, UID: owner, Cgroup: cg}}
		case 1:
			e.Rec.Dict = "SUBSYSTEM=pci\nDEVICE=+pci:0000:c1:00.0"
			e.Subject.Procs = []journal.Proc{{Pid: pid, UID: owner, Cgroup: cg}}
			e.Subject.Devices = []journal.Device{{BDF: "0000:c1:00.0", Holders: []journal.Holder{{Pid: pid, UID: owner, Cgroup: cg}}}}
		}
		if err := j.Append(e); err != nil {
			return err
		}
	}
	return j.Close()
}

// query asks the agent for the last hour n times, one after the other, and
// prints the median and 95th percentile of the answers' latency.
func query(args []string) error {
	fs := flag.NewFlagSet("query", flag.ExitOnError)
	socket := fs.String("socket", api.SocketPath(), "the agent's socket")
	n := fs.Int("n", 20, "queries")
	window := fs.Duration("window", time.Hour, "how far back each query reaches")
	mark := fs.String("mark", "", "the test-mark token whose records the client reads")
	agentPid := fs.Int("agent-pid", 0, "the agent's pid: also say the CPU each query cost it and this client")
	fs.Parse(args)
	c := api.New(*socket)
	var lat []time.Duration
	var last api.KmsgResponse
	// CPU time says more than wall time on a machine others load too.
	agent0, self0 := procCPU(*agentPid), selfCPU()
	for range *n {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t0 := time.Now()
		r, err := c.Kmsg(ctx, api.KmsgQuery{Since: t0.Add(-*window), Mark: *mark})
		lat = append(lat, time.Since(t0))
		cancel()
		if err != nil {
			return err
		}
		last = r
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	cpu := ""
	if *agentPid > 0 {
		cpu = fmt.Sprintf(", cpu/query agent %.1f + client %.1f ms", ms(procCPU(*agentPid)-agent0)/float64(*n), ms(selfCPU()-self0)/float64(*n))
	}
	fmt.Printf("%6.1f / %6.1f ms (%d records, %d withheld%s)\n",
		ms(lat[len(lat)/2]), ms(pct(0.95)), len(last.Records), last.Withheld, cpu)
	return nil
}

// procCPU is the CPU time (user + system) pid has used, from
// /proc/PID/stat in clock ticks (100 a second).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// selfCPU is this process's CPU time, every thread's.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
