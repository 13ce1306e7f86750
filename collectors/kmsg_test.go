package collectors

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kcrash/kcrash/internal/kmsg"
	"github.com/kcrash/kcrash/internal/testlock"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/kernlog"
)

// kmsgTree is a fixed process tree.
type kmsgTree []evidence.Process

func (t kmsgTree) Processes() []evidence.Process { return t }

// kmsgCorpus returns the kernel lines of a corpus file without its 3 header
// lines and without the timestamps of the original capture.
func kmsgCorpus(t *testing.T, rel string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(testcorpus.Body(t, rel), "\n"), "\n")
	for i, l := range lines {
		lines[i] = kernlog.SplitPrefix(l, i+1, 2024).Text
	}
	return lines
}

// kmsgRequireDevice skips (fails under CI) unless this test was asked to
// write into /dev/kmsg and can, and the collector can read it; it returns
// the test's marked writer.
func kmsgRequireDevice(t *testing.T) *testlock.Writer {
	t.Helper()
	w := testlock.Kmsg(t)
	fd, err := kmsg.Open("/dev/kmsg")
	if err != nil {
		t.Fatalf("/dev/kmsg writable but the collector cannot open it: %v", err)
	}
	fd.Close()
	return w
}

func kmsgFindingsJSON(t *testing.T, dir string) kmsgReport {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "raw", "kmsg-findings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep kmsgReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("raw/kmsg-findings.json: %v", err)
	}
	return rep
}

func newKmsgForTest() *kmsgCollector {
	return registry["kmsg"].factory().(*kmsgCollector)
}

