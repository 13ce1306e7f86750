package merge

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

type finding struct {
	kind, text, role, attribution string
	at                            time.Duration // from t0
	untimed                       bool
}

type spec struct {
	rank     *int
	host     string
	verdict  string
	summary  string
	findings []finding
	end      time.Duration
	signal   string
	code     *int
	noTriage bool
	nameRank string // -r<rank> in the name only
}

func intp(n int) *int { return &n }

// writeBundle writes a real bundle the way the pipeline does.
func writeBundle(t *testing.T, out string, s spec) string {
	t.Helper()
	name := bundle.Name(t0.Add(s.end), s.host, 4242, s.nameRank)
	if s.rank != nil {
		name = bundle.Name(t0.Add(s.end), s.host, 4242, rankStr(s.rank))
	}
	st, err := bundle.NewStage(out, name)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Remove()
	if err := os.WriteFile(filepath.Join(st.Dir, "summary.md"), []byte("# "+s.verdict+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, KcrashVersion: "test", Mode: "run",
		Command: []string{"python3", "train.py"}, StartTime: t0.Add(-time.Hour), EndTime: t0.Add(s.end),
		Exit: bundle.Exit{Code: s.code}, Host: bundle.Host{Hostname: s.host, GPUs: []string{}}, Truncated: []string{}}
	if s.signal != "" {
		sig := s.signal
		m.Exit.Signal = &sig
	}
	if s.rank != nil {
		m.Job = &bundle.Job{Scheduler: "slurm", JobID: "77", Rank: s.rank, Node: s.host}
	}
	if !s.noTriage {
		var fs []map[string]any
		for _, f := range s.findings {
			fj := map[string]any{"kind": f.kind, "source": "log", "text": f.text, "details": map[string]any{"verdict_role": f.role}}
			if !f.untimed {
				fj["time"] = t0.Add(f.at).Format(time.RFC3339Nano)
			}
			if f.attribution != "" {
				fj["attribution"] = f.attribution
			}
			fs = append(fs, fj)
		}
		tri := map[string]any{"verdict": map[string]any{"kind": s.verdict, "confidence": "high", "summary": s.summary},
			"findings": fs, "kernel_api": nil, "next_steps": []string{}}
		m.Triage, _ = json.Marshal(tri)
	}
	res, err := st.Write(m, bundle.WriteOptions{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback != nil {
		t.Fatalf("bundle went to the fallback: %v", res.Fallback)
	}
	return res.Path
}

func rankStr(r *int) string {
	if r == nil {
		return ""
	}
	return rankName(r)
}

// The scenario of issue 5: rank 1 faults at t0, rank 0's NCCL watchdog fires
// 30 s later, and rank 0 is the one that exits first.
func collectiveScenario(t *testing.T, dir string) (rank0, rank1 string) {
	rank1 = writeBundle(t, dir, spec{rank: intp(1), host: "node-b", verdict: "gpu_illegal_memory_access",
		summary: "CUDA error: an illegal memory access was encountered", signal: "SIGABRT", end: 90 * time.Second,
		findings: []finding{
			{kind: "gpu_illegal_memory_access", text: "RuntimeError: CUDA error: an illegal memory access was encountered", role: "root_cause"},
			{kind: "native_crash", text: "Fatal Python error: Aborted", role: "explained", at: 2 * time.Second},
		}})
	rank0 = writeBundle(t, dir, spec{rank: intp(0), host: "node-a", verdict: "collective_timeout",
		summary: "NCCL watchdog: collective timed out", signal: "SIGABRT", end: 31 * time.Second,
		findings: []finding{
			{kind: "collective_timeout", text: "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.", role: "root_cause", at: 30 * time.Second},
			// attributed to something else: must not move rank 0's time
			{kind: "gpu_hardware_error", text: "Xid 79 on another job's GPU", role: "ignored", attribution: "unrelated", at: -time.Hour},
		}})
	return rank0, rank1
}

func TestFirstFailureIsRootCauseNotFirstExit(t *testing.T) {
	dir := t.TempDir()
	rank0, rank1 := collectiveScenario(t, dir)
	r, err := Merge([]string{rank0, rank1})
	if err != nil {
		t.Fatal(err)
	}
	ff := r.FirstFailure
	if ff == nil || ff.Rank == nil || *ff.Rank != 1 || ff.Host != "node-b" || ff.Bundle != rank1 ||
		ff.Verdict != "gpu_illegal_memory_access" || ff.Time == nil || !ff.Time.Equal(t0) {
		t.Fatalf("first failure = %+v, want rank 1 at t0", ff)
	}
	if len(r.Ranks) != 2 {
		t.Fatalf("%d ranks", len(r.Ranks))
	}
	byRank := map[int]*Rank{}
	for _, rk := range r.Ranks {
		byRank[*rk.Rank] = rk
	}
	if r0 := byRank[0]; !r0.Secondary || r0.Verdict != "collective_timeout" || !r0.FirstEvidenceTime.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("rank 0 = %+v, want secondary collective_timeout at t0+30s", r0)
	}
	if r1 := byRank[1]; r1.Secondary || !r1.FirstEvidenceTime.Equal(t0) {
		t.Fatalf("rank 1 = %+v", r1)
	}
	if r.Ranks[0] != byRank[1] {
		t.Fatal("ranks are not in time order")
	}
	line := r.Line()
	for _, want := range []string{"rank 1 on node-b: gpu_illegal_memory_access at 2025-03-04T05:06:07Z", "secondary: rank 0"} {
		if !strings.Contains(line, want) {
			t.Fatalf("line %q lacks %q", line, want)
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"collective_timeout (secondary)", "gpu_illegal_memory_access (first)", "+30s", "Watchdog caught collective operation timeout", "SIGABRT"} {
		if !strings.Contains(table.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, table.String())
		}
	}
	if strings.Contains(table.String(), "Xid 79") {
		t.Fatalf("an unrelated finding is on the timeline:\n%s", table.String())
	}
}

// Even when the symptom is logged before the root cause (clocks, buffering),
// a root cause wins over a symptom.
func TestRootCauseBeatsEarlierSymptom(t *testing.T) {
	dir := t.TempDir()
	writeBundle(t, dir, spec{rank: intp(0), host: "a", verdict: "collective_timeout", signal: "SIGABRT", end: time.Second,
		findings: []finding{{kind: "collective_timeout", text: "Watchdog caught collective operation timeout", role: "root_cause", at: -5 * time.Second}}})
	writeBundle(t, dir, spec{rank: intp(3), host: "b", verdict: "host_oom", signal: "SIGKILL", end: 2 * time.Second,
		findings: []finding{{kind: "host_oom", text: "Out of memory: Killed process 999 (python3)", role: "root_cause"}}})
	r := mustMerge(t, dir)
	if *r.FirstFailure.Rank != 3 {
		t.Fatalf("first failure rank %d, want 3", *r.FirstFailure.Rank)
	}
}

// No root cause anywhere: the earliest evidence is the first failure and the
// later symptoms are secondary to it.
func TestOnlySymptoms(t *testing.T) {
	dir := t.TempDir()
	writeBundle(t, dir, spec{rank: intp(0), host: "a", verdict: "collective_timeout", signal: "SIGABRT", end: time.Minute,
		findings: []finding{{kind: "collective_timeout", text: "timeout", role: "root_cause", at: 20 * time.Second}}})
	writeBundle(t, dir, spec{rank: intp(1), host: "b", verdict: "collective_timeout", signal: "SIGABRT", end: time.Minute,
		findings: []finding{{kind: "collective_timeout", text: "timeout", role: "root_cause", at: 10 * time.Second}}})
	// a python exception that only reports SGLang's sigquit from a child
	writeBundle(t, dir, spec{rank: intp(2), host: "c", verdict: "python_exception", summary: "the parent received SIGQUIT from a child", signal: "SIGKILL", end: time.Minute,
		findings: []finding{{kind: "python_exception", text: "Received sigquit from a child process. It usually means the child failed.", role: "root_cause", at: 15 * time.Second}}})
	// a rank that finished cleanly is neither first nor secondary
	writeBundle(t, dir, spec{rank: intp(3), host: "d", verdict: "clean_exit", code: intp(0), end: 5 * time.Second,
		findings: []finding{{kind: "clean_exit", text: "exit 0", role: "root_cause", at: 5 * time.Second}}})
	r := mustMerge(t, dir)
	if *r.FirstFailure.Rank != 1 {
		t.Fatalf("first failure rank %d, want 1", *r.FirstFailure.Rank)
	}
	sec := map[int]bool{}
	for _, rk := range r.Ranks {
		sec[*rk.Rank] = rk.Secondary
		if *rk.Rank == 3 && rk.FirstEvidenceTime != nil {
			t.Fatalf("clean rank has evidence time %v", rk.FirstEvidenceTime)
		}
	}
	if want := map[int]bool{0: true, 1: false, 2: true, 3: false}; !reflect.DeepEqual(sec, want) {
		t.Fatalf("secondary = %v, want %v", sec, want)
	}
}

// A python exception that is its own failure is a root cause.
func TestPythonExceptionIsRootCause(t *testing.T) {
	dir := t.TempDir()
	writeBundle(t, dir, spec{rank: intp(0), host: "a", verdict: "collective_timeout", signal: "SIGABRT", end: time.Minute,
		findings: []finding{{kind: "collective_timeout", text: "timeout", role: "root_cause", at: 10 * time.Second}}})
	writeBundle(t, dir, spec{rank: intp(1), host: "b", verdict: "python_exception", summary: "KeyError: 'model.layers.3'", code: intp(1), end: time.Minute,
		findings: []finding{{kind: "python_exception", text: "KeyError: 'model.layers.3'", role: "root_cause", at: 20 * time.Second}}})
	r := mustMerge(t, dir)
	if *r.FirstFailure.Rank != 1 || r.FirstFailure.Verdict != "python_exception" {
		t.Fatalf("first failure %+v", r.FirstFailure)
	}
}

// Bundles without a triage, times or a job: rank from the name, verdict
// unknown, time from the exit.
func TestSparseBundles(t *testing.T) {
	dir := t.TempDir()
	p := writeBundle(t, dir, spec{nameRank: "5", host: "e", noTriage: true, end: 3 * time.Second})
	writeBundle(t, dir, spec{host: "f", verdict: "native_crash", signal: "SIGSEGV", end: 4 * time.Second,
		findings: []finding{{kind: "native_crash", text: "Segmentation fault", role: "root_cause", untimed: true}}})
	r := mustMerge(t, dir)
	var five *Rank
	for _, rk := range r.Ranks {
		if rk.Bundle == p {
			five = rk
		}
	}
	if five == nil || five.Rank == nil || *five.Rank != 5 || five.Verdict != "unknown" || !five.FirstEvidenceTime.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("rank 5 = %+v", five)
	}
	if ff := r.FirstFailure; ff.Rank != nil || ff.Verdict != "native_crash" || !ff.Time.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("first failure %+v, want the rankless native crash at its exit", ff)
	}
	if !five.Secondary {
		t.Fatal("the unknown rank is not secondary")
	}
	if !strings.Contains(r.Line(), "rank ? on f: native_crash") {
		t.Fatalf("line %q", r.Line())
	}
}

