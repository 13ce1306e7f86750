package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kcrash/kcrash/internal/execx"
)

// Slurm runs Slurm's client commands, each under a deadline and killed with its
// process group when it overruns (a dead slurmctld makes scontrol wait for
// its own long timeouts). The zero value runs scontrol and sacct from PATH,
// or from the usual directories when PATH is empty (a slurmd epilog runs with
// no PATH at all).
type Slurm struct {
	Scontrol string        // command name or path; default "scontrol"
	Sacct    string        // default "sacct"
	Timeout  time.Duration // per call; default 15s
	Env      []string      // environment of the commands; nil inherits kcrash's
}

// ErrJobNotFound is returned when scontrol no longer (or never) knew the job:
// a finished job is forgotten MinJobAge (default 300 s) after it ended.
var ErrJobNotFound = errors.New("slurm does not know the job")

func (s *Slurm) timeout() time.Duration {
	if s == nil || s.Timeout <= 0 {
		return 15 * time.Second
	}
	return s.Timeout
}

// fallbackBin is where Slurm's clients live when PATH does not say.
var fallbackBin = []string{"/usr/bin", "/usr/local/bin", "/opt/slurm/bin", "/usr/local/slurm/bin", "/bin"}

// resolve finds a command by name in PATH, then in fallbackBin.
func resolve(name string) string {
	if strings.ContainsRune(name, '/') {
		return name
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range fallbackBin {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}

func (s *Slurm) run(ctx context.Context, name string, args ...string) (execx.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	return execx.Run(ctx, s.Env, resolve(name), args...)
}

func (s *Slurm) scontrol() string {
	if s != nil && s.Scontrol != "" {
		return s.Scontrol
	}
	return "scontrol"
}

func (s *Slurm) sacct() string {
	if s != nil && s.Sacct != "" {
		return s.Sacct
	}
	return "sacct"
}

// ShowJob runs `scontrol show job -o ID` and returns the job's record and
// scontrol's output as printed. A job scontrol does not know gives ErrJobNotFound.
func (s *Slurm) ShowJob(ctx context.Context, id string) (*SlurmJob, []byte, error) {
	r, err := s.run(ctx, s.scontrol(), "show", "job", "-o", id)
	if err != nil {
		return nil, nil, fmt.Errorf("scontrol show job %s: %w", id, err)
	}
	if r.ExitCode != 0 {
		msg := strings.TrimSpace(string(r.Stderr) + " " + string(r.Stdout))
		if strings.Contains(msg, "Invalid job id") {
			return nil, r.Stdout, fmt.Errorf("job %s: %w (%s)", id, ErrJobNotFound, msg)
		}
		return nil, r.Stdout, fmt.Errorf("scontrol show job %s: exit status %d: %s", id, r.ExitCode, msg)
	}
	jobs := ParseScontrolJobs(r.Stdout)
	j := PickJob(jobs, id)
	if j == nil {
		return nil, r.Stdout, fmt.Errorf("scontrol show job %s: no job record in its output %q", id, firstLine(r.Stdout))
	}
	return j, r.Stdout, nil
}

// BatchScript returns the job's batch script (`scontrol write batch_script ID -`),
// which the controller keeps as long as the job record.
func (s *Slurm) BatchScript(ctx context.Context, id string) ([]byte, error) {
	r, err := s.run(ctx, s.scontrol(), "write", "batch_script", id, "-")
	if err != nil {
		return nil, fmt.Errorf("scontrol write batch_script %s: %w", id, err)
	}
	// Slurm 22.05 exits 0 when it fails to retrieve the script.
	if r.ExitCode != 0 || len(r.Stdout) == 0 || bytes.HasPrefix(r.Stdout, []byte("job script retrieval failed")) {
		msg := strings.TrimSpace(string(r.Stderr) + " " + string(r.Stdout))
		return nil, fmt.Errorf("scontrol write batch_script %s: exit status %d: %s", id, r.ExitCode, firstLine([]byte(msg)))
	}
	return r.Stdout, nil
}

// WrappedCommand is the command of an `sbatch --wrap` script, or "".
func WrappedCommand(script []byte) string {
	const mark = "# This script was created by sbatch --wrap."
	i := bytes.Index(script, []byte(mark))
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(string(script[i+len(mark):]))
}

// SacctFields is what Accounting asks sacct for. JobName comes last so that a
// name holding the separator cannot shift the other columns.
var SacctFields = []string{"JobID", "State", "ExitCode", "DerivedExitCode", "MaxRSS", "MaxRSSNode", "Elapsed", "Start", "End", "NodeList", "ReqMem", "JobName"}

// Accounting asks sacct about the job: `sacct -j ID -P -n --format=...` from
// slurmdbd, or, when accounting storage is off, `sacct -c` from the
// jobcomp/filetxt log (one row per job, no steps, no MaxRSS). It returns an
// error when neither answers: a cluster without accounting is normal, and
// callers carry on with scontrol's record alone.
func (s *Slurm) Accounting(ctx context.Context, id string) (*Accounting, error) {
	format := "--format=" + strings.Join(SacctFields, ",")
	var errs []string
	for _, completion := range []bool{false, true} {
		args := []string{"-j", id, "-P", "-n", format}
		if completion {
			args = append([]string{"-c"}, args...)
		}
		r, err := s.run(ctx, s.sacct(), args...)
		if err != nil {
			errs = append(errs, err.Error())
			if errors.Is(err, execx.ErrTimeout) || ctx.Err() != nil {
				break // a hung sacct will hang again
			}
			continue
		}
		rows := ParseSacct(r.Stdout, SacctFields)
		if r.ExitCode != 0 || len(rows) == 0 {
			msg := strings.TrimSpace(string(r.Stderr))
			if msg == "" {
				msg = "no rows"
			}
			errs = append(errs, fmt.Sprintf("%s: exit status %d: %s", strings.Join(append([]string{"sacct"}, args...), " "), r.ExitCode, msg))
			continue
		}
		return &Accounting{JobID: id, Rows: rows, Completion: completion, Command: append([]string{s.sacct()}, args...), Raw: r.Stdout}, nil
	}
	return nil, fmt.Errorf("no accounting for job %s: %s", id, strings.Join(errs, "; "))
}

func firstLine(b []byte) string {
	l, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
	if len(l) > 200 {
		l = l[:200]
	}
	return string(l)
}

// Job states (sacct/squeue long names). A job whose state is terminal has
// ended; COMPLETING is not terminal (the epilog still runs).
const (
	StateBootFail    = "BOOT_FAIL"
	StateCancelled   = "CANCELLED"
	StateCompleted   = "COMPLETED"
	StateDeadline    = "DEADLINE"
	StateFailed      = "FAILED"
	StateNodeFail    = "NODE_FAIL"
	StateOutOfMemory = "OUT_OF_MEMORY"
	StatePreempted   = "PREEMPTED"
	StateTimeout     = "TIMEOUT"
	StateCompleting  = "COMPLETING"
	StatePending     = "PENDING"
	StateRunning     = "RUNNING"
)

// DefaultFailStates are the states `kcrash attach --slurm-job` writes a bundle for.
var DefaultFailStates = []string{StateFailed, StateOutOfMemory, StateNodeFail, StateTimeout, StateCancelled}

var terminal = map[string]bool{StateBootFail: true, StateCancelled: true, StateCompleted: true, StateDeadline: true,
	StateFailed: true, StateNodeFail: true, StateOutOfMemory: true, StatePreempted: true, StateTimeout: true}

// Terminal says whether a job in state has ended for good. PREEMPTED counts
// (a requeued job goes back to PENDING and is followed on).
func Terminal(state string) bool { return terminal[NormState(state)] }

// NormState is the state's first word, upper case: sacct prints
// "CANCELLED by 1000", squeue may print "CANCELLED+".
func NormState(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " +"); i >= 0 {
		s = s[:i]
	}
	return strings.ToUpper(s)
}

// ExitStatus is Slurm's "exit:signal" pair (ExitCode, DerivedExitCode).
type ExitStatus struct {
	Raw    string `json:"raw"`
	Code   int    `json:"code"`
	Signal int    `json:"signal"`
}

// SigOOM is the signal half Slurm reports for a job its cgroup OOM handling
// ended (ExitCode=0:125; Slurm's SIG_OOM 253 with the core bit masked off).
// It is not a real signal.
const SigOOM = 125

// ParseExitStatus reads "139:0", "0:11" or "3".
func ParseExitStatus(s string) (ExitStatus, bool) {
	s = strings.TrimSpace(s)
	a, b, hasSig := strings.Cut(s, ":")
	code, err := strconv.Atoi(a)
	if err != nil || code < 0 {
		return ExitStatus{Raw: s}, false
	}
	e := ExitStatus{Raw: s, Code: code}
	if hasSig {
		sig, err := strconv.Atoi(b)
		if err != nil || sig < 0 {
			return ExitStatus{Raw: s}, false
		}
		e.Signal = sig
	}
	return e, true
}

// Zero is 0:0.
func (e ExitStatus) Zero() bool { return e.Code == 0 && e.Signal == 0 }

// DeathSignal is the signal the job's process died of: the signal half when it
// is a real signal (1-64), else, with implied set, N from an exit code of 128+N,
// which is how a shell reports a child killed by signal N: scontrol shows a
// batch script whose program segfaulted as 139:0 (sacct from slurmdbd then
// shows it as 11:0, so do not use this on slurmdbd's codes). 0 when none.
func (e ExitStatus) DeathSignal() (sig int, implied bool) {
	switch {
	case e.Signal >= 1 && e.Signal <= 64:
		return e.Signal, false
	case e.Signal == 0 && e.Code > 128 && e.Code <= 128+64:
		return e.Code - 128, true
	}
	return 0, false
}

// SlurmJob is one record of `scontrol show job`.
type SlurmJob struct {
	ID          string
	ArrayJobID  string
	ArrayTaskID string
	Name        string
	State       string // JobState as printed (COMPLETING while the epilog runs)
	Reason      string
	Exit        ExitStatus
	DerivedExit *ExitStatus // only with `scontrol show job -d`, or when printed
	NodeList    string
	BatchHost   string
	StdOut      string
	StdErr      string
	WorkDir     string
	Command     string
	UserID      string
	RunTime     string
	TimeLimit   string
	MinMemory   string // MinMemoryNode or MinMemoryCPU ("50M")
	SubmitTime  time.Time
	StartTime   time.Time
	EndTime     time.Time
	// Fields holds every key=value as printed; Keys their order.
	Fields map[string]string
	Keys   []string
	Raw    string // the record, one line
}

// freeText are fields whose values may hold spaces: inside them a token that
// looks like KEY=VALUE starts a new field only when KEY is a known field.
var freeText = map[string]bool{"JobName": true, "Command": true, "WorkDir": true, "StdErr": true, "StdIn": true,
	"StdOut": true, "Comment": true, "AdminComment": true, "SystemComment": true, "Extra": true, "MailUser": true,
	"Reason": true, "Container": true, "ContainerID": true, "SelinuxContext": true, "Features": true, "Prefer": true,
	"ClusterFeatures": true, "BurstBuffer": true, "BurstBufferState": true}

// knownKeys are the fields of `scontrol show job` (Slurm 20.11 to 24.x).
var knownKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`JobId ArrayJobId ArrayTaskId ArrayTaskThrottle HetJobId HetJobOffset HetJobIdSet
		JobName UserId GroupId MCS_label Priority Nice Account QOS WCKey JobState Reason Dependency Requeue Restarts
		BatchFlag Reboot ExitCode DerivedExitCode RunTime TimeLimit TimeMin SubmitTime EligibleTime AccrueTime StartTime
		EndTime Deadline PreemptEligibleTime PreemptTime SuspendTime SecsPreSuspend LastSchedEval Scheduler Partition
		AllocNode:Sid ReqNodeList ExcNodeList NodeList BatchHost SchedNodeList NumNodes NumCPUs NumTasks CPUs/Task
		ReqB:S:C:T TRES Socks/Node NtasksPerN:B:S:C CoreSpec ThreadSpec MinCPUsNode MinMemoryNode MinMemoryCPU
		MinTmpDiskNode Features ClusterFeatures Prefer DelayBoot OverSubscribe Contiguous Licenses LicensesAlloc Network
		Command WorkDir AdminComment SystemComment Comment Extra StdErr StdIn StdOut Power CpusPerTres MemPerTres
		TresBind TresFreq TresPerJob TresPerNode TresPerSocket TresPerTask MailUser MailType NtasksPerTRES Reservation
		BurstBuffer BurstBufferState CpuFreqMin CpuFreqMax CpuFreqGov KillOInInvalidDependent Nodes CPU_IDs Mem GRES
		GRES_IDX Container ContainerID SelinuxContext ResvPorts Switches Wait-for-Switch FedOrigin FedViableSiblings
		FedActiveSiblings SiblingsActive SiblingsViable JobArrayJobId OOMKillStep Resv_Ports CronJob CrontabSpec
		NodeSet ReqNodes`) {
		knownKeys[k] = true
	}
}

