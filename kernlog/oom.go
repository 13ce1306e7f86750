package kernlog

import (
	pathpkg "path"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// An OOM-killer report spans many lines, in this order since Linux 5.0:
//
//	pool invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0
//	CPU: 11 PID: 940 Comm: pool ...          call trace, memory state
//	memory: usage 2097152kB, limit 2097152kB, failcnt 12     (memcg only)
//	[  pid  ]   uid  tgid total_vm ...        task table, one row per task
//	oom-kill:constraint=CONSTRAINT_NONE,...,task=perl,pid=1440763,uid=21417
//	Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, anon-rss:...
//	oom_reaper: reaped process 1440763 (perl), now anon-rss:0kB, ...   (later)
//
// Older kernels print "Out of memory: Kill process N (comm) score S or
// sacrifice child" before "Killed process". Logs filtered with grep keep only
// some of these lines, so each may open a report on its own. A report is
// emitted when its "Killed process" line arrives, when the next report starts,
// or at the end of input.

// oomGap is how many lines may pass without an OOM line before an open report
// is closed; the task table alone has one line per process.
const oomGap = 4096

type oomState struct {
	open          bool
	f             evidence.Finding
	last          int
	hasInvoked    bool
	hasConstraint bool
	hasKill       bool
	// recent holds indexes into parser.out of the last OOM findings, so an
	// oom_reaper line printed seconds later finds its victim.
	recent []int
}

func (o *oomState) start(r *rec) {
	o.open = true
	o.f = newFinding(r, evidence.HostOOM, "oom_kill", "")
	o.last = r.n
	o.hasInvoked, o.hasConstraint, o.hasKill = false, false, false
}

// tick sees every line while a report is open: it picks up the lines of the
// report that carry no OOM keyword and closes a report left open too long.
func (o *oomState) tick(p *parser, r *rec) {
	if !o.open {
		return
	}
	if r.n-o.last > oomGap || r.n < o.last {
		o.flush(p)
		return
	}
	t := strings.TrimSpace(r.text)
	d := o.f.Details
	switch {
	case strings.HasPrefix(t, "[") && strings.Contains(t, "]"):
		o.last = r.n // a task-table row: the report is still being printed
	case o.hasInvoked && r.n-o.f.Line <= 3 && strings.HasPrefix(t, "CPU: "):
		if pid, ok := intAfter(t, " PID: "); ok {
			d["trigger_pid"] = pid
		}
	case strings.HasPrefix(t, "memory: usage "):
		if v, ok := intAfter(t, "usage "); ok {
			d["memcg_usage_kb"] = v
		}
		if v, ok := intAfter(t, "limit "); ok {
			d["memcg_limit_kb"] = v
		}
		if v, ok := intAfter(t, "failcnt "); ok {
			d["memcg_failcnt"] = v
		}
		d.SetText(detail.Scope, "memcg")
		o.last = r.n
	case strings.Contains(t, "mem_cgroup_out_of_memory"):
		// The call trace names the memcg path before any constraint line
		// does; a later constraint line overrides this.
		d.SetText(detail.Scope, "memcg")
	}
}

// oomLine handles the lines that carry an OOM keyword.
func (p *parser) oomLine(r *rec) bool {
	t := r.text
	o := &p.oom
	switch {
	case strings.Contains(t, " invoked oom-killer:"):
		o.flush(p)
		o.start(r)
		o.invoked(t)
	case strings.Contains(t, "oom-kill:constraint="):
		if !o.open || o.hasConstraint || o.hasKill {
			o.flush(p)
			o.start(r)
		}
		o.constraint(t)
	case strings.Contains(t, "Killed process "):
		pid, _ := intAfter(t, "Killed process ")
		if o.open && (o.hasKill || (o.f.Pid != 0 && int64(o.f.Pid) != pid)) {
			o.flush(p)
		}
		if !o.open {
			o.start(r)
		}
		o.killed(r, t)
		o.flush(p)
	case strings.Contains(t, "of memory: Kill process "):
		if !o.open {
			o.start(r)
		}
		o.victim(t, "Kill process ")
		if s, ok := intAfter(t, ") score "); ok {
			o.f.Details["oom_score"] = s
		}
		o.f.Text = clip(strings.TrimSpace(t), maxTextBytes)
	case strings.Contains(t, "oom_reaper: "):
		p.reaper(r)
	default:
		return false
	}
	o.last = r.n
	return true
}

// invoked reads "<comm> invoked oom-killer: gfp_mask=0x..(..), order=0, oom_score_adj=0".
func (o *oomState) invoked(t string) {
	o.hasInvoked = true
	d := o.f.Details
	i := strings.Index(t, " invoked oom-killer:")
	d["trigger"] = strings.TrimSpace(t[:i])
	rest := t[i:]
	if v, ok := wordAfter(rest, "gfp_mask="); ok {
		d["gfp_mask"] = strings.TrimSuffix(v, ",")
	}
	if v, ok := intAfter(rest, "order="); ok {
		d["order"] = v
	}
	if v, ok := intAfter(rest, "oom_score_adj="); ok {
		d["trigger_oom_score_adj"] = v
	}
}

// constraint reads "oom-kill:constraint=...,task_memcg=...,task=perl,pid=N,uid=N".
// Values are comma-separated but mems_allowed is itself a list ("0,2"), so a
// token without '=' continues the value before it.
func (o *oomState) constraint(t string) {
	o.hasConstraint = true
	d := o.f.Details
	rest, _ := after(t, "oom-kill:")
	prev := ""
	for tok := range strings.SplitSeq(strings.TrimSpace(rest), ",") {
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			if tok == "global_oom" {
				d["global_oom"] = true
			} else if s, isStr := d[prev].(string); isStr {
				d[prev] = s + "," + tok
			}
			continue
		}
		switch k {
		case "pid":
			if pid, _, ok := leadingInt(v); ok && o.f.Pid == 0 {
				o.f.Pid = int(pid)
			}
		case "uid":
			if uid, _, ok := leadingInt(v); ok {
				d["uid"] = uid
			}
		case "task":
			if _, ok := d["victim"]; !ok {
				d.SetText(detail.Victim, v)
			}
		case "oom_memcg":
			d.SetText(detail.Memcg, v)
		default:
			d[k] = v
		}
		prev = k
		if k == "oom_memcg" {
			prev = "memcg"
		}
	}
	if !o.hasKill {
		o.f.Text = clip(strings.TrimSpace(t), maxTextBytes)
	}
}

