package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/internal/testlock"
)

// docs/install.md's Containers recipe, and what TestContainerRecipe puts in
// place of the parts of it that name the outside world.
const (
	installDoc = "../../docs/install.md"
	// The FROM lines of the doc's Containerfiles; the test's base image
	// takes their place, and nothing else of the files changes.
	docSGLangFrom = "FROM lmsysorg/sglang:latest"
	docVLLMFrom   = "FROM vllm/vllm-openai:latest"
	// The doc's docker run mounts: the node agent's socket directory and
	// the bundles' volume. The test mounts its own directories on the same
	// container paths.
	docAgentMount   = "-v /run/kcrash:/run/kcrash:ro"
	docBundlesMount = "-v /var/log/kcrash:/kcrash-bundles"
	agentDir        = "/run/kcrash"
	bundlesDir      = "/kcrash-bundles"

	baseImage = "localhost/kcrash-test-base:bookworm"
)

// containerfile returns the Containerfile between the doc's marker comments
// <!-- NAME: ... --> and <!-- end NAME -->.
func containerfile(t *testing.T, doc []byte, name string) string {
	t.Helper()
	re := regexp.MustCompile("(?ms)^<!-- " + regexp.QuoteMeta(name) + ": [^\n]*-->\n```dockerfile\n(.*?)^```\n<!-- end " + regexp.QuoteMeta(name) + " -->$")
	m := re.FindAllSubmatch(doc, -1)
	if len(m) != 1 {
		t.Fatalf("%s: %d Containerfiles marked %q, want 1", installDoc, len(m), name)
	}
	return string(m[0][1])
}

// replaceLine replaces the one line old of file with new.
func replaceLine(t *testing.T, file, old, new string) string {
	t.Helper()
	if n := strings.Count("\n"+file, "\n"+old+"\n"); n != 1 {
		t.Fatalf("%s: the Containerfile has %d lines %q, want 1:\n%s", installDoc, n, old, file)
	}
	return strings.Replace(file, old+"\n", new+"\n", 1)
}

