package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/internal/testenv"
)

// memJournal holds entries in memory: a stand-in for agent/journal's
// segment files, which the server only queries.
type memJournal struct {
	mu      sync.Mutex
	entries []*journal.Entry
}

func (j *memJournal) ScanNewest(ctx context.Context, since, until time.Time, _ bool, _ func(boot, subject string) bool, fn func(e *journal.Entry, rec string, sp *api.RecordSpans) bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range slices.Backward(j.entries) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.Wall.Before(since) || e.Wall.After(until) {
			continue
		}
		if !fn(e, "", nil) {
			break
		}
	}
	return nil
}

func (j *memJournal) Stats() api.JournalStats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := api.JournalStats{Records: int64(len(j.entries))}
	if len(j.entries) > 0 {
		s.Oldest, s.Newest = j.entries[0].Wall, j.entries[len(j.entries)-1].Wall
	}
	return s
}

// The test binary doubles as the client that runs as another user: with
// childEnv set it runs one query against the socket and prints the answer.
const (
	childEnv   = "KCRASH_SERVER_TEST_CHILD"
	childQuery = "KCRASH_SERVER_TEST_QUERY"   // raw mode: path?query
	childHdrs  = "KCRASH_SERVER_TEST_HEADERS" // raw mode: "K: V" lines
	childSince = "KCRASH_SERVER_TEST_SINCE"
	childMark  = "KCRASH_SERVER_TEST_MARK"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if err := runChild(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(mode string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := api.New(api.SocketPath())
	var out any
	switch mode {
	case "info":
		in, err := c.Info(ctx)
		if err != nil {
			return err
		}
		out = in
	case "kmsg":
		since, err := time.Parse(time.RFC3339Nano, os.Getenv(childSince))
		if err != nil {
			return err
		}
		r, err := c.Kmsg(ctx, api.KmsgQuery{Since: since, Mark: os.Getenv(childMark)})
		if err != nil {
			return err
		}
		out = r
	case "gpu":
		r, err := c.GPU(ctx, api.GPUQuery{Since: time.Now().Add(-time.Hour)})
		if err != nil {
			return err
		}
		out = r
	case "raw":
		// A client that makes up its own request: extra parameters and
		// headers claiming another identity.
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", api.SocketPath())
		}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+os.Getenv(childQuery), nil)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(strings.NewReader(os.Getenv(childHdrs)))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
				req.Header.Add(k, v)
			}
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("%s: %s", resp.Status, b)
		}
		_, err = io.Copy(os.Stdout, resp.Body)
		return err
	default:
		return fmt.Errorf("unknown child mode %q", mode)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// worldDir is a t.TempDir() that other users can enter: t.TempDir makes
// its parent 0700.
func worldDir(t *testing.T) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// testBinary copies this test binary where other users can run it.
func testBinary(t *testing.T, dir string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "client.test")
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// cgroups makes cgroup-v2 groups under this process's own, so that each
// test process lives in a cgroup of its own as on a node where jobs do:
// otherwise the cgroup rule would join processes that share the test's.
type cgroups struct {
	t    *testing.T
	dir  string // the test's parent group on disk
	path string // its path as /proc/PID/cgroup names it
}

func newCgroups(t *testing.T) *cgroups {
	testenv.MutateHost(t, "makes cgroups for the test's processes")
	mount := ""
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mi)) {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if ok && strings.HasPrefix(post, "cgroup2 ") && len(f) > 4 && f[3] == "/" {
			mount = f[4]
			break
		}
	}
	if mount == "" {
		testenv.Skip(t, "no cgroup2 hierarchy mounted")
	}
	own := ""
	cg, _ := os.ReadFile("/proc/self/cgroup")
	for line := range strings.Lines(string(cg)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			own = p
		}
	}
	if own == "" {
		testenv.Skip(t, "no cgroup2 path in /proc/self/cgroup")
	}
	name := fmt.Sprintf("kcrash-test-%d", os.Getpid())
	c := &cgroups{t: t, dir: filepath.Join(mount, own, name), path: strings.TrimSuffix(own, "/") + "/" + name}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		testenv.Skip(t, "cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() { removeCgroup(t, c.dir) })
	return c
}

// group makes the child group name and returns a descriptor of it for
// SysProcAttr.CgroupFD, and its path as /proc names it.
func (c *cgroups) group(name string) (fd int, path string) {
	dir := filepath.Join(c.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		c.t.Fatal(err)
	}
	// Cleanups run last-registered first: the group is removed after the
	// processes started in it later were killed and reaped.
	c.t.Cleanup(func() {
		f.Close()
		removeCgroup(c.t, dir)
	})
	return int(f.Fd()), c.path + "/" + name
}

// asUser sets cmd to run as uid:gid in the cgroup fd.
func asUser(cmd *exec.Cmd, uid, gid, cgroupFD int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
		UseCgroupFD: true,
		CgroupFD:    cgroupFD,
	}
}

// removeCgroup removes a test's cgroup once the kernel lets it go.
func removeCgroup(t *testing.T, dir string) {
	if err := testenv.RemoveCgroup(dir); err != nil {
		t.Error(err)
	}
}