// killed reads "[Memory cgroup ]Out of memory: Killed process N (comm)
// total-vm:NkB, anon-rss:NkB, file-rss:NkB, shmem-rss:NkB, UID:N pgtables:NkB
// oom_score_adj:N", the line that proves a process was killed.
func (o *oomState) killed(r *rec, t string) {
	o.hasKill = true
	d := o.f.Details
	o.f.Text = clip(strings.TrimSpace(t), maxTextBytes)
	d["kill_line"] = int64(r.n)
	if strings.Contains(t, "Memory cgroup out of memory") {
		d.SetText(detail.Scope, "memcg")
	}
	rest := o.victim(t, "Killed process ")
	for tok := range strings.FieldsFuncSeq(rest, func(c rune) bool { return c == ' ' || c == ',' }) {
		k, v, ok := strings.Cut(tok, ":")
		if !ok {
			continue
		}
		kf, known := killFields[k]
		if !known {
			continue
		}
		if kf.kb {
			v = strings.TrimSuffix(v, "kB")
		}
		if n, rest, ok := leadingInt(v); ok && rest == "" {
			d[kf.key] = n
		}
	}
}

// killField names the detail a kill-line label goes to; kb marks values
// printed with a kB suffix.
type killField struct {
	key string
	kb  bool
}

var killFields = map[string]killField{
	"total-vm":      {"total_vm_kb", true},
	"anon-rss":      {string(detail.AnonRSSKB), true},
	"file-rss":      {"file_rss_kb", true},
	"shmem-rss":     {"shmem_rss_kb", true},
	"pgtables":      {"pgtables_kb", true},
	"UID":           {"uid", false},
	"oom_score_adj": {"oom_score_adj", false},
}

// victim reads "<marker>N (comm)" into Pid and details and returns the text
// after the comm. The comm may contain spaces and parentheses, so it ends at
// the last ')' before the first "kB" field, or at the last ')' of the line.
func (o *oomState) victim(t, marker string) string {
	rest, _ := after(t, marker)
	pid, rest, ok := leadingInt(rest)
	if !ok || !strings.HasPrefix(rest, " (") {
		return rest
	}
	o.f.Pid = int(pid)
	rest = rest[2:]
	end := strings.LastIndexByte(rest, ')')
	if k := strings.Index(rest, ") total-vm:"); k >= 0 {
		end = k
	} else if k := strings.Index(rest, ") score "); k >= 0 {
		end = k
	}
	if end < 0 {
		return rest
	}
	o.f.Details.SetText(detail.Victim, rest[:end])
	return rest[end+1:]
}