// keyOf returns the key of a token that looks like KEY=VALUE, or "".
func keyOf(tok string) string {
	i := strings.IndexByte(tok, '=')
	if i <= 0 {
		return ""
	}
	k := tok[:i]
	if c := k[0]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
		return ""
	}
	for _, c := range k {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("_:/-", c)) {
			return ""
		}
	}
	return k
}

// ParseScontrolJobs parses `scontrol show job -o` (one record a line) or the
// default multi-line form (records start at "JobId=", continuation lines are
// indented, records are separated by blank lines).
func ParseScontrolJobs(out []byte) []*SlurmJob {
	var recs []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			recs = append(recs, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimRight(line, "\r")
		t := strings.TrimSpace(line)
		switch {
		case t == "":
			flush()
		case strings.HasPrefix(line, "JobId="):
			flush()
			cur = append(cur, strings.TrimRight(line, " "))
		case len(cur) > 0:
			cur = append(cur, t)
		}
	}
	flush()
	var jobs []*SlurmJob
	for _, r := range recs {
		jobs = append(jobs, ParseScontrolRecord(r))
	}
	return jobs
}

// ParseScontrolRecord parses one `scontrol show job -o` line.
func ParseScontrolRecord(line string) *SlurmJob {
	line = strings.TrimRight(line, " \r\n")
	j := &SlurmJob{Raw: line}
	j.Keys, j.Fields = splitRecord(line, knownKeys, freeText)
	f := j.Fields
	j.ID, j.ArrayJobID, j.ArrayTaskID, j.Name = f["JobId"], f["ArrayJobId"], f["ArrayTaskId"], f["JobName"]
	j.State, j.Reason = f["JobState"], f["Reason"]
	j.Exit, _ = ParseExitStatus(f["ExitCode"])
	if d, ok := f["DerivedExitCode"]; ok {
		if e, ok := ParseExitStatus(d); ok {
			j.DerivedExit = &e
		}
	}
	j.NodeList, j.BatchHost = nullable(f["NodeList"]), nullable(f["BatchHost"])
	j.StdOut, j.StdErr, j.WorkDir, j.Command = nullable(f["StdOut"]), nullable(f["StdErr"]), nullable(f["WorkDir"]), nullable(f["Command"])
	j.UserID, j.RunTime, j.TimeLimit = f["UserId"], f["RunTime"], f["TimeLimit"]
	j.MinMemory = f["MinMemoryNode"]
	if j.MinMemory == "" {
		j.MinMemory = f["MinMemoryCPU"]
	}
	j.SubmitTime, j.StartTime, j.EndTime = SlurmTime(f["SubmitTime"]), SlurmTime(f["StartTime"]), SlurmTime(f["EndTime"])
	return j
}

