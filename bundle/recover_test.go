package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/procfs"
	"github.com/kcrash/kcrash/internal/redact"
	"github.com/kcrash/kcrash/internal/scratch"
)

// endedProcess is the Owner of a real process that has just ended.
func endedProcess(t *testing.T) scratch.Owner {
	t.Helper()
	cmd := exec.Command("sleep", "0.01")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := processOwner(t, cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	return o
}

// liveProcess is the Owner of a real process that runs until the test ends.
func liveProcess(t *testing.T) scratch.Owner {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return processOwner(t, cmd.Process.Pid)
}

func processOwner(t *testing.T, pid int) scratch.Owner {
	t.Helper()
	o := scratch.Self()
	st, err := (procfs.FS{}).Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	o.Pid, o.StartTicks = pid, st.StartTicks
	return o
}

// deadStage is a stage as a kcrash killed while it collected leaves it: its
// writer's record naming owner, the collectors that finished in the
// journal, their files.
func deadStage(t *testing.T, dir string, owner scratch.Owner, w Writer, done []CollectorStatus, files map[string]string) string {
	t.Helper()
	s, err := mkStage(dir, w.Name)
	if err != nil {
		t.Fatal(err)
	}
	w.Owner = owner
	if err := writeWriter(s.Dir, &w); err != nil {
		t.Fatal(err)
	}
	for _, st := range done {
		if err := s.Done(st); err != nil {
			t.Fatal(err)
		}
	}
	for n, data := range files {
		p := filepath.Join(s.Dir, n)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s.Dir
}

func stagesIn(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, stagePrefix+"*"))
	return m
}