// podman runs podman as root on a storage root of its own (under the test's
// temporary directory), so that the host's images and containers are
// neither seen nor touched, and nothing is left when the test ends. Every
// podman runs in one mount namespace of the test's (held by a sleeping
// process), where /run and /var/lib are empty tmpfs: what podman 4.3 and
// runc write there whatever their flags say (runc's state in /run/runc,
// the image blob cache in /var/lib/containers/cache) goes with it.
type podman struct {
	t   *testing.T
	dir string
	// cgroup is the cgroup parent of the test's containers, removed from
	// every hierarchy at the end.
	cgroup string
	holder *exec.Cmd
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	p := &podman{t: t, dir: t.TempDir(), cgroup: "kcrash-containertest-" + strconv.Itoa(os.Getpid())}
	for _, d := range []string{"root", "run", "tmp", "net"} {
		if err := os.Mkdir(filepath.Join(p.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ready := filepath.Join(p.dir, "ns-ready")
	p.holder = exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
		`mount -t tmpfs kcrash-test /run && mount -t tmpfs kcrash-test /var/lib && : >"$0" && exec sleep infinity`, ready)
	p.holder.Stderr = os.Stderr
	if err := p.holder.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.holder.Wait(); close(done) }()
	t.Cleanup(func() {
		p.removeAll()
		p.holder.Process.Kill()
		<-done
	})
	for {
		if _, err := os.Stat(ready); err == nil {
			return p
		}
		select {
		case <-done:
			t.Fatalf("unshare --mount: %v", p.holder.ProcessState)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (p *podman) cmd(args ...string) *exec.Cmd {
	global := []string{
		"-t", strconv.Itoa(p.holder.Process.Pid), "--mount", "--", "podman",
		"--root", filepath.Join(p.dir, "root"), "--runroot", filepath.Join(p.dir, "run"),
		"--tmpdir", filepath.Join(p.dir, "tmp"), "--network-config-dir", filepath.Join(p.dir, "net"),
		// vfs: no mounts, so a test killed half-way leaves none either.
		"--storage-driver", "vfs",
		// runc: crun 1.8 (Debian 12's) refuses a host with cgroup v1 and
		// v2 both mounted (this CI machine), runc runs on either.
		"--runtime", "runc", "--cgroup-manager", "cgroupfs",
		"--events-backend", "none",
	}
	cmd := exec.Command("nsenter", append(global, args...)...)
	// podman copies images through TMPDIR (/var/tmp otherwise).
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(p.dir, "tmp"))
	return cmd
}

// run runs podman with args and returns its output; a failure fails the test.
func (p *podman) run(args ...string) string {
	p.t.Helper()
	out, err := p.cmd(args...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runFlags are the flags of every podman run of the test: the test's cgroup
// parent; no network (nothing of the recipe needs one); and the open-file
// limit of this process, since podman's default (1048576) needs
// CAP_SYS_RESOURCE, which root lacks on this CI machine (likewise a process
// limit below podman's own).
func (p *podman) runFlags() []string {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		p.t.Fatal(err)
	}
	return []string{"--cgroup-parent", "/" + p.cgroup, "--network", "none",
		"--ulimit", fmt.Sprintf("nofile=%d:%d", lim.Cur, lim.Max), "--ulimit", "nproc=4096:4096"}
}

// removeAll removes the test's containers and images, and its cgroups from
// every hierarchy; the storage itself goes with the test's directory.
func (p *podman) removeAll() {
	t := p.t
	if out, err := p.cmd("rm", "--all", "--force", "--time", "0").CombinedOutput(); err != nil {
		t.Errorf("podman rm --all: %v\n%s", err, out)
	}
	if out, err := p.cmd("rmi", "--all", "--force").CombinedOutput(); err != nil {
		t.Errorf("podman rmi --all: %v\n%s", err, out)
	}
	for _, mnt := range cgroupMounts(t) {
		removeTree(t, filepath.Join(mnt, p.cgroup))
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), p.dir) {
		t.Errorf("mounts left under %s:\n%s", p.dir, mounts)
	}
}

// cgroupMounts are the mount points of the host's cgroup hierarchies (v1
// and v2).
func cgroupMounts(t *testing.T) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 35 0:30 / /sys/fs/cgroup/memory rw,... - cgroup cgroup rw,memory"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if f, g := strings.Fields(pre), strings.Fields(post); ok && len(f) > 4 && len(g) > 0 && strings.HasPrefix(g[0], "cgroup") {
			out = append(out, f[4])
		}
	}
	return out
}

// removeTree removes the cgroup directory d and those below it, deepest
// first (a cgroup's files cannot be removed, only its directory).
func removeTree(t *testing.T, d string) {
	entries, err := os.ReadDir(d)
	if os.IsNotExist(err) {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeTree(t, filepath.Join(d, e.Name()))
		}
	}
	if err := syscall.Rmdir(d); err != nil {
		t.Errorf("cgroup %s left: %v", d, err)
	}
}

// debianBase makes a Debian bookworm root file system with mmdebstrap
// (Essential packages, python3-minimal for the crashing program, mawk for
// the recipe's awk) from Debian's mirror, as a tarball in dir.
func debianBase(dir string) (string, error) {
	tar := filepath.Join(dir, "bookworm.tar")
	cmd := exec.Command("mmdebstrap", "--quiet", "--variant=essential", "--include=python3-minimal,mawk",
		"--dpkgopt=force-unsafe-io", "bookworm", tar, "http://deb.debian.org/debian")
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mmdebstrap: %v\n%s", err, out)
	}
	return tar, nil
}

// startAgent starts the release's kcrash as the node agent on a socket in
// dir/run, and waits until it answers.
func startAgent(t *testing.T, kcrash, dir string) (socketDir string) {
	t.Helper()
	socketDir = filepath.Join(dir, "run")
	sock := filepath.Join(socketDir, "agent.sock")
	cmd := exec.Command(kcrash, "agent", "--socket", sock, "--state", filepath.Join(dir, "state"), "--no-gpu")
	log, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); <-done })
	c := api.New(sock)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Info(ctx)
		cancel()
		if err == nil {
			return socketDir
		}
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
			t.Fatalf("kcrash agent exited: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kcrash agent does not answer at %s: %v", sock, err)
		}
	}
}