// splitRecord splits one line of KEY=VALUE fields. Inside a free-text
// field a token that looks like KEY=VALUE starts a new field only when KEY
// is a known one not seen yet (a record never repeats a field), so
// "State=IDLE ... Reason=GPU a=b State=x" keeps "GPU a=b State=x" whole.
func splitRecord(line string, known, free map[string]bool) ([]string, map[string]string) {
	var keys []string
	fields := map[string]string{}
	var key string
	var val strings.Builder
	done := func() {
		if key == "" {
			return
		}
		if _, dup := fields[key]; !dup {
			keys = append(keys, key)
		}
		fields[key] = val.String()
	}
	for _, tok := range strings.Split(line, " ") {
		k := keyOf(tok)
		_, seen := fields[k]
		if k != "" && (key == "" || known[k] && !seen && k != key || !free[key]) {
			done()
			key = k
			val.Reset()
			val.WriteString(tok[len(k)+1:])
			continue
		}
		if key != "" {
			val.WriteByte(' ')
			val.WriteString(tok)
		}
	}
	done()
	return keys, fields
}

func nullable(s string) string {
	if s == "(null)" {
		return ""
	}
	return s
}

// PickJob returns the record of id among scontrol's records: the one whose
// JobId is id, or whose ArrayJobId_ArrayTaskId is; else the first.
func PickJob(jobs []*SlurmJob, id string) *SlurmJob {
	for _, j := range jobs {
		if j.ID == id || j.ArrayJobID != "" && j.ArrayJobID+"_"+j.ArrayTaskID == id {
			return j
		}
	}
	if len(jobs) > 0 {
		return jobs[0]
	}
	return nil
}