// The real device, end to end: a watcher follows /dev/kmsg while the test
// writes a real amdgpu VM fault block and NVRM Xid lines from the corpus
// into it, with the pid of a real child in the tree; the collector then
// drains the rest and attributes what kernlog finds.
func TestKmsgRealDevice(t *testing.T) {
	w := kmsgRequireDevice(t)
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	pid := child.Process.Pid
	mark := w.Mark()

	w.Write(t, 6, "before the window")
	// A margin, not a wait: the ring stamps records in time since boot,
	// which kcrash turns into wall time; 50 ms keeps the conversion's
	// jitter from moving a record across the window's edge.
	time.Sleep(50 * time.Millisecond)
	env := NewEnv()
	env.Start = time.Now()
	env.Since = env.Start
	env.RootPid = pid
	env.Tree = kmsgTree{{Pid: int32(pid), Name: "sleep", StartTime: env.Start.Add(-time.Second), FirstSeen: env.Start}}
	time.Sleep(50 * time.Millisecond) // the same margin on the window's other side

	c := newKmsgForTest()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Watch(ctx, env); close(done) }()

	// The fewest records that prove the device path: the head of amdgpu's
	// VM fault block (up to the tab-indented client line), the pid swapped
	// for the child's; one Xid naming the child; NVRM's "fallen off the
	// bus", one record of three lines, device-wide. Attribution to other
	// pids and other Xids is tested on recorded input.
	fault := kmsgCorpus(t, "1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt")
	for _, l := range fault[:5] {
		w.Write(t, 3, strings.ReplaceAll(l, "pid 12924", "pid "+strconv.Itoa(pid)))
	}
	xids := kmsgCorpus(t, "3-nvidia-xid/xid13-xid109-pt_main_thread-dmesg-ctime.txt")
	w.Write(t, 4, strings.ReplaceAll(xids[4], "pid=1797828", "pid="+strconv.Itoa(pid)))
	bus := kmsgCorpus(t, "3-nvidia-xid/xid79-multiline-fallen-off-bus-no-xid-number.txt")
	for i := range 3 { // dmesg's indentation of the later lines is not in the record
		bus[i] = strings.TrimLeft(bus[i], " ")
	}
	w.Write(t, 4, strings.Join(bus[:3], "\n"))
	for range 3 {
		w.Write(t, 4, "repeated line")
	}
	last := mark + "last while watching"
	w.Write(t, 6, "last while watching")

	// Wait until the watcher has read everything, so the drain below is
	// tested on what came after it.
	waitFor(t, 5*time.Second, "the watcher read the records", func() bool { return c.seen(last) })
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not return within 2 s of cancel")
	}
	w.Write(t, 6, "after the watcher stopped")

	dir := t.TempDir()
	out := NewOutput(dir)
	if err := c.Collect(context.Background(), env, out); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "kmsg.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	t.Logf("kmsg.log:\n%s", log)
	for _, want := range []string{
		"kcrash: kernel messages from /dev/kmsg, ",
		"user  :err   : " + mark + "amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)\n",
		"user  :err   : " + mark + "amdgpu 0000:c6:00.0: amdgpu: \t Faulty UTCL2 client ID: TCP (0x8)\n", // the tab came back as \x09
		"user  :warn  : " + mark + "repeated line (repeated 3 times)\n",
		"user  :warn  : " + mark + "NVRM: The NVIDIA GPU 0000:b3:00.0\n          ", // continued, indented, as dmesg prints it
		"user  :info  : " + last + "\n",
		"user  :info  : " + mark + "after the watcher stopped\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("kmsg.log lacks %q", want)
		}
	}
	if strings.Contains(log, mark+"before the window") {
		t.Error("kmsg.log holds a record from before the window")
	}
	if n := strings.Count(log, mark+"repeated line"); n != 1 {
		t.Errorf("the repeated line appears %d times, want once with its count", n)
	}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if !strings.HasPrefix(line, "kcrash: ") && !strings.HasPrefix(line, time.Now().UTC().Format("2006-")) && !strings.HasPrefix(line, " ") {
			t.Errorf("line without a time: %q", line)
		}
	}

	byRule := map[string][]evidence.Finding{}
	for _, f := range env.Findings() {
		if f.File != "kmsg.log" || f.Line < 1 || f.Source != evidence.SourceDmesg || f.Time == nil {
			t.Errorf("finding lacks file/line/source/time: %+v", f)
		}
		byRule[f.Attribution] = append(byRule[f.Attribution], f)
	}
	has := func(rule string, match func(evidence.Finding) bool, what string) {
		t.Helper()
		for _, f := range byRule[rule] {
			if match(f) {
				return
			}
		}
		t.Errorf("no %s finding attributed %q; findings: %+v", what, rule, env.Findings())
	}
	has(AttrPidInTree, func(f evidence.Finding) bool { return f.Kind == evidence.GPUPageFault && f.Pid == pid }, "amdgpu page fault of the child")
	has(AttrPidInTree, func(f evidence.Finding) bool { return f.Xid == 109 && f.Pid == pid }, "Xid 109 of the child")
	has(AttrDeviceInWindow, func(f evidence.Finding) bool {
		return f.Kind == evidence.GPUHardwareError && f.GPU == "0000:b3:00.0"
	}, "fallen off the bus, a multi-line record")
	for _, f := range byRule[AttrPidInTree] {
		if f.Pid != pid {
			t.Errorf("pid-in-tree finding of pid %d: %+v", f.Pid, f)
		}
	}

	// Triage reading the bundle later parses kmsg.log itself: it must find
	// the same.
	again, err := kernlog.ParseReader(strings.NewReader(log), env.Start.Year())
	if err != nil || len(again) != len(env.Findings()) {
		t.Errorf("kernlog.ParseReader(kmsg.log) = %d findings (err %v), the collector found %d", len(again), err, len(env.Findings()))
	}

	rep := kmsgFindingsJSON(t, dir)
	for _, f := range rep.Findings {
		t.Logf("finding: %s line %d pid %d gpu %s xid %d: %s %v", f.Attribution, f.Line, f.Pid, f.GPU, f.Xid, f.Kind, f.Details)
	}
	if rep.Source != "/dev/kmsg" || rep.Records < 12 || len(rep.Findings) != len(env.Findings()) || rep.BootTime.IsZero() {
		t.Errorf("raw/kmsg-findings.json: source %q records %d findings %d boot %v", rep.Source, rep.Records, len(rep.Findings), rep.BootTime)
	}
}

// `kcrash collect` runs no watcher: Collect reads the ring itself, from its
// oldest record, and keeps the window.
func TestKmsgCollectWithoutWatcher(t *testing.T) {
	w := kmsgRequireDevice(t)
	w.Write(t, 6, "old")
	time.Sleep(50 * time.Millisecond) // a margin across the window's edge (see TestKmsgRealDevice)
	env := NewEnv()
	env.Since = time.Now()
	time.Sleep(50 * time.Millisecond) // the same margin on the other side
	w.Write(t, 6, "new")

	dir := t.TempDir()
	if err := newKmsgForTest().Collect(context.Background(), env, NewOutput(dir)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "kmsg.log"))
	if !strings.Contains(string(b), w.Mark()+"new\n") || strings.Contains(string(b), w.Mark()+"old") {
		t.Errorf("kmsg.log:\n%s", b)
	}
}

