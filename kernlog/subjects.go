package kernlog

import (
	"strings"
)

// LineSubjects is who one kernel line concerns: the processes it names and
// the GPUs it names by PCI address. The node agent resolves them to owners
// while the record is fresh, to decide later who may read it.
type LineSubjects struct {
	Pids []int
	// UID is the uid an OOM line prints for its victim (oom-kill's uid=,
	// the kill line's UID:, a task-dump row's uid column): the owner even
	// after the process is gone.
	UID *int
	// Memcg is the cgroup an OOM line names (task_memcg=, else oom_memcg=).
	Memcg string
	// BDFs are PCI addresses in the sysfs spelling 0000:3b:00.0.
	BDFs []string
}

// Empty reports whether the line names nothing.
func (s LineSubjects) Empty() bool {
	return len(s.Pids) == 0 && s.UID == nil && s.Memcg == "" && len(s.BDFs) == 0
}

// maxSubjects bounds what one line can name: a real line names at most a
// process and its thread, and a hostile one must not grow a journal entry.
const maxSubjects = 8

// Subjects reads the processes and GPUs a kernel line names. A test mark
// ("kcrash-test[TOKEN]: ") is skipped: a marked record stands for the
// driver's line after it.
func Subjects(text string) LineSubjects {
	t := StripTestMark(text)
	var s LineSubjects
	if len(t) > MaxLineBytes {
		t = t[:MaxLineBytes]
	}
	s.pidForms(t)
	s.oomForms(t)
	s.bdfForms(t)
	return s
}

// StripTestMark returns text without a leading test mark, and text as it is
// when it carries none.
func StripTestMark(text string) string {
	t := strings.TrimLeft(text, " \t")
	rest, ok := strings.CutPrefix(t, TestMarkPrefix)
	if !ok {
		return text
	}
	_, body, ok := strings.Cut(rest, "]: ")
	if !ok {
		return text
	}
	return body
}

func (s *LineSubjects) addPid(pid int64) {
	if pid <= 0 || pid > 1<<22 || len(s.Pids) >= maxSubjects {
		return // pid 0 is the kernel itself ("process  pid 0 thread  pid 0")
	}
	for _, p := range s.Pids {
		if int64(p) == pid {
			return
		}
	}
	s.Pids = append(s.Pids, int(pid))
}

func (s *LineSubjects) addBDF(b string) {
	b = normBDF(b)
	if !isBDF(b) || len(b) != 12 || len(s.BDFs) >= maxSubjects {
		return
	}
	for _, x := range s.BDFs {
		if x == b {
			return
		}
	}
	s.BDFs = append(s.BDFs, b)
}

func (s *LineSubjects) setUID(uid int64) {
	if s.UID == nil && uid >= 0 && uid < 1<<32 {
		u := int(uid)
		s.UID = &u
	}
}

// pidForms reads the spellings of a pid the kernel prints: amdgpu's
// "process X pid N thread X pid N", NVRM's and oom-kill's "pid=N",
// "pid: N", the reaper's "pid:N", "CPU: 3 PID: N Comm: x", the OOM killer's
// "Killed process N", and "comm[N]: segfault" / "traps: comm[N] ...".
func (s *LineSubjects) pidForms(t string) {
	for i := 0; i < len(t) && len(s.Pids) < maxSubjects; {
		k := strings.Index(t[i:], "pid")
		if k < 0 {
			break
		}
		at := i + k
		i = at + 3
		if at > 0 && isWordByte(t[at-1]) {
			continue // ppid=, tgid, task_pid
		}
		rest := t[at+3:]
		switch {
		case strings.HasPrefix(rest, ": "):
			rest = rest[2:]
		case strings.HasPrefix(rest, ":"), strings.HasPrefix(rest, "="), strings.HasPrefix(rest, " "):
			rest = rest[1:]
		default:
			continue
		}
		if pid, _, ok := leadingInt(rest); ok {
			s.addPid(pid)
		}
	}
	if pid, ok := intAfter(t, " PID: "); ok && strings.Contains(t, " Comm: ") {
		s.addPid(pid)
	}
	for _, m := range []string{"Killed process ", "Kill process ", "reaped process "} {
		if pid, ok := intAfter(t, m); ok {
			s.addPid(pid)
		}
	}
	for _, m := range []string{"]: segfault at ", "]: unhandled "} {
		if i := strings.Index(t, m); i >= 0 {
			if _, pid, ok := commPid(t[:i+1]); ok {
				s.addPid(pid)
			}
		}
	}
	if rest, ok := after(t, "traps: "); ok {
		if head, _, ok := strings.Cut(rest, "] "); ok {
			if _, pid, ok := commPid(head + "]"); ok {
				s.addPid(pid)
			}
		}
	}
}