// SlurmTime parses Slurm's local "2006-01-02T15:04:05"; zero for Unknown, None, N/A.
func SlurmTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(s), time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

// BaseState is JobState, or while the job is COMPLETING (an epilog sees it so:
// the controller shows the final state only once every epilog has finished)
// the state the record implies: Reason=OutOfMemory is OUT_OF_MEMORY,
// TimeLimit TIMEOUT, a node failure NODE_FAIL, a non-zero ExitCode FAILED, and a
// signal with no reason (scancel) CANCELLED. inferred says it was worked out.
func (j *SlurmJob) BaseState() (state string, inferred bool) {
	st := NormState(j.State)
	if st != StateCompleting {
		return st, false
	}
	switch j.Reason {
	case "OutOfMemory":
		return StateOutOfMemory, true
	case "TimeLimit":
		return StateTimeout, true
	case "NodeDown", "NodeFail", "Node_Fail", "NodeFailure":
		return StateNodeFail, true
	case "DeadLine":
		return StateDeadline, true
	}
	if j.Exit.Zero() {
		return StateCompleted, true
	}
	if (j.Reason == "None" || j.Reason == "") && j.Exit.Code == 0 && (j.Exit.Signal == 9 || j.Exit.Signal == 15) {
		return StateCancelled, true
	}
	return StateFailed, true
}