// reaper attaches "oom_reaper: reaped process N (comm), now anon-rss:0kB..."
// or "oom_reaper: unable to reap pid:N (comm)" to the report of its victim.
func (p *parser) reaper(r *rec) {
	t := r.text
	outcome, marker := "reaped", "reaped process "
	pid, ok := intAfter(t, marker)
	if !ok {
		outcome, marker = "unable_to_reap", "unable to reap pid:"
		pid, ok = intAfter(t, marker)
	}
	if !ok {
		return
	}
	o := &p.oom
	if o.open && int64(o.f.Pid) == pid {
		o.f.Details["oom_reaper"] = outcome
		return
	}
	for i := len(o.recent) - 1; i >= 0; i-- {
		f := &p.out[o.recent[i]]
		if int64(f.Pid) == pid {
			f.Details["oom_reaper"] = outcome
			f.Details["oom_reaper_line"] = int64(r.n)
			return
		}
	}
	// Only the reaper line survived (a grep, a rotated log): it still proves
	// the kill.
	o.flush(p)
	o.start(r)
	o.victim(t, marker)
	o.f.Details["oom_reaper"] = outcome
	o.flush(p)
}

// flush emits the open report.
func (o *oomState) flush(p *parser) {
	if !o.open {
		return
	}
	o.open = false
	f := o.f
	d := f.Details
	if c, _ := d["constraint"].(string); c != "" {
		d.SetText(detail.Scope, constraintScope(c))
	} else if _, ok := d["scope"]; !ok && o.hasKill {
		d.SetText(detail.Scope, "global")
	}
	if f.Pid == 0 {
		d["event"] = "oom_invoked" // the report was cut before it named a victim
	}
	for _, k := range []detail.Text{detail.TaskMemcg, detail.Memcg} {
		if path := d.Text(k); path != "" {
			if id := podUID(path); id != "" {
				d["pod_uid"] = id
			}
			if id := containerID(path); id != "" {
				d["container_id"] = id
			}
		}
	}
	p.emit(f, "")
	if len(p.out) > 0 && p.out[len(p.out)-1].Line == f.Line {
		o.recent = append(o.recent, len(p.out)-1)
		if len(o.recent) > 8 {
			o.recent = o.recent[1:]
		}
	}
}

func constraintScope(c string) string {
	switch c {
	case "CONSTRAINT_NONE":
		return "global"
	case "CONSTRAINT_MEMCG":
		return "memcg"
	case "CONSTRAINT_CPUSET":
		return "cpuset"
	case "CONSTRAINT_MEMORY_POLICY":
		return "mempolicy"
	}
	return strings.ToLower(strings.TrimPrefix(c, "CONSTRAINT_"))
}

// podUID recovers a Kubernetes pod UID from a cgroup path: the systemd
// driver writes it as "-pod17d1d0b1_bbeb_4252_a45c_c9f426d1cb34.slice",
// cgroupfs as "/pod17d1d0b1-bbeb-4252-a45c-c9f426d1cb34/".
func podUID(path string) string {
	for i := 0; ; {
		k := strings.Index(path[i:], "pod")
		if k < 0 {
			return ""
		}
		i += k + 3
		if u := uuidAt(path[i:]); u != "" {
			return u
		}
	}
}

func uuidAt(s string) string {
	if len(s) < 36 {
		return ""
	}
	b := []byte(s[:36])
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' && c != '_' {
				return ""
			}
			b[i] = '-'
		default:
			if !isHex(c) {
				return ""
			}
		}
	}
	if len(s) > 36 && isHex(s[36]) {
		return ""
	}
	return strings.ToLower(string(b))
}

// containerID finds the 64-hex container ID that container runtimes put in
// the last element of a container's cgroup path.
func containerID(path string) string {
	last := pathpkg.Base(path)
	last = strings.TrimSuffix(last, ".scope")
	if i := strings.LastIndexAny(last, "-:"); i >= 0 {
		last = last[i+1:]
	}
	if len(last) == 64 && allHex(last) {
		return last
	}
	return ""
}