// waitFile waits until the container creates path (in a mounted directory).
func waitFile(t *testing.T, p *podman, name, path string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not create %s:\n%s", name, path, p.run("logs", name))
		}
	}
}

// hostPid is the host's pid of the one process whose command line holds
// mark (the container's pid namespace hides it inside).
func hostPid(t *testing.T, mark string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.HasPrefix(string(b), "python3\x00") && strings.Contains(string(b), mark) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("%d python3 processes holding %q: %v", len(pids), mark, pids)
	}
	return pids[0]
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// bundles are the bundles in dir.
func bundles(t *testing.T, dir string) []string {
	t.Helper()
	b, err := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestContainerRecipe tries docs/install.md's Containers recipe as
// written, with podman (no Docker engine and no registry here): the
// Containerfile between the doc's markers is built with only its FROM
// changed, to a Debian made here, its ADD lines fetching a release made by
// scripts/release.sh from a local server and checking its sum. The image
// runs with the doc's mounts (the agent's socket directory, the bundles'
// volume) over a real kcrash agent on the host:
//
//   - a Python process that faults, after a GPU fault record naming its
//     host pid: its bundle is in the host's directory, holds the record
//     read through the agent (the manifest says so), with the verdict
//     root would get; kcrash is the container's PID 1, wrote the verdict
//     to /dev/termination-log, and the container exits as the child did;
//   - podman stop: kcrash, PID 1, forwards SIGTERM; the container exits
//     with SIGTERM's status, no bundle;
//   - the vLLM lines: `podman run IMAGE MODEL --flags` runs `vllm serve
//     MODEL --flags` under kcrash's flashinfer profile.
func TestContainerRecipe(t *testing.T) {
	testenv.MutateHost(t, "installs images and runs containers with podman (its own storage, removed again)")
	for _, tool := range []string{"podman", "runc", "mmdebstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "no %s (Debian: podman, runc, mmdebstrap)", tool)
		}
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("no release binary for %s", runtime.GOARCH)
	}
	doc, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	if run := "docker run --gpus all " + docAgentMount + " " + docBundlesMount + " IMAGE"; !strings.Contains(string(doc), run) {
		t.Fatalf("%s: no line %q: the mounts the test makes are not the doc's", installDoc, run)
	}
	sglang := containerfile(t, doc, "containerfile")
	vllm := containerfile(t, doc, "containerfile-vllm")

	start := time.Now()
	p := newPodman(t)
	work := t.TempDir()
	// The base image is made while the release builds.
	type result struct {
		tar string
		err error
	}
	based := make(chan result, 1)
	go func() { tar, err := debianBase(p.dir + "/tmp"); based <- result{tar, err} }()
	dist := release(t)
	base := <-based
	if base.err != nil {
		t.Fatal(base.err)
	}
	p.run("import", base.tar, baseImage)
	os.Remove(base.tar)
	t.Logf("release and base image ready after %v", time.Since(start).Round(time.Second))

	// The release's assets as a download site serves them.
	mux := http.NewServeMux()
	mux.Handle("/"+testVersion+"/", http.StripPrefix("/"+testVersion+"/", http.FileServer(http.Dir(dist))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	build := func(image, file string) {
		t.Helper()
		ctx := filepath.Join(work, image)
		mkdirs(t, ctx)
		if err := os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		// chroot: RUN lines without an OCI runtime's cgroups (and hence
		// the host's network, which these lines do not use); no layers:
		// one copy of the image in vfs, not one per line.
		p.run("build", "--isolation", "chroot", "--layers=false", "--pull=never",
			"--build-arg", "KCRASH_VERSION="+testVersion, "--build-arg", "KCRASH_RELEASES="+srv.URL,
			"-t", image, ctx)
	}
	const image = "localhost/kcrash-test-sglang"
	build(image, replaceLine(t, sglang, docSGLangFrom, "FROM "+baseImage))
	t.Logf("the recipe's image built after %v", time.Since(start).Round(time.Second))
	if v := p.run(append(append([]string{"run", "--rm"}, p.runFlags()...), "--entrypoint", "/usr/local/bin/kcrash", image, "version")...); !strings.HasPrefix(v, "kcrash "+testVersion+" linux/"+runtime.GOARCH) {
		t.Errorf("the image's kcrash version:\n%s", v)
	}

	agentWork := filepath.Join(work, "agent")
	mkdirs(t, agentWork)
	socketDir := startAgent(t, filepath.Join(dist, "kcrash-linux-"+runtime.GOARCH), agentWork)

	t.Run("crash", func(t *testing.T) {
		w := testlock.Kmsg(t) // its token is in KCRASH_TEST_MARK, passed on by -e
		dir := filepath.Join(work, "crash")
		out, ctl := filepath.Join(dir, "bundles"), filepath.Join(dir, "ctl")
		mkdirs(t, out, ctl)
		termLog := filepath.Join(dir, "termination-log")
		if err := os.WriteFile(termLog, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		const name = "kcrash-test-crash"
		script := `import os, signal, time
print("pid 1:", open("/proc/1/cmdline").read().split("\0")[:3], flush=True)
open("/ctl/ready", "w").close()
while not os.path.exists("/ctl/fault"): time.sleep(0.02)
os.kill(os.getpid(), signal.SIGSEGV)`
		args := append([]string{"run", "-d", "--name", name}, p.runFlags()...)
		args = append(args, "-e", "KCRASH_TEST_MARK",
			"-v", socketDir+":"+agentDir+":ro", "-v", out+":"+bundlesDir,
			"-v", ctl+":/ctl", "-v", termLog+":/dev/termination-log",
			image, "python3", "-c", script)
		p.run(args...)
		waitFile(t, p, name, filepath.Join(ctl, "ready"))
		pid := hostPid(t, "/ctl/fault")
		// The driver's report of a fault (corpus 1-amdgpu-page-fault/
		// gmc9-gfxhub0-no-retry-pt_main_thread.txt, from its process line
		// on), naming the container's process by its host pid as the
		// kernel does.
		w.Write(t, 3, fmt.Sprintf("amdgpu 0000:c6:00.0: amdgpu:  for process python3 pid %d thread python3 pid %d)", pid, pid))
		w.Write(t, 3, "amdgpu 0000:c6:00.0: amdgpu:   in page starting at address 0x0000ae8570611000 from IH client 0x1b (UTCL2)")
		if err := os.WriteFile(filepath.Join(ctl, "fault"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := strings.TrimSpace(p.run("wait", name)); code != "139" {
			t.Errorf("container exit %s, want 139 (SIGSEGV, the child's)", code)
		}
		logs := p.run("logs", name)
		t.Logf("the container's output:\n%s", logs)
		if !strings.Contains(logs, "pid 1: ['/usr/local/bin/kcrash', 'run', '--']") {
			t.Errorf("kcrash is not the container's PID 1:\n%s", logs)
		}
		found := bundles(t, out)
		if len(found) != 1 {
			t.Fatalf("%d bundles in the host's volume %s, want 1", len(found), out)
		}
		b, err := bundle.Open(found[0])
		if err != nil {
			t.Fatal(err)
		}
		var src string
		for _, c := range b.Manifest.Collectors {
			if c.Name == "kmsg" {
				src = c.Source
			}
		}
		if want := "kcrash agent " + agentDir + "/agent.sock"; src != want {
			t.Errorf("manifest: kmsg source %q, want %q", src, want)
		}
		if kmsg, _ := b.File("kmsg.log"); !strings.Contains(string(kmsg), "0x0000ae8570611000") || !strings.Contains(string(kmsg), fmt.Sprintf("pid %d", pid)) {
			t.Errorf("kmsg.log lacks the fault record naming pid %d:\n%s", pid, kmsg)
		}
		var tr struct {
			Verdict struct{ Kind string } `json:"verdict"`
		}
		if err := json.Unmarshal(b.Manifest.Triage, &tr); err != nil || tr.Verdict.Kind != "gpu_page_fault" {
			t.Errorf("verdict %q (%v), want gpu_page_fault", tr.Verdict.Kind, err)
		}
		if e := b.Manifest.Exit; e.Signal == nil || *e.Signal != "SIGSEGV" {
			t.Errorf("manifest exit %+v, want SIGSEGV", e)
		}
		if tl, _ := os.ReadFile(termLog); !strings.Contains(string(tl), "gpu_page_fault") || !strings.Contains(string(tl), filepath.Base(found[0])) {
			t.Errorf("/dev/termination-log: %q, want the verdict and %s", tl, filepath.Base(found[0]))
		}
	})

	t.Run("stop", func(t *testing.T) {
		dir := filepath.Join(work, "stop")
		out, ctl := filepath.Join(dir, "bundles"), filepath.Join(dir, "ctl")
		mkdirs(t, out, ctl)
		const name = "kcrash-test-stop"
		args := append([]string{"run", "-d", "--name", name}, p.runFlags()...)
		args = append(args, "-v", socketDir+":"+agentDir+":ro", "-v", out+":"+bundlesDir, "-v", ctl+":/ctl",
			image, "python3", "-c", `import time; open("/ctl/serving", "w").close(); time.sleep(600)`)
		p.run(args...)
		waitFile(t, p, name, filepath.Join(ctl, "serving"))
		// Far above the time a forwarded SIGTERM takes: a kcrash that did
		// not forward it would be killed at the end (137).
		p.run("stop", "--time", "120", name)
		if code := strings.TrimSpace(p.run("inspect", "--format", "{{.State.ExitCode}}", name)); code != "143" {
			t.Errorf("container exit %s after podman stop, want 143 (SIGTERM, the child's)\n%s", code, p.run("logs", name))
		}
		if found := bundles(t, out); len(found) != 0 {
			t.Errorf("a stop left bundles %v", found)
		}
	})

	t.Run("vllm", func(t *testing.T) {
		// A stand-in vllm in the base image: it prints its arguments.
		ctx := filepath.Join(work, "vllm-base")
		mkdirs(t, ctx)
		os.WriteFile(filepath.Join(ctx, "vllm"), []byte("#!/bin/sh\necho \"vllm $*\"\n"), 0o755)
		os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte("FROM "+baseImage+"\nCOPY vllm /usr/local/bin/vllm\n"), 0o644)
		const vllmBase = "localhost/kcrash-test-vllm-base"
		p.run("build", "--isolation", "chroot", "--layers=false", "--pull=never", "-t", vllmBase, ctx)

		// The doc's vLLM file: its FROM, the SGLang file's lines up to its
		// ENTRYPOINT ("the same ARG, ADD, RUN and ENV lines"), its ENTRYPOINT.
		var entry string
		for _, l := range strings.Split(vllm, "\n") {
			if strings.HasPrefix(l, "ENTRYPOINT ") {
				entry = l
			}
		}
		if !strings.HasPrefix(vllm, docVLLMFrom+"\n") || entry == "" {
			t.Fatalf("%s: the vLLM lines are not %q ... ENTRYPOINT:\n%s", installDoc, docVLLMFrom, vllm)
		}
		same, _, ok := strings.Cut(sglang, "\nENTRYPOINT ")
		if !ok {
			t.Fatalf("%s: no ENTRYPOINT in the SGLang Containerfile", installDoc)
		}
		const vllmImage = "localhost/kcrash-test-vllm"
		build(vllmImage, replaceLine(t, same+"\n", docSGLangFrom, "FROM "+vllmBase)+entry+"\n")
		args := append([]string{"run", "--rm"}, p.runFlags()...)
		got := p.run(append(args, vllmImage, "Qwen/Qwen3-8B", "--port", "8000")...)
		if !strings.Contains(got, "vllm serve Qwen/Qwen3-8B --port 8000\n") || !strings.Contains(got, "profile flashinfer") {
			t.Errorf("podman run IMAGE MODEL --flags:\n%s", got)
		}
	})
}