func isWordByte(c byte) bool { return isDigit(c) || isUpper(c) || isLower(c) || c == '_' }

// oomForms reads the OOM killer's owner fields: oom-kill's
// "task_memcg=/x,task=perl,pid=N,uid=N", the kill line's "UID:N", and a
// row of the task dump, "[  pid  ]   uid  tgid total_vm  rss ... name".
func (s *LineSubjects) oomForms(t string) {
	if rest, ok := after(t, "oom-kill:"); ok {
		for tok := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(tok), "=")
			switch k {
			case "uid":
				if uid, _, ok := leadingInt(v); ok {
					s.setUID(uid)
				}
			case "task_memcg":
				s.Memcg = v
			case "oom_memcg":
				if s.Memcg == "" {
					s.Memcg = v
				}
			}
		}
	}
	if strings.Contains(t, "Killed process ") {
		if uid, ok := intAfter(t, " UID:"); ok {
			s.setUID(uid)
		}
	}
	if pid, uid, ok := oomTaskRow(t); ok {
		s.addPid(pid)
		s.setUID(uid)
	}
}

// oomTaskRow reads a row of the OOM killer's task dump: "[   1234]  1000
// 1234  12345  678  90112  0  0 python" (older kernels add nr_pmds; newer
// split rss into rss_anon/rss_file/rss_shmem). Every column but the name
// is a number; the uid column follows the bracket.
func oomTaskRow(t string) (pid, uid int64, ok bool) {
	t = strings.TrimSpace(t)
	rest, found := strings.CutPrefix(t, "[")
	if !found {
		return 0, 0, false
	}
	inner, cols, found := strings.Cut(rest, "]")
	if !found {
		return 0, 0, false
	}
	pid, tail, ok := leadingInt(strings.TrimSpace(inner))
	if !ok || tail != "" {
		return 0, 0, false
	}
	f := strings.Fields(cols)
	if len(f) < 7 {
		return 0, 0, false
	}
	for _, c := range f[:6] {
		if _, tail, ok := leadingInt(c); !ok || tail != "" {
			return 0, 0, false
		}
	}
	uid, _, _ = leadingInt(f[0])
	return pid, uid, true
}

// bdfForms reads the GPU a line names: the device prefix dev_printk puts
// on driver lines ("amdgpu 0000:c1:00.0: ", "nvidia 0000:3b:00.0: ",
// "pci 0000:3b:00.0: "), NVRM's "Xid (PCI:0000:3b:00)", "GPU at
// PCI:0000:0a:00:" and "GPU 0000:41:00.0:".
func (s *LineSubjects) bdfForms(t string) {
	for _, m := range []string{"amdgpu ", "nvidia ", "pci "} {
		if g, ok := bdfAfter(t, m); ok {
			s.addBDF(g)
		}
	}
	if x, ok := parseXid(t); ok {
		s.addBDF(x.pci)
	}
	if rest, ok := after(t, "GPU at PCI:"); ok {
		pci, _, _ := strings.Cut(rest, ": ")
		if w := strings.Fields(pci); len(w) > 0 {
			s.addBDF(w[0])
		}
	}
	for _, m := range []string{"NVRM: GPU ", "NVIDIA GPU "} {
		if w, ok := wordAfter(t, m); ok {
			s.addBDF(strings.TrimSuffix(w, ":"))
		}
	}
}