// kmsgScript is a fake tool: a shell script printing out and err, exiting with rc.
func kmsgScript(t *testing.T, name, out, errText string, rc int) string {
	t.Helper()
	dir := t.TempDir()
	data, errData := filepath.Join(dir, name+".out"), filepath.Join(dir, name+".err")
	if err := os.WriteFile(data, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(errData, []byte(errText), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	script := fmt.Sprintf("#!/bin/sh\ncat %q\ncat %q >&2\nexit %d\n", data, errData, rc)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func kmsgSetTools(t *testing.T, tools ...kmsgTool) {
	saved := kmsgTools
	kmsgTools = tools
	t.Cleanup(func() { kmsgTools = saved })
}

func kmsgFixedTool(name string, argv ...string) kmsgTool {
	return kmsgTool{Name: name, Argv: func(time.Time) [][]string { return [][]string{argv} }}
}

// Where /dev/kmsg cannot be opened, dmesg is asked; where dmesg fails too,
// journalctl; each over the same window.
func TestKmsgFallbackToDmesgAndJournalctl(t *testing.T) {
	// The corpus capture in `dmesg --time-format iso` form (the -x prefix removed).
	var iso strings.Builder
	raw := testcorpus.Body(t, "3-nvidia-xid/xid13-burst-then-xid43-pt_main_thread-dmesg-iso.txt")
	// The same lines as journalctl -o short-iso-precise prints them.
	var journal strings.Builder
	for i, l := range strings.Split(strings.TrimRight(raw, "\n"), "\n") {
		l = strings.TrimPrefix(l, "kern  :warn  : ")
		iso.WriteString(l + "\n")
		kl := kernlog.SplitPrefix(l, i+1, 2025)
		if kl.Time == nil {
			t.Fatalf("no time in %q", l)
		}
		fmt.Fprintf(&journal, "%s gpu-node-7 kernel: %s\n", kl.Time.UTC().Format("2006-01-02T15:04:05.000000-0700"), kl.Text)
	}

	for _, tc := range []struct {
		name   string
		tools  []kmsgTool
		source string
	}{
		{"dmesg", []kmsgTool{kmsgFixedTool("dmesg", kmsgScript(t, "dmesg", iso.String(), "", 0))}, "dmesg"},
		{"journalctl", []kmsgTool{
			kmsgFixedTool("dmesg", kmsgScript(t, "dmesg", "", "dmesg: read kernel buffer failed: Operation not permitted\n", 1)),
			kmsgFixedTool("journalctl", kmsgScript(t, "journalctl", journal.String(), "", 0)),
		}, "journalctl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kmsgSetTools(t, tc.tools...)
			env := NewEnv()
			env.DevRoot = t.TempDir() // no kmsg there
			// The window starts after the first two lines of the capture.
			env.Since = time.Date(2025, 1, 21, 4, 41, 44, 283500000, time.UTC)
			env.Tree = kmsgTree{{Pid: 4242}}
			out := t.TempDir()
			if err := newKmsgForTest().Collect(context.Background(), env, NewOutput(out)); err != nil {
				t.Fatalf("Collect: %v", err)
			}
			b, _ := os.ReadFile(filepath.Join(out, "kmsg.log"))
			log := string(b)
			t.Logf("kmsg.log:\n%s", log)
			if !strings.Contains(log, "kcrash: kernel messages from ") || !strings.Contains(log, tc.source) ||
				!strings.Contains(log, "kcrash: fallback: "+env.DevRoot+"/kmsg: no such file or directory") {
				t.Errorf("kmsg.log header does not say where the lines came from and why")
			}
			if strings.Contains(log, "(GPC 8, TPC 5, SM 1)") || strings.Contains(log, "0x546fb0=0x11f000e") {
				t.Errorf("kmsg.log holds the lines before the window")
			}
			if !strings.Contains(log, "2025-01-21T04:41:44.2") || !strings.Contains(log, "Ch 00000008") {
				t.Errorf("kmsg.log lacks the window's lines")
			}
			xid13, xid43 := 0, 0
			for _, f := range env.Findings() {
				switch {
				case f.Xid == 13 && f.Attribution == AttrDeviceInWindow:
					xid13++
				case f.Xid == 43 && f.Pid == 2924364 && f.Attribution == AttrUnrelated:
					xid43++
				}
			}
			if xid13 == 0 || xid43 != 1 {
				t.Errorf("findings: %d Xid 13 device-in-window, %d Xid 43 unrelated; all: %+v", xid13, xid43, env.Findings())
			}
			if rep := kmsgFindingsJSON(t, out); !strings.Contains(rep.Source, tc.source) {
				t.Errorf("raw/kmsg-findings.json source %q", rep.Source)
			}
		})
	}
}

// Where nothing can be read, kmsg.log says why in one line and the Env's
// unseen sources carry the same reason with its fix: never an empty file.
func TestKmsgUnavailable(t *testing.T) {
	kmsgSetTools(t,
		kmsgFixedTool("dmesg", kmsgScript(t, "dmesg", "", "dmesg: read kernel buffer failed: Operation not permitted\n", 1)),
		kmsgFixedTool("journalctl", kmsgScript(t, "journalctl", "", "No journal files were found.\n", 0)),
		kmsgFixedTool("absent", filepath.Join(t.TempDir(), "no-such-tool")),
	)
	env := NewEnv()
	env.DevRoot = t.TempDir()
	// A device that reads as empty is not the ring (containers bind /dev/null there).
	if err := os.Symlink("/dev/null", filepath.Join(env.DevRoot, "kmsg")); err != nil {
		t.Fatal(err)
	}
	env.Since = time.Now().Add(-time.Minute)
	c := newKmsgForTest()
	// The watcher gives up on such a device at once instead of polling it
	// (always readable, always at EOF) in a loop.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	c.Watch(ctx, env)
	if d := time.Since(begin); d > time.Second {
		t.Errorf("Watch on /dev/null returned after %v", d)
	}
	out := t.TempDir()
	err := c.Collect(context.Background(), env, NewOutput(out))
	if err == nil {
		t.Fatal("Collect succeeded with no source")
	}
	b, _ := os.ReadFile(filepath.Join(out, "kmsg.log"))
	want := "kcrash: kernel messages unavailable: " + env.DevRoot + "/kmsg: no records; no kcrash agent: " + agentSocketOf(env) + "; " +
		"dmesg: exit 1: dmesg: read kernel buffer failed: Operation not permitted; " +
		"journalctl: No journal files were found.; absent: "
	if !strings.HasPrefix(string(b), want) || strings.Count(string(b), "\n") != 1 {
		t.Errorf("kmsg.log = %q\nwant prefix %q", b, want)
	}
	// Not evidence: the reason and its fix are the Env's unseen sources.
	if fs := env.Findings(); len(fs) != 0 {
		t.Errorf("findings = %+v, want none", fs)
	}
	us := env.Unseen()
	if len(us) != 1 || us[0].Source != UnseenKmsg || "kcrash: kernel messages unavailable: "+us[0].Why != strings.TrimSpace(string(b)) ||
		!strings.Contains(us[0].Fix, "kcrash agent") || !strings.Contains(us[0].Fix, "CAP_SYSLOG") {
		t.Errorf("unseen = %+v", us)
	}
	if !strings.Contains(err.Error(), "no records") {
		t.Errorf("error = %v", err)
	}
	if rep := kmsgFindingsJSON(t, out); rep.Unavailable == "" {
		t.Error("raw/kmsg-findings.json lacks the reason")
	}
}

// Through the seam as kcrash run uses it: registered by name, watched while
// the run lives, collected under the runner's deadline.
func TestKmsgThroughRunner(t *testing.T) {
	w := kmsgRequireDevice(t)
	cs, err := Select([]string{"kmsg"}, nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Select(kmsg) = %v, %v", cs, err)
	}
	env := NewEnv()
	env.Start = time.Now()
	env.Since = env.Start.Add(-time.Second)
	stop := StartWatchers(context.Background(), env, cs)
	w.Write(t, 3, "during the run")
	kc := cs[0].Collector.(*kmsgCollector)
	waitFor(t, 5*time.Second, "the watcher read the record", func() bool { return kc.seen(w.Mark() + "during the run") })
	begin := time.Now()
	stop(2 * time.Second)
	if d := time.Since(begin); d > time.Second {
		t.Errorf("the watcher took %v to stop", d)
	}
	dir := t.TempDir()
	st := Run(context.Background(), env, cs, dir, 10*time.Second, nil)
	if st[0].Status != bundle.StatusOK || len(st[0].Files) != 2 || st[0].Files[0] != "kmsg.log" || st[0].Files[1] != "raw/kmsg-findings.json" {
		t.Errorf("status %+v", st[0])
	}
	b, _ := os.ReadFile(filepath.Join(dir, "kmsg.log"))
	if !strings.Contains(string(b), "user  :err   : "+w.Mark()+"during the run\n") {
		t.Errorf("kmsg.log:\n%s", b)
	}
}
