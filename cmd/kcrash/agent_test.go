package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/internal/testlock"
	"github.com/kcrash/kcrash/kernlog"
)

// agentHost is a shared directory that unprivileged test users can reach
// (t.TempDir is root's alone), with a copy of kcrash they may run.
type agentHost struct {
	dir, bin, sock string
}

func newAgentHost(t *testing.T) *agentHost {
	t.Helper()
	dir, err := os.MkdirTemp("", "kcrash-agent-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &agentHost{dir: dir, bin: filepath.Join(dir, "kcrash"), sock: filepath.Join(dir, "run", "agent.sock")}
	src, err := os.ReadFile(kcrashBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

// userDir is a directory of h owned by uid (a run's --out, its TMPDIR).
func (h *agentHost) userDir(t *testing.T, name string, uid, gid int) string {
	t.Helper()
	d := filepath.Join(h.dir, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, gid); err != nil {
		t.Fatal(err)
	}
	return d
}

// startAgent starts `kcrash agent` as a real root process on h's socket and
// state, and waits until it answers. The returned function kills it (-9
// when kill is true) and waits for it.
func (h *agentHost) startAgent(t *testing.T, extra ...string) (stop func(kill bool) string) {
	t.Helper()
	return h.startAgentEnv(t, nil, extra...)
}

func (h *agentHost) startAgentEnv(t *testing.T, env []string, extra ...string) (stop func(kill bool) string) {
	t.Helper()
	args := append([]string{"agent", "--socket", h.sock, "--state", filepath.Join(h.dir, "state"), "--no-gpu", "-v"}, extra...)
	cmd := exec.Command(h.bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var logb syncBuf
	cmd.Stderr = &logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stopped := false
	stop = func(kill bool) string {
		if !stopped {
			stopped = true
			sig := syscall.SIGTERM
			if kill {
				sig = syscall.SIGKILL
			}
			cmd.Process.Signal(sig)
			<-done
		}
		return logb.String()
	}
	t.Cleanup(func() { stop(false) })
	c := api.New(h.sock)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Info(ctx)
		cancel()
		if err == nil {
			return stop
		}
		select {
		case <-done:
			t.Fatalf("kcrash agent exited: %s", logb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kcrash agent does not answer at %s: %v\n%s", h.sock, err, logb.String())
		}
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// restrictDmesg sets kernel.dmesg_restrict=1, as Debian and Ubuntu ship it,
// for the rest of the test, and puts the old value back.
func restrictDmesg(t *testing.T) {
	t.Helper()
	testenv.MutateHost(t, "sets kernel.dmesg_restrict=1 for a moment")
	const p = "/proc/sys/kernel/dmesg_restrict"
	old, err := os.ReadFile(p)
	if err != nil {
		testenv.Skip(t, "no %s: %v", p, err)
	}
	if err := os.WriteFile(p, []byte("1\n"), 0); err != nil {
		testenv.Skip(t, "cannot set %s: %v", p, err)
	}
	t.Cleanup(func() { os.WriteFile(p, old, 0) })
}

// userRun is a kcrash run started as an unprivileged user whose child waits
// for the file go, then dies of SIGSEGV.
type userRun struct {
	cmd      *exec.Cmd
	out      string
	pidFile  string
	stderr   syncBuf
	childPid int
}

func (h *agentHost) startUserRun(t *testing.T, name string, env []string) *userRun {
	t.Helper()
	uid, gid := testenv.User(t, name)
	r := &userRun{out: h.userDir(t, name+"-out", uid, gid)}
	tmp := h.userDir(t, name+"-tmp", uid, gid)
	r.pidFile = filepath.Join(r.out, "child.pid")
	gofile := filepath.Join(h.dir, "go")
	script := fmt.Sprintf(`echo $$ > %s; while [ ! -e %s ]; do sleep 0.02; done; kill -SEGV $$`, r.pidFile, gofile)
	r.cmd = exec.Command(h.bin, "run", "-q", "--out", r.out, "--collectors", "kmsg,output,processes", "--", "sh", "-c", script)
	r.cmd.Env = append(os.Environ(), append([]string{"TMPDIR=" + tmp, "HOME=" + tmp, api.SocketEnv + "=" + h.sock}, env...)...)
	r.cmd.Dir = h.dir
	r.cmd.Stdout = io.Discard
	r.cmd.Stderr = &r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(r.pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			r.childPid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's run did not start its child: %s", name, r.stderr.String())
		}
	}
}

// TestAgentUnprivilegedJob: with kernel.dmesg_restrict=1, two unprivileged
// users' runs fault on the GPU at the same time. Each bundle holds its own
// fault, read through the node agent (the manifest says so), with the
// verdict root would get, and not the other user's fault; the other's
// records are counted as withheld, never shown.
func TestAgentUnprivilegedJob(t *testing.T) {
	w := testlock.KmsgQuiet(t, 6*time.Second)
	restrictDmesg(t)
	h := newAgentHost(t)
	stopAgent := h.startAgent(t)
	defer func() {
		if t.Failed() {
			t.Logf("agent's log:\n%s", stopAgent(false))
		}
	}()
	mark := []string{kernlog.TestMarkEnv + "=" + w.Token}
	a := h.startUserRun(t, "kcrash-agent-a", mark)
	b := h.startUserRun(t, "kcrash-agent-b", mark)

	// The driver's report of each fault (corpus 1-amdgpu-page-fault/
	// gmc9-gfxhub0-no-retry-pt_main_thread.txt, from its process line on),
	// naming each user's child, written by root as the kernel would.
	fault := func(pid int, addr string) {
		w.Write(t, 3, fmt.Sprintf("amdgpu 0000:c6:00.0: amdgpu:  for process sh pid %d thread sh pid %d)", pid, pid))
		w.Write(t, 3, "amdgpu 0000:c6:00.0: amdgpu:   in page starting at address "+addr+" from IH client 0x1b (UTCL2)")
	}
	fault(a.childPid, "0x0000ae8570611000")
	fault(b.childPid, "0x0000bbbbbbbbb000")
	if err := os.WriteFile(filepath.Join(h.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()
	b.cmd.Wait()

	for _, c := range []struct {
		run           *userRun
		mine, theirs  string
		mypid, herpid int
	}{{a, "0x0000ae8570611000", "0x0000bbbbbbbbb000", a.childPid, b.childPid}, {b, "0x0000bbbbbbbbb000", "0x0000ae8570611000", b.childPid, a.childPid}} {
		bd := oneBundle(t, c.run.out)
		kmsg, _ := bd.File("kmsg.log")
		if !strings.Contains(string(kmsg), c.mine) || !strings.Contains(string(kmsg), fmt.Sprintf("pid %d", c.mypid)) {
			t.Errorf("pid %d's bundle lacks its own fault:\n%s\nrun: %s", c.mypid, kmsg, c.run.stderr.String())
		}
		if strings.Contains(string(kmsg), c.theirs) || strings.Contains(string(kmsg), fmt.Sprintf("pid %d", c.herpid)) {
			t.Errorf("pid %d's bundle shows the other user's fault:\n%s", c.mypid, kmsg)
		}
		if !strings.Contains(string(kmsg), "withheld by the agent") {
			t.Errorf("kmsg.log does not say records were withheld:\n%s", kmsg)
		}
		if src := collectorSource(bd, "kmsg"); !strings.HasPrefix(src, "kcrash agent "+h.sock) {
			t.Errorf("manifest: kmsg source %q, want the agent", src)
		}
		if tr := triageOf(t, bd); tr.Verdict.Kind != evidence.GPUPageFault {
			t.Errorf("verdict %s, want %s (as root would get)", tr.Verdict.Kind, evidence.GPUPageFault)
		}
	}
}

func collectorSource(b *bundle.Bundle, name string) string {
	for _, c := range b.Manifest.Collectors {
		if c.Name == name {
			return c.Source
		}
	}
	return ""
}

// TestAgentRestart: the agent killed (SIGKILL) while records arrive and
// started again neither loses nor repeats one: the records written while it
// was down come from the ring on restart, after its persisted cursor.
func TestAgentRestart(t *testing.T) {
	w := testlock.Kmsg(t)
	h := newAgentHost(t)
	stop := h.startAgent(t)
	begin := time.Now().Add(-time.Second)
	wrote := []string{}
	write := func(n int) {
		for range n {
			line := fmt.Sprintf("kcrash agent restart test record %d", len(wrote))
			w.Write(t, 6, line)
			wrote = append(wrote, line)
		}
	}
	c := api.New(h.sock)
	seen := func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Kmsg(ctx, api.KmsgQuery{Since: begin, Mark: w.Token})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range resp.Records {
			if strings.Contains(r.Text, w.Mark()+"kcrash agent restart test record") {
				got = append(got, strings.TrimPrefix(r.Text, w.Mark()))
			}
		}
		return got
	}
	waitSeen := func(n int) []string {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if got := seen(); len(got) >= n || time.Now().After(deadline) {
				return got
			}
		}
	}
	write(3)
	waitSeen(3)
	stop(true)
	write(3) // while the agent is down
	h.startAgent(t)
	write(2)
	got := waitSeen(len(wrote))
	if strings.Join(got, "\n") != strings.Join(wrote, "\n") {
		t.Fatalf("after a SIGKILL and a restart the agent has\n%s\nwant each record once, in order:\n%s", strings.Join(got, "\n"), strings.Join(wrote, "\n"))
	}
}

// TestAgentNotSeenWithoutIt: with dmesg_restrict=1 and no agent, an
// unprivileged run's bundle says kernel messages could not be read, why,
// and what fixes it, and does not cite kcrash's own error as evidence.
func TestAgentNotSeenWithoutIt(t *testing.T) {
	testenv.NeedRoot(t, "running kcrash as an unprivileged user")
	restrictDmesg(t)
	h := newAgentHost(t)
	r := h.startUserRun(t, "kcrash-agent-a", nil)
	os.WriteFile(filepath.Join(h.dir, "go"), nil, 0o644)
	r.cmd.Wait()
	bd := oneBundle(t, r.out)
	sum, _ := bd.File("summary.md")
	for _, want := range []string{"## Not seen", "**kernel messages**", "start the node agent", "CAP_SYSLOG"} {
		if !strings.Contains(string(sum), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, sum)
		}
	}
	if tr := triageOf(t, bd); tr.Verdict.Kind == "" {
		t.Error("no verdict")
	}
	var tri struct {
		Findings []evidence.Finding `json:"findings"`
	}
	if err := json.Unmarshal(bd.Manifest.Triage, &tri); err != nil {
		t.Fatal(err)
	}
	for _, f := range tri.Findings {
		if strings.Contains(f.Text, "kernel messages unavailable") {
			t.Errorf("kcrash's own error is a finding: %+v", f)
		}
	}
}

// TestAgentDoctor: doctor, as an unprivileged user, says the agent answers
// and what it gives this user.
func TestAgentDoctor(t *testing.T) {
	testenv.NeedRoot(t, "running kcrash as an unprivileged user")
	restrictDmesg(t)
	h := newAgentHost(t)
	h.startAgent(t)
	uid, gid := testenv.User(t, "kcrash-agent-a")
	cmd := exec.Command(h.bin, "doctor")
	cmd.Env = append(os.Environ(), api.SocketEnv+"="+h.sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("doctor as a user: %v\n%s", err, b)
	}
	out := string(b)
	want := fmt.Sprintf("the kcrash agent at %s answers (uid %d)", h.sock, uid)
	if !strings.Contains(out, want) {
		t.Errorf("doctor as a user:\n%s\nwant a kmsg line with %q", out, want)
	}
}

// TestAgentNotifiesSystemd: under systemd's Type=notify the agent says
// READY=1 once its socket answers, and STOPPING=1 on its way out.
func TestAgentNotifiesSystemd(t *testing.T) {
	testenv.NeedRoot(t, "reading the kernel's ring for the agent")
	h := newAgentHost(t)
	ns := filepath.Join(h.dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: ns, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := make(chan string, 4)
	go func() {
		buf := make([]byte, 256)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	stop := h.startAgentEnv(t, []string{"NOTIFY_SOCKET=" + ns})
	select {
	case m := <-got:
		if m != "READY=1" {
			t.Fatalf("first notification %q, want READY=1", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no READY=1 from an agent that answers")
	}
	stop(false)
	select {
	case m := <-got:
		if m != "STOPPING=1" {
			t.Errorf("notification on SIGTERM %q, want STOPPING=1", m)
		}
	case <-time.After(10 * time.Second):
		t.Error("no STOPPING=1 after SIGTERM")
	}
}

// TestSlurmRealOneCrashOneBundle: on the real one-node Slurm, a job's own
// `srun kcrash run` crashes and writes its bundle; the site's epilog, run
// as root, finds that bundle through the node agent (which took the job
// from the run's cgroup), names it in its own bundle's notes, writes a link
// to its bundle next to the user's (with the user's rights), and leaves its
// bundle readable by the job's user and by no other.
func TestSlurmRealOneCrashOneBundle(t *testing.T) {
	realSlurm(t)
	testenv.NeedRoot(t, "the epilog and the agent run as root")
	cfg, _ := exec.Command("scontrol", "show", "config").Output()
	if !bytes.Contains(cfg, []byte("kcrash-test-epilog.sh")) {
		testenv.Skip(t, "the cluster's Epilog is not scripts/slurm-test-cluster.sh's hook")
	}
	h := newAgentHost(t)
	h.startAgent(t)
	juid, jgid := lookupUser(t, jobUser)
	jobDir := h.userDir(t, "job", juid, jgid)
	out := filepath.Join(h.dir, "epilog-bundles")
	prefix := "kcrash-onecrash-"
	installEpilogHook(t, fmt.Sprintf("#!/bin/sh\n[ -d %s ] || exit 0\n"+
		"scontrol show job \"$SLURM_JOB_ID\" -o 2>/dev/null | grep -q ' JobName=%s' || exit 0\n"+
		"%s=%s exec %s collect --slurm-epilog --out %s --epilog-timeout 20s --skip-collectors %s 2>>%s/epilog.err\n",
		h.dir, prefix, api.SocketEnv, h.sock, kcrashBin(t), out, skipInTests, h.dir))

	wrap := fmt.Sprintf("srun env %s=%s %s run -q --out %s/bundles --collectors output,processes -- sh -c 'echo crashing; kill -SEGV $$'",
		api.SocketEnv, h.sock, h.bin, jobDir)
	b, err := exec.Command("runuser", "-u", jobUser, "--", "sbatch", "--parsable", "-J", prefix+"job", "-D", jobDir, "-o", filepath.Join(jobDir, "job.out"), "--wrap", wrap).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch as %s: %v: %s", jobUser, err, b)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(b)), ";")
	t.Cleanup(func() { exec.Command("scancel", id).Run() })
	waitState(t, id, 90*time.Second, cluster.Terminal)
	errs, _ := os.ReadFile(filepath.Join(h.dir, "epilog.err"))
	jobOut, _ := os.ReadFile(filepath.Join(jobDir, "job.out"))

	own, _ := filepath.Glob(filepath.Join(jobDir, "bundles", "kcrash-*.tar.gz"))
	roots, _ := filepath.Glob(filepath.Join(out, "kcrash-*.tar.gz"))
	if len(own) != 1 || len(roots) != 1 {
		t.Fatalf("%d bundles of the job's run, %d of the epilog, want 1 and 1\njob output:\n%s\nepilog:\n%s", len(own), len(roots), jobOut, errs)
	}
	eb, err := bundle.Open(roots[0])
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(eb.Manifest.Notes, "\n"); !strings.Contains(notes, "this job's own bundle, written by its kcrash run (uid "+strconv.Itoa(juid)+"): "+own[0]) {
		t.Errorf("the epilog's bundle does not name the job's own:\n%s\nepilog:\n%s", notes, errs)
	}
	link := own[0] + ".epilog"
	lb, err := os.ReadFile(link)
	if err != nil || !strings.Contains(string(lb), roots[0]) {
		t.Errorf("no link to the epilog's bundle next to the job's own: %v %q\nepilog:\n%s", err, lb, errs)
	}
	if fi, err := os.Stat(link); err == nil && fi.Sys().(*syscall.Stat_t).Uid != uint32(juid) {
		t.Errorf("the link is owned by uid %d, want the job's user %d", fi.Sys().(*syscall.Stat_t).Uid, juid)
	}
	readAs := func(user string) bool {
		return exec.Command("runuser", "-u", user, "--", "cat", roots[0]).Run() == nil
	}
	if !readAs(jobUser) {
		t.Errorf("the job's user cannot read the epilog's bundle of its job\nepilog:\n%s", errs)
	}
	if readAs(otherUser) {
		t.Error("another user reads the epilog's bundle")
	}
}

// TestAgentWritesMetrics: with --textfile-dir the running agent keeps
// kcrash.prom for node_exporter, and a run's bundle is counted in it by
// its verdict.
func TestAgentWritesMetrics(t *testing.T) {
	testenv.NeedRoot(t, "reading the kernel's ring for the agent")
	h := newAgentHost(t)
	textfiles := filepath.Join(h.dir, "textfile")
	os.Mkdir(textfiles, 0o755)
	h.startAgent(t, "--textfile-dir", textfiles)
	out := filepath.Join(h.dir, "out")
	r := runKcrash(t, 60*time.Second, []string{api.SocketEnv + "=" + h.sock}, "run", "-q", "--out", out, "--collectors", "output", "--", "sh", "-c", "kill -SEGV $$")
	if r.code != 139 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	prom := filepath.Join(textfiles, "kcrash.prom")
	var b []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, _ = os.ReadFile(prom)
		if bytes.Contains(b, []byte(`kcrash_crashes_total{verdict="native_crash"} 1`)) {
			break
		}
	}
	for _, want := range []string{`kcrash_crashes_total{verdict="native_crash"} 1`, "# TYPE kcrash_crashes_total counter", "kcrash_agent_journal_records "} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("kcrash.prom lacks %q:\n%s", want, b)
		}
	}
}