func TestRecoverDeadWritersStage(t *testing.T) {
	out := t.TempDir()
	const secret = "run-only-secret-9f3a1c77" // no token shape: only the writer's prints find it
	writerRedactor := redact.New([]string{"MY_SERVICE_TOKEN=" + secret})
	prints := writerRedactor.Prints()
	code := 139
	sig := "SIGSEGV"
	w := Writer{Name: "kcrash-20261203T120000Z-node1-4242", Mode: "run", Command: []string{"python3", "serve.py"},
		StartTime: time.Now().Add(-time.Minute).UTC(), EndTime: time.Now().UTC(), Exit: Exit{Code: &code, Signal: &sig},
		Collectors: []string{"output", "kernel-api", "kmsg", "gpu", "software"}, Secrets: &prints,
		HostInfo: Host{Hostname: "node1", Kernel: "6.8"}}
	done := []CollectorStatus{
		{Name: "output", Status: StatusOK, Files: []string{"output.log"}},
		{Name: "kmsg", Status: StatusOK, Files: []string{"kmsg.log"}},
		{Name: "kernel-api", Status: StatusSkipped, Error: "no kernel-API log"},
	}
	dead := deadStage(t, out, endedProcess(t), w, done, map[string]string{
		"output.log": "step 41\nconnecting with " + secret + "\nlast words of the child\n",
		"kmsg.log":   "[ 1.0] something\n",
		"gpu.json":   `{"samples": [`, // the GPU collector was cut short
	})
	live := deadStage(t, out, liveProcess(t), w, nil, map[string]string{"output.log": "alive\n"})
	var warn bytes.Buffer
	var gotSummary string
	got, err := Recover(out, RecoverOptions{Environ: []string{}, Warn: &warn,
		Triage: func(dir string, w *Writer) (json.RawMessage, string) {
			b, _ := os.ReadFile(filepath.Join(dir, "output.log"))
			gotSummary = string(b)
			return json.RawMessage(`{"verdict":{"kind":"native_crash"}}`), "# kcrash: python3 serve.py\n\n**Verdict:** native_crash\n"
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Writer.Pid == 0 {
		t.Fatalf("recovered %+v; warnings %q", got, warn.String())
	}
	if !strings.Contains(gotSummary, "last words") {
		t.Errorf("triage saw output %q", gotSummary)
	}
	if _, err := os.Stat(dead); err == nil || len(stagesIn(t, out)) != 1 {
		t.Errorf("stages left: %v (the dead writer's should be gone, the live one's kept)", stagesIn(t, out))
	}
	if _, err := os.Stat(filepath.Join(live, "output.log")); err != nil {
		t.Errorf("the live writer's stage was touched: %v", err)
	}
	if warn.Len() != 0 {
		t.Errorf("warnings: %s", warn.String())
	}
	b, err := Open(got[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(got[0].Path) != w.Name+".tar.gz" {
		t.Errorf("bundle %s, want the writer's name %s", got[0].Path, w.Name)
	}
	m := b.Manifest
	if !m.Incomplete || m.Mode != "run" || m.Exit.Code == nil || *m.Exit.Code != 139 || m.Host.Hostname != "node1" {
		t.Errorf("manifest %+v", m)
	}
	notes := strings.Join(m.Notes, "\n")
	for _, want := range []string{"killed while it collected", "collectors that finished: output, kernel-api, kmsg", "not collected (unfinished when kcrash was killed): gpu, software", "files staged: output.log, kmsg.log, gpu.json"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	st := map[string]CollectorStatus{}
	for _, c := range m.Collectors {
		st[c.Name] = c
	}
	if st["output"].Status != StatusOK || st["kernel-api"].Status != StatusSkipped || st["gpu"].Status != StatusError || !strings.Contains(st["gpu"].Error, "killed") {
		t.Errorf("collectors %+v", m.Collectors)
	}
	if !strings.Contains(string(m.Triage), "native_crash") {
		t.Errorf("triage %s", m.Triage)
	}
	logb, _ := b.File("output.log")
	if !strings.Contains(string(logb), "last words of the child") || strings.Contains(string(logb), secret) || !strings.Contains(string(logb), redact.Mask) {
		t.Errorf("output.log:\n%s", logb)
	}
	sum, _ := b.File("summary.md")
	if !strings.HasPrefix(string(sum), "# kcrash: python3 serve.py\n\n**Incomplete bundle**") {
		t.Errorf("summary.md:\n%s", sum)
	}
	for _, n := range b.Names() {
		if ownFile(n) || strings.Contains(n, ".kcrash-") {
			t.Errorf("the stage's own file %s is in the bundle", n)
		}
	}
}

// A pid now used by another process than the writer: the writer is gone.
func TestRecoverReusedPid(t *testing.T) {
	out := t.TempDir()
	other := liveProcess(t)
	reused := other
	reused.StartTicks-- // the writer had this pid before: it started earlier
	if !reused.Gone() || other.Gone() {
		t.Fatalf("Gone: reused %v, live %v", reused.Gone(), other.Gone())
	}
	deadStage(t, out, reused, Writer{Name: "kcrash-reused", Mode: "run", Collectors: []string{"output"}}, nil, map[string]string{"output.log": "x\n"})
	got, err := Recover(out, RecoverOptions{})
	if err != nil || len(got) != 1 || len(stagesIn(t, out)) != 0 {
		t.Fatalf("recovered %+v, %v; stages left %v", got, err, stagesIn(t, out))
	}
}

// The ranks of a job starting together on one node all look at the
// directory: one bundle per stage.
func TestRecoverConcurrentOneBundle(t *testing.T) {
	out := t.TempDir()
	for i := range 3 {
		deadStage(t, out, endedProcess(t), Writer{Name: fmt.Sprintf("kcrash-rank-%d", i), Mode: "run"}, nil, map[string]string{"output.log": "x\n"})
	}
	// a claim by a recoverer that was killed in turn is taken over
	claimed := deadStage(t, out, endedProcess(t), Writer{Name: "kcrash-claimed", Mode: "run"}, nil, map[string]string{"output.log": "y\n"})
	if err := os.Rename(claimed, claimed+claimSep+endedProcess(t).Tag()); err != nil {
		t.Fatal(err)
	}
	// and a stage without a writer's record (an older kcrash) is left alone
	if err := os.Mkdir(filepath.Join(out, stagePrefix+"old"), 0o700); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []Recovered
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := Recover(out, RecoverOptions{})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			all = append(all, got...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	bundles, _ := filepath.Glob(filepath.Join(out, "kcrash-*.tar.gz"))
	if len(all) != 4 || len(bundles) != 4 {
		t.Errorf("recovered %d, bundles %v", len(all), bundles)
	}
	if left := stagesIn(t, out); len(left) != 1 || filepath.Base(left[0]) != stagePrefix+"old" {
		t.Errorf("stages left: %v", left)
	}
}

// NewStageFor writes its writer's record, and Write leaves it and the
// journal out of the bundle.
func TestStageRecordsWriter(t *testing.T) {
	out := t.TempDir()
	s, err := NewStageFor(out, Writer{Name: "kcrash-x", Mode: "collect", Collectors: []string{"host"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	w, err := readWriter(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if w.Pid != os.Getpid() || w.StartTicks == 0 || w.PidNS == 0 || w.Name != "kcrash-x" || w.Owner.Gone() {
		t.Fatalf("writer %+v", w)
	}
	s.Done(CollectorStatus{Name: "host", Status: StatusOK})
	os.WriteFile(filepath.Join(s.Dir, "output.log"), []byte("x\n"), 0o644)
	if got, _ := Recover(out, RecoverOptions{}); len(got) != 0 {
		t.Fatalf("a live writer's stage recovered: %+v", got)
	}
	res, err := s.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range b.Names() {
		if ownFile(n) {
			t.Errorf("%s in the bundle", n)
		}
	}
}