func TestAllClean(t *testing.T) {
	dir := t.TempDir()
	writeBundle(t, dir, spec{rank: intp(0), host: "a", verdict: "clean_exit", code: intp(0), end: time.Second})
	r := mustMerge(t, dir)
	if r.FirstFailure != nil || r.Ranks[0].Secondary {
		t.Fatalf("%+v", r)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"first_failure":null`) {
		t.Fatalf("json %s", b)
	}
	if r.Line() != "no failure in 1 bundle(s)" {
		t.Fatalf("line %q", r.Line())
	}
}

// The JSON has exactly SPEC §6's keys.
func TestJSONShape(t *testing.T) {
	dir := t.TempDir()
	collectiveScenario(t, dir)
	r := mustMerge(t, dir)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		FirstFailure map[string]json.RawMessage   `json:"first_failure"`
		Ranks        []map[string]json.RawMessage `json:"ranks"`
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if keys(top) != "first_failure ranks" {
		t.Fatalf("top-level keys %q", keys(top))
	}
	json.Unmarshal(b, &v)
	if k := keys(v.FirstFailure); k != "bundle host rank time verdict" {
		t.Fatalf("first_failure keys %q", k)
	}
	for _, rk := range v.Ranks {
		if k := keys(rk); k != "bundle exit first_evidence_time host rank secondary verdict" {
			t.Fatalf("rank keys %q", k)
		}
	}
	if string(v.FirstFailure["time"]) != `"2025-03-04T05:06:07Z"` || string(v.FirstFailure["rank"]) != "1" {
		t.Fatalf("first_failure %s", b)
	}
	if string(v.Ranks[1]["exit"]) != `{"code":null,"signal":"SIGABRT","core_dumped":false}` {
		t.Fatalf("exit %s", v.Ranks[1]["exit"])
	}
}

func keys[V any](m map[string]V) string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return strings.Join(k, " ")
}

func TestPaths(t *testing.T) {
	dir := t.TempDir()
	a := writeBundle(t, filepath.Join(dir, "node-a"), spec{rank: intp(0), host: "a", verdict: "unknown"})
	b := writeBundle(t, filepath.Join(dir, "node-b", "deep"), spec{rank: intp(1), host: "b", verdict: "unknown"})
	os.WriteFile(filepath.Join(dir, "node-a", ".kcrash-partial.tar.gz"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	got, _, err := Paths([]string{dir, a})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []string{a, b}) {
		t.Fatalf("paths %q, want %q", got, []string{a, b})
	}
	if _, _, err := Paths([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no kcrash bundles") {
		t.Fatalf("empty dir: %v", err)
	}
	if _, _, err := Paths([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("a missing path is no error")
	}
}

func TestDamagedBundleSkipped(t *testing.T) {
	dir := t.TempDir()
	good := writeBundle(t, dir, spec{rank: intp(0), host: "a", verdict: "gpu_oom", code: intp(1)})
	bad := filepath.Join(dir, "kcrash-bad.tar.gz")
	os.WriteFile(bad, []byte("not gzip"), 0o644)
	r, err := Merge([]string{good, bad})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Ranks) != 1 || len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Error(), "kcrash-bad.tar.gz") {
		t.Fatalf("ranks %d skipped %v", len(r.Ranks), r.Skipped)
	}
	if _, err := Merge([]string{bad}); err == nil {
		t.Fatal("merging only a damaged bundle succeeded")
	}
}

func mustMerge(t *testing.T, args ...string) *Result {
	t.Helper()
	paths, _, err := Paths(args)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Merge(paths)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRelDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1522422206 * time.Nanosecond:             "1.522s",
		30 * time.Second:                         "30s",
		2*time.Minute + 3004567*time.Microsecond: "2m3.005s",
		420 * time.Microsecond:                   "420µs",
		0:                                        "0s",
	} {
		if got := relDuration(d); got != want {
			t.Errorf("relDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
