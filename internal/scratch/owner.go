package scratch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kcrash/kcrash/internal/procfs"
)

// Owner is a process as another one can later tell it apart: its pid, in
// which pid namespace, since when (a pid is reused; its start time after
// boot with it is not), on which boot of which host.
type Owner struct {
	Pid        int    `json:"pid"`
	PidNS      uint64 `json:"pid_ns"`
	StartTicks uint64 `json:"start_ticks,omitempty"` // /proc/PID/stat's starttime
	BootID     string `json:"boot_id,omitempty"`
	Host       string `json:"host,omitempty"`
}

// Self is this process as an Owner.
func Self() Owner {
	o := Owner{Pid: os.Getpid(), PidNS: pidNamespace(), BootID: bootID()}
	if st, err := (procfs.FS{}).Stat(o.Pid); err == nil {
		o.StartTicks = st.StartTicks
	}
	o.Host, _ = os.Hostname()
	return o
}

// Gone reports whether the process o names has ended. It says so only when
// that can be known from here: a process of another pid namespace (a
// container sharing the directory) or of another host (a shared
// filesystem) may be alive where this one cannot see it. A process of this
// host's previous boot is gone; so is one whose pid now names a process
// that started at another time.
func (o Owner) Gone() bool {
	if o.Pid <= 0 {
		return false
	}
	if me := Self(); o.BootID != "" && me.BootID != "" && o.BootID != me.BootID {
		return o.Host != "" && o.Host == me.Host // this host rebooted; else another host's
	}
	ns := pidNamespace()
	if ns == 0 || o.PidNS != ns {
		return false
	}
	if o.Pid == os.Getpid() {
		return false
	}
	if !alive(o.Pid) {
		return true
	}
	if o.StartTicks == 0 {
		return false
	}
	st, err := (procfs.FS{}).Stat(o.Pid)
	if err != nil {
		return !alive(o.Pid) // it ended between the two looks, or cannot be read: alive
	}
	return st.StartTicks != o.StartTicks
}

// Tag is o in a form that fits a file name: "<pid namespace>.<pid>.<start ticks>".
func (o Owner) Tag() string { return fmt.Sprintf("%d.%d.%d", o.PidNS, o.Pid, o.StartTicks) }

// ParseTag reads what Tag wrote.
func ParseTag(s string) (Owner, bool) {
	f := strings.Split(s, ".")
	if len(f) != 3 {
		return Owner{}, false
	}
	ns, err1 := strconv.ParseUint(f[0], 10, 64)
	pid, err2 := strconv.Atoi(f[1])
	ticks, err3 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return Owner{}, false
	}
	return Owner{Pid: pid, PidNS: ns, StartTicks: ticks}, true
}

// bootID tells this boot of the host from the others; "" if unknown.
func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}