// OnNode says whether host (a short host name) is one of the job's nodes.
func (j *SlurmJob) OnNode(host string) bool {
	short, _, _ := strings.Cut(host, ".")
	if j.BatchHost == short || j.BatchHost == host {
		return true
	}
	for _, n := range ExpandHostlist(j.NodeList) {
		if n == short || n == host {
			return true
		}
	}
	return false
}

// ExpandHostlist expands Slurm's "gpu[01-03,07],cpu5" into its host names.
// Malformed ranges are kept as written.
func ExpandHostlist(s string) []string {
	var out []string
	for _, part := range splitTop(strings.TrimSpace(s)) {
		out = append(out, expandOne(part)...)
	}
	return out
}

// splitTop splits at commas outside brackets.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				if i > start {
					out = append(out, s[start:i])
				}
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func expandOne(p string) []string {
	open := strings.IndexByte(p, '[')
	if open < 0 {
		return []string{p}
	}
	end := strings.IndexByte(p[open:], ']')
	if end < 0 {
		return []string{p}
	}
	end += open
	prefix, body, rest := p[:open], p[open+1:end], p[end+1:]
	var tails []string
	if strings.ContainsRune(rest, '[') {
		tails = expandOne(rest)
	} else {
		tails = []string{rest}
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			for _, t := range tails {
				out = append(out, prefix+r+t)
			}
			continue
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a || b-a > 100000 {
			return []string{p}
		}
		for n := a; n <= b; n++ {
			num := fmt.Sprintf("%0*d", len(lo), n)
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
		}
	}
	return out
}

