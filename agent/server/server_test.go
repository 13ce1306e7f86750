package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/access"
	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/internal/procfs"
	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/kernlog"
)

const (
	userA  = "kcrash-agent-a"
	userB  = "kcrash-agent-b"
	bootID = "6c1f4b2e-0000-4000-8000-000000000001"
)

// startServer serves srv on a fresh socket in a world-readable directory
// until the test ends.
func startServer(t *testing.T, srv *Server) string {
	t.Helper()
	sock := filepath.Join(worldDir(t), "agent.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return sock
}

// sleeper starts a sleeping process as uid:gid in its own cgroup.
func sleeper(t *testing.T, cg *cgroups, name string, uid, gid int) int {
	t.Helper()
	fd, _ := cg.group(name)
	cmd := exec.Command("sleep", "300")
	asUser(cmd, uid, gid, fd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := procfs.FS{}.Status(pid)
		if err == nil && st.Name == "sleep" && len(st.Uid) > 0 && st.Uid[0] == uid {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never ran sleep as uid %d", pid, uid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client runs this test binary as uid:gid in its own cgroup, as a client
// of sock, and decodes what it printed into out.
func client(t *testing.T, bin, sock string, cg *cgroups, group string, uid, gid int, env []string, out any) {
	t.Helper()
	fd, _ := cg.group(group)
	cmd := exec.Command(bin)
	asUser(cmd, uid, gid, fd)
	runClient(t, cmd, sock, uid, env, out)
}

// runClient runs the client cmd and decodes what it printed into out.
func runClient(t *testing.T, cmd *exec.Cmd, sock string, uid int, env []string, out any) {
	t.Helper()
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", api.SocketEnv + "=" + sock}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client as uid %d (%v): %v: %s", uid, env, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("client as uid %d: %v: %q", uid, err, stdout.String())
	}
}

func texts(rs []api.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Text)
	}
	return out
}

// TestTwoUsers: two real unprivileged users query a real agent socket.
// Each sees the records naming its own processes and its own test's
// marked records, never the other's; what is held back is counted; a
// client that lies in its request gets nothing more; root sees all.
func TestTwoUsers(t *testing.T) {
	uidA, gidA := testenv.User(t, userA)
	uidB, gidB := testenv.User(t, userB)
	cg := newCgroups(t)
	dir := worldDir(t)
	bin := testBinary(t, dir)

	pidA := sleeper(t, cg, "a", uidA, gidA)
	pidB := sleeper(t, cg, "b", uidB, gidB)
	tr := &access.Tracker{}
	tr.Scan()
	an := &access.Annotator{Tracker: tr, SysRoot: t.TempDir()}

	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	fault := func(pid int) string {
		return fmt.Sprintf("amdgpu 0000:c6:00.0: amdgpu:  for process sleep pid %d thread sleep pid %d)", pid, pid)
	}
	var mem memJournal
	add := func(text string, facility uint8) {
		n := len(mem.entries)
		mono := time.Duration(n+1) * time.Second
		e := &journal.Entry{Boot: bootID, Wall: base.Add(mono), Rec: api.Record{Seq: uint64(n + 1), Mono: mono, Text: text, Facility: facility}}
		var prev *journal.Entry
		if n > 0 {
			prev = mem.entries[n-1]
		}
		an.Annotate(prev, e)
		mem.entries = append(mem.entries, e)
	}
	add(fault(pidA), 0)                                      // 1: A's process
	add(fault(pidB), 0)                                      // 2: B's process
	add(kernlog.TestMark("tokA")+"amdgpu: test record A", 1) // 3: A's test's marked record
	add(kernlog.TestMark("tokB")+"amdgpu: test record B", 1) // 4: B's test's marked record
	add("sched: RT throttling activated", 0)                 // 5: the kernel, naming nobody
	add("systemd[1]: a user-space writer", 3)                // 6: user space
	if p := mem.entries[1].Subject.Procs; len(p) != 1 || p[0].UID != uidB {
		t.Fatalf("B's record's subject: %+v", mem.entries[1].Subject)
	}

	sock := startServer(t, &Server{Journal: &mem, Tracker: tr, BootID: bootID})
	since := base.Format(time.RFC3339Nano)

	var ra, rb api.KmsgResponse
	client(t, bin, sock, cg, "ca", uidA, gidA, []string{childEnv + "=kmsg", childSince + "=" + since, childMark + "=tokA"}, &ra)
	client(t, bin, sock, cg, "cb", uidB, gidB, []string{childEnv + "=kmsg", childSince + "=" + since, childMark + "=tokB"}, &rb)
	wantA := []string{fault(pidA), kernlog.TestMark("tokA") + "amdgpu: test record A", "sched: RT throttling activated"}
	wantB := []string{fault(pidB), kernlog.TestMark("tokB") + "amdgpu: test record B", "sched: RT throttling activated"}
	if got := texts(ra.Records); !slices.Equal(got, wantA) || ra.Withheld != 3 {
		t.Errorf("user A: %q withheld %d\nwant %q withheld 3", got, ra.Withheld, wantA)
	}
	if got := texts(rb.Records); !slices.Equal(got, wantB) || rb.Withheld != 3 {
		t.Errorf("user B: %q withheld %d\nwant %q withheld 3", got, rb.Withheld, wantB)
	}
	if ra.BootID != bootID || !ra.BootTime.Equal(base) {
		t.Errorf("boot %q %v, want %q %v", ra.BootID, ra.BootTime, bootID, base)
	}

	// A claims to be B, or root, in every way a request can.
	q := fmt.Sprintf("%s?since=%s&mark=tokA&uid=%d&pid=%d&user=root&as=0", api.PathKmsg, since, uidB, pidB)
	hdrs := fmt.Sprintf("X-Kcrash-Uid: 0\nX-Kcrash-Pid: %d\nX-Forwarded-User: root\nAuthorization: Bearer root", pidB)
	var lie api.KmsgResponse
	client(t, bin, sock, cg, "ca-lie", uidA, gidA, []string{childEnv + "=raw", childQuery + "=" + q, childHdrs + "=" + hdrs}, &lie)
	if got := texts(lie.Records); !slices.Equal(got, wantA) || lie.Withheld != 3 {
		t.Errorf("lying A: %q withheld %d, want what honest A got", got, lie.Withheld)
	}
	// A asks with B's token: B's test record naming nobody is B's test's
	// business only as far as the token goes; B's process stays B's.
	var tok api.KmsgResponse
	client(t, bin, sock, cg, "ca-tok", uidA, gidA, []string{childEnv + "=kmsg", childSince + "=" + since, childMark + "=tokB"}, &tok)
	for _, r := range tok.Records {
		if strings.Contains(r.Text, fmt.Sprintf("pid %d", pidB)) || r.Text == "systemd[1]: a user-space writer" {
			t.Errorf("A with B's token got %q", r.Text)
		}
	}
	if slices.Contains(texts(tok.Records), wantA[1]) {
		t.Error("A with B's token still got its own test's marked record")
	}

	// Info says who the agent took A for: the client process itself.
	var info api.Info
	client(t, bin, sock, cg, "ca-info", uidA, gidA, []string{childEnv + "=info"}, &info)
	if c := info.Caller; c.UID != uidA || c.GID != gidA || c.Root || c.PID == 0 || !strings.HasSuffix(c.Cgroup, "/ca-info") || c.Sees == "" {
		t.Errorf("A's info: %+v", c)
	}

	// Root sees every record but other tests' marked ones.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rr, err := api.New(sock).Kmsg(ctx, api.KmsgQuery{Since: base, Mark: "tokA"})
	if err != nil {
		t.Fatal(err)
	}
	wantRoot := []string{fault(pidA), fault(pidB), wantA[1], "sched: RT throttling activated", "systemd[1]: a user-space writer"}
	if got := texts(rr.Records); !slices.Equal(got, wantRoot) || rr.Withheld != 1 {
		t.Errorf("root: %q withheld %d\nwant %q withheld 1", got, rr.Withheld, wantRoot)
	}
}

// TestExitedPidStillTheirs: a process recorded while alive and gone before
// the query is still its user's, and still not the other user's.
func TestExitedPidStillTheirs(t *testing.T) {
	uidA, gidA := testenv.User(t, userA)
	uidB, gidB := testenv.User(t, userB)
	cg := newCgroups(t)
	bin := testBinary(t, worldDir(t))
	fd, _ := cg.group("gone")
	cmd := exec.Command("sleep", "300")
	asUser(cmd, uidA, gidA, fd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	tr := &access.Tracker{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		tr.Scan()
		if info, ok := tr.Lookup(pid); ok && info.UID == uidA && info.Comm == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tracker never saw the process as A's")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	tr.Scan()
	an := &access.Annotator{Tracker: tr, SysRoot: t.TempDir()}
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	// The OOM killer's kill line as older kernels print it, without UID:,
	// so that only the tracker's memory knows the owner.
	e := &journal.Entry{Boot: bootID, Wall: base.Add(time.Second), Rec: api.Record{Seq: 1, Mono: time.Second,
		Text: fmt.Sprintf("Out of memory: Killed process %d (sleep) total-vm:8192kB, anon-rss:96kB, file-rss:1536kB, shmem-rss:0kB", pid)}}
	an.Annotate(nil, e)
	if p := e.Subject.Procs; len(p) != 1 || p[0].UID != uidA {
		t.Fatalf("subject of the exited pid: %+v", e.Subject)
	}
	mem := &memJournal{entries: []*journal.Entry{e}}
	sock := startServer(t, &Server{Journal: mem, Tracker: tr, BootID: bootID})
	since := base.Format(time.RFC3339Nano)
	var ra, rb api.KmsgResponse
	client(t, bin, sock, cg, "qa", uidA, gidA, []string{childEnv + "=kmsg", childSince + "=" + since}, &ra)
	client(t, bin, sock, cg, "qb", uidB, gidB, []string{childEnv + "=kmsg", childSince + "=" + since}, &rb)
	if len(ra.Records) != 1 || ra.Withheld != 0 {
		t.Errorf("A: %q withheld %d", texts(ra.Records), ra.Withheld)
	}
	if len(rb.Records) != 0 || rb.Withheld != 1 {
		t.Errorf("B: %q withheld %d", texts(rb.Records), rb.Withheld)
	}
}

// TestListenLiveAndStale: a live agent's socket is never taken over; a dead
// one's is replaced; the socket is 0666.
func TestListenLiveAndStale(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "kcrash", "agent.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Dir(sock)); di.Mode().Perm() != 0o755 {
		t.Errorf("socket directory %v", di.Mode())
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "another agent is listening on "+sock) {
		t.Fatalf("second Listen on a live socket: %v", err)
	}
	// The agent dies without removing its socket (SIGKILL does that).
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatal("the dead agent's socket should still be there")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := api.New(sock).Info(ctx); !errors.Is(err, api.ErrNoAgent) {
		t.Errorf("a dead socket: %v, want ErrNoAgent", err)
	}
	ln2, err := Listen(sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln2.Close()
	if _, err := api.New(filepath.Join(dir, "none.sock")).Info(ctx); !errors.Is(err, api.ErrNoAgent) {
		t.Errorf("no socket: %v, want ErrNoAgent", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(dir, "file")); err == nil {
		t.Error("Listen took over a regular file")
	}
}

// TestCapsAndNotes: an answer keeps the newest records within its caps and
// says what it left out; a window before the journal's start is noted;
// records of another boot are not answered.
func TestCapsAndNotes(t *testing.T) {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	mem := &memJournal{}
	for i := 1; i <= 10; i++ {
		boot := bootID
		if i == 1 {
			boot = "an-earlier-boot"
		}
		mono := time.Duration(i) * time.Second
		mem.entries = append(mem.entries, &journal.Entry{Boot: boot, Wall: base.Add(mono),
			Rec: api.Record{Seq: uint64(i), Mono: mono, Text: fmt.Sprintf("sched: record %d", i)}})
	}
	mem.entries = append(mem.entries, &journal.Entry{Boot: bootID, Wall: base.Add(11 * time.Second), Gap: &journal.GapInfo{From: 11, To: 20, Why: "overwritten"}})
	sock := startServer(t, &Server{Journal: mem, BootID: bootID, MaxRecords: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := api.New(sock).Kmsg(ctx, api.KmsgQuery{Since: base})
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(r.Records); !slices.Equal(got, []string{"sched: record 8", "sched: record 9", "sched: record 10"}) {
		t.Errorf("records %q", got)
	}
	if len(r.Gaps) != 1 || r.Gaps[0] != (api.Gap{From: 11, To: 20}) {
		t.Errorf("gaps %+v", r.Gaps)
	}
	// The answer is read newest first and stops at the cap: what is older
	// than the record it stopped at (record 7) was not looked at.
	notes := strings.Join(r.Notes, "\n")
	if want := "records at or before " + base.Add(7*time.Second).UTC().Format(time.RFC3339Nano) + " were left out"; !strings.Contains(notes, want) {
		t.Errorf("notes %q lack %q", notes, want)
	}
	if strings.Contains(notes, "other boots") || strings.Contains(notes, "oldest record") {
		t.Errorf("notes %q speak of records the capped answer did not read", notes)
	}
	// Uncapped, the whole window is read: the other boot's record and the
	// journal's start are noted.
	sock = startServer(t, &Server{Journal: mem, BootID: bootID})
	r, err = api.New(sock).Kmsg(ctx, api.KmsgQuery{Since: base})
	if err != nil {
		t.Fatal(err)
	}
	notes = strings.Join(r.Notes, "\n")
	for _, want := range []string{"1 records of other boots", "before the journal's oldest record"} {
		if !strings.Contains(notes, want) {
			t.Errorf("uncapped: notes %q lack %q", notes, want)
		}
	}
	if len(r.Records) != 9 || strings.Contains(notes, "left out (the counts") {
		t.Errorf("uncapped: %d records, notes %q", len(r.Records), notes)
	}
	// A byte cap alone also keeps the newest.
	sock = startServer(t, &Server{Journal: mem, BootID: bootID, MaxBytes: 2 * recordSize(api.Record{Text: "sched: record 10"})})
	r, err = api.New(sock).Kmsg(ctx, api.KmsgQuery{Since: base})
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(r.Records); !slices.Equal(got, []string{"sched: record 9", "sched: record 10"}) {
		t.Errorf("byte cap: %q", got)
	}
}

// TestCrashGPUAndBadRequests: crash notices reach the hook, bounded; with no
// sampler the GPU answer says so; malformed windows and wrong methods are
// refused.
func TestCrashGPUAndBadRequests(t *testing.T) {
	var cc struct{ got []api.CrashNotice }
	sock := startServer(t, &Server{Journal: &memJournal{}, Crashes: func(n api.CrashNotice) { cc.got = append(cc.got, n) }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := api.New(sock)
	if err := c.Crash(ctx, api.CrashNotice{Verdict: "gpu_page_fault"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Crash(ctx, api.CrashNotice{Verdict: strings.Repeat("x", 5000)}); err == nil {
		t.Error("a 5 KB crash notice was accepted")
	}
	if len(cc.got) != 1 || cc.got[0].Verdict != "gpu_page_fault" {
		t.Errorf("crash hook got %+v", cc.got)
	}
	g, err := c.GPU(ctx, api.GPUQuery{Since: time.Now().Add(-time.Minute)})
	if err != nil || len(g.Errors) != 1 || len(g.Samples) != 0 {
		t.Errorf("GPU without a sampler: %+v %v", g, err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	for _, c := range []struct {
		method, url string
		code        int
	}{
		{"GET", "http://a" + api.PathKmsg + "?since=yesterday", http.StatusBadRequest},
		{"GET", "http://a" + api.PathKmsg + "?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", http.StatusBadRequest},
		{"POST", "http://a" + api.PathKmsg, http.StatusMethodNotAllowed},
		{"GET", "http://a" + api.PathCrash, http.StatusMethodNotAllowed},
		{"GET", "http://a/v1/nothing", http.StatusNotFound},
	} {
		req, _ := http.NewRequestWithContext(ctx, c.method, c.url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.url, resp.StatusCode, c.code)
		}
	}
}

// TestGuard: the middleware refuses a request without a peer, and a Root
// route to anyone but root.
func TestGuard(t *testing.T) {
	s := &Server{}
	called := 0
	rt := route{http.MethodGet, "/v1/root-only", Root, func(*Server, http.ResponseWriter, *http.Request, access.Peer) { called++ }}
	h := s.guard(rt)
	for _, c := range []struct {
		peer *access.Peer
		code int
	}{
		{nil, http.StatusForbidden},
		{&access.Peer{UID: 1000}, http.StatusForbidden},
		{&access.Peer{UID: 0}, http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodGet, "/v1/root-only", nil)
		if c.peer != nil {
			req = req.WithContext(context.WithValue(req.Context(), peerKey{}, *c.peer))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.code {
			t.Errorf("peer %+v: %d, want %d", c.peer, w.Code, c.code)
		}
	}
	if called != 1 {
		t.Errorf("handler called %d times, want once (root)", called)
	}
}

// TestConnectionsBounded: past MaxConns, a further client waits until a
// connection closes.
func TestConnectionsBounded(t *testing.T) {
	sock := startServer(t, &Server{Journal: &memJournal{}, MaxConns: 1})
	first, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// The first connection holds the only slot once the server accepted it:
	// a request on it is answered.
	fmt.Fprintf(first, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", api.PathInfo)
	buf := make([]byte, 12)
	if _, err := first.Read(buf); err != nil || string(buf) != "HTTP/1.1 200" {
		t.Fatalf("first: %q %v", buf, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = api.New(sock).Info(ctx)
	cancel()
	if err == nil {
		t.Fatal("a second connection was served while the only slot was held")
	}
	first.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := api.New(sock).Info(ctx); err != nil {
		t.Fatalf("after the slot was freed: %v", err)
	}
}

// TestSystemdListener: a socket passed as systemd does (descriptor 3,
// LISTEN_PID naming the process) is served.
func TestSystemdListener(t *testing.T) {
	if os.Getenv("KCRASH_SERVER_TEST_SYSTEMD") == "1" {
		ln, ok := SystemdListener()
		if !ok {
			fmt.Println("no listener")
			os.Exit(3)
		}
		if os.Getenv("LISTEN_FDS") != "" {
			os.Exit(4)
		}
		c, err := ln.Accept()
		if err != nil {
			os.Exit(5)
		}
		c.Write([]byte("from fd 3"))
		c.Close()
		os.Exit(0)
	}
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	exe, _ := os.Executable()
	// systemd sets LISTEN_PID between fork and exec; a shell's exec keeps
	// its pid, so $$ is the test binary's pid.
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" -test.run='^TestSystemdListener$'`, exe)
	cmd.Env = append(os.Environ(), "KCRASH_SERVER_TEST_SYSTEMD=1")
	cmd.ExtraFiles = []*os.File{f}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, 9)
	_, rerr := c.Read(got)
	c.Close()
	werr := cmd.Wait()
	if rerr != nil || string(got) != "from fd 3" || werr != nil {
		t.Fatalf("child: %q %v %v: %s", got, rerr, werr, out.String())
	}
	// Without LISTEN_PID naming this process, there is nothing to take.
	if _, ok := SystemdListener(); ok {
		t.Error("SystemdListener without LISTEN_PID")
	}
}

// fakeGPU keeps processes of a window and hands out those allow accepts,
// as the sampler does; the server decides allow.
type fakeGPU struct {
	procs []api.GPUProcess
	uids  map[int]int
}

func (g *fakeGPU) Window(since, until time.Time, allow func(pid, uid int) bool) api.GPUResponse {
	r := api.GPUResponse{Processes: []api.GPUProcess{}}
	for _, p := range g.procs {
		if allow(p.Pid, g.uids[p.Pid]) {
			r.Processes = append(r.Processes, p)
		} else {
			r.Withheld++
		}
	}
	return r
}

func (g *fakeGPU) Stats() api.GPUStats { return api.GPUStats{Tools: []string{"nvidia-smi"}} }

// TestGPUAllow: a GPU answer holds the caller's processes only; root's all.
func TestGPUAllow(t *testing.T) {
	uidA, gidA := testenv.User(t, userA)
	uidB, gidB := testenv.User(t, userB)
	cg := newCgroups(t)
	bin := testBinary(t, worldDir(t))
	pidA := sleeper(t, cg, "ga", uidA, gidA)
	pidB := sleeper(t, cg, "gb", uidB, gidB)
	g := &fakeGPU{
		procs: []api.GPUProcess{{Pid: pidA, Name: "sleep", GPU: "0000:0a:00.0"}, {Pid: pidB, Name: "sleep", GPU: "0000:0a:00.0"}},
		uids:  map[int]int{pidA: uidA, pidB: uidB},
	}
	tr := &access.Tracker{}
	tr.Scan()
	sock := startServer(t, &Server{Journal: &memJournal{}, GPU: g, Tracker: tr})
	var ra, rb api.GPUResponse
	client(t, bin, sock, cg, "gca", uidA, gidA, []string{childEnv + "=gpu"}, &ra)
	client(t, bin, sock, cg, "gcb", uidB, gidB, []string{childEnv + "=gpu"}, &rb)
	if len(ra.Processes) != 1 || ra.Processes[0].Pid != pidA || ra.Withheld != 1 {
		t.Errorf("A: %+v", ra)
	}
	if len(rb.Processes) != 1 || rb.Processes[0].Pid != pidB || rb.Withheld != 1 {
		t.Errorf("B: %+v", rb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := api.New(sock).GPU(ctx, api.GPUQuery{Since: time.Now().Add(-time.Minute)})
	if err != nil || len(r.Processes) != 2 || r.Withheld != 0 {
		t.Errorf("root: %+v %v", r, err)
	}
}