// AcctRow is one row of `sacct -P`: the job, or one of its steps ("12.batch", "12.0").
type AcctRow struct {
	JobID       string            `json:"job_id"`
	State       string            `json:"state"` // as printed ("CANCELLED by 0")
	Exit        ExitStatus        `json:"exit_code"`
	DerivedExit *ExitStatus       `json:"derived_exit_code,omitempty"`
	MaxRSS      int64             `json:"max_rss_bytes"` // -1 when not reported
	Fields      map[string]string `json:"fields"`
}

// ParseSacct parses `sacct -P -n --format=F1,F2,...` output with the given
// fields. Extra separators fall into the last field. A header line, if present
// (no -n), is skipped.
func ParseSacct(out []byte, fields []string) []AcctRow {
	var rows []AcctRow
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		cols := strings.SplitN(line, "|", len(fields))
		if len(cols) > 0 && len(fields) > 0 && cols[0] == fields[0] {
			continue // header
		}
		r := AcctRow{Fields: map[string]string{}, MaxRSS: -1}
		for i, f := range fields {
			if i < len(cols) {
				r.Fields[f] = cols[i]
			}
		}
		r.JobID, r.State = r.Fields["JobID"], r.Fields["State"]
		r.Exit, _ = ParseExitStatus(r.Fields["ExitCode"])
		if d := r.Fields["DerivedExitCode"]; d != "" {
			if e, ok := ParseExitStatus(d); ok {
				r.DerivedExit = &e
			}
		}
		if n, ok := ParseMemSize(r.Fields["MaxRSS"]); ok {
			r.MaxRSS = n
		}
		rows = append(rows, r)
	}
	return rows
}

// ParseMemSize reads Slurm's memory sizes ("211776K", "1.50G", "50M", "0")
// into bytes. Units are binary (K = 1024); a bare number is bytes.
func ParseMemSize(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	mult := 1.0
	switch s[len(s)-1] {
	case 'K', 'k':
		mult = 1 << 10
	case 'M', 'm':
		mult = 1 << 20
	case 'G', 'g':
		mult = 1 << 30
	case 'T', 't':
		mult = 1 << 40
	case 'P', 'p':
		mult = 1 << 50
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return int64(f * mult), true
}

// Accounting is what sacct said about a job.
type Accounting struct {
	JobID      string
	Rows       []AcctRow
	Completion bool     // from `sacct -c` (the jobcomp log): one row, no steps, no MaxRSS; codes as scontrol prints them
	Command    []string // the sacct command line
	Raw        []byte
}

// Job is the row of the job itself (not a step), or nil.
func (a *Accounting) Job() *AcctRow {
	if a == nil {
		return nil
	}
	for i := range a.Rows {
		if a.Rows[i].JobID == a.JobID {
			return &a.Rows[i]
		}
	}
	for i := range a.Rows {
		if !strings.Contains(a.Rows[i].JobID, ".") {
			return &a.Rows[i]
		}
	}
	return nil
}

// MaxRSS is the largest MaxRSS over the job's rows (the .batch step only
// measures the launcher when the work runs under srun), and the row it came from.
func (a *Accounting) MaxRSS() (int64, string, bool) {
	if a == nil {
		return 0, "", false
	}
	best, id, ok := int64(-1), "", false
	for _, r := range a.Rows {
		if r.MaxRSS > best {
			best, id, ok = r.MaxRSS, r.JobID, true
		}
	}
	return best, id, ok
}

// OOMSteps lists steps that sacct reports OUT_OF_MEMORY (a step killed by the
// cgroup OOM handler while the job as a whole ended otherwise).
func (a *Accounting) OOMSteps() []string {
	if a == nil {
		return nil
	}
	var out []string
	for _, r := range a.Rows {
		if strings.Contains(r.JobID, ".") && NormState(r.State) == StateOutOfMemory {
			out = append(out, r.JobID)
		}
	}
	return out
}
