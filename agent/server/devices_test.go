package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/access"
	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/agent/kmsgsource"
	"github.com/kcrash/kcrash/internal/testenv"
	"github.com/kcrash/kcrash/internal/testlock"
)

// devicesGroup makes a cgroup v1 devices group of the test's own that
// allows only the character devices allow (and /dev/null, zero, random,
// urandom), and returns its cgroup.procs. It is removed after the test.
func devicesGroup(t *testing.T, allow ...string) (procs string) {
	t.Helper()
	testenv.MutateHost(t, "makes a cgroup v1 devices group")
	mount := ""
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mi)) {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(g) >= 3 && g[0] == "cgroup" && len(f) > 4 && f[3] == "/" &&
			strings.Contains(","+g[2]+",", ",devices,") {
			mount = f[4]
			break
		}
	}
	if mount == "" {
		testenv.Skip(t, "no cgroup v1 devices hierarchy mounted (cgroup v2 alone: device rules are eBPF programs the agent does not read)")
	}
	dir := filepath.Join(mount, fmt.Sprintf("kcrash-test-devices-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.Skip(t, "cannot make a devices cgroup: %v", err)
	}
	t.Cleanup(func() { removeCgroup(t, dir) })
	write := func(file, rule string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(rule), 0); err != nil {
			t.Fatalf("%s %q: %v", file, rule, err)
		}
	}
	write("devices.deny", "a")
	for _, r := range append([]string{"c 1:3 rwm", "c 1:5 rwm", "c 1:8 rwm", "c 1:9 rwm"}, allow...) {
		write("devices.allow", r)
	}
	return filepath.Join(dir, "cgroup.procs")
}

// TestDeviceRulesGiveGPU: a record of a GPU that names no process, read
// from the real /dev/kmsg, goes to a real unprivileged user's process in a
// real cgroup v1 devices group whose rules give it that GPU, though none
// of its processes held the GPU's files; another user's process outside
// the group does not get it. The GPU is a stand-in in a sysfs tree of the
// test (an AMD GPU whose render node has the device number 226:250, which
// no real node of this machine has); the cgroups are the kernel's.
func TestDeviceRulesGiveGPU(t *testing.T) {
	w := testlock.Kmsg(t)
	uidA, gidA := testenv.User(t, userA)
	uidB, gidB := testenv.User(t, userB)
	if _, err := exec.LookPath("setpriv"); err != nil {
		testenv.Skip(t, "needs setpriv (util-linux)")
	}
	const bdf, node = "0000:c6:00.0", "226:250"
	procs := devicesGroup(t, "c "+node+" rw")
	cg := newCgroups(t)
	bin := testBinary(t, worldDir(t))

	sys := t.TempDir()
	pci := filepath.Join(sys, "bus", "pci", "devices", bdf)
	if err := os.MkdirAll(filepath.Join(pci, "drm", "renderD250"), 0o755); err != nil {
		t.Fatal(err)
	}
	for file, body := range map[string]string{"vendor": "0x1002\n", "drm/renderD250/dev": node + "\n"} {
		if err := os.WriteFile(filepath.Join(pci, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The peers' device rules are the real hierarchy's.
	if err := os.MkdirAll(filepath.Join(sys, "fs", "cgroup"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(filepath.Dir(procs)), filepath.Join(sys, "fs", "cgroup", "devices")); err != nil {
		t.Fatal(err)
	}

	boot, err := kmsgsource.ReadBootID()
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(t.TempDir(), journal.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	tr := &access.Tracker{}
	tr.Scan()
	an := &access.Annotator{Tracker: tr, SysRoot: sys, DevRoot: t.TempDir()}
	src := &kmsgsource.Source{Journal: j, Annotate: an.Annotate}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	defer func() { cancel(); <-done }()

	since := time.Now().Add(-time.Second)
	const reset = "amdgpu " + bdf + ": amdgpu: GPU reset begin!"
	w.Write(t, 4, reset)
	sock := startServer(t, &Server{Journal: j, Tracker: tr, BootID: boot, SysRoot: sys, Fresh: src.WaitCaughtUp})

	env := []string{childEnv + "=kmsg", childSince + "=" + since.Format(time.RFC3339Nano), childMark + "=" + w.Token}
	// A: started by root straight into the devices group, then made user A
	// (a user cannot move itself into a root's group).
	fd, _ := cg.group("in-devices")
	inside := exec.Command("sh", "-c", `echo $$ > "$1" && exec setpriv --reuid="$2" --regid="$3" --clear-groups "$4"`,
		"sh", procs, strconv.Itoa(uidA), strconv.Itoa(gidA), bin)
	inside.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	var ra, rb api.KmsgResponse
	runClient(t, inside, sock, uidA, env, &ra)
	client(t, bin, sock, cg, "outside", uidB, gidB, env, &rb)

	want := w.Mark() + reset
	if got := texts(ra.Records); !slices.Contains(got, want) {
		t.Errorf("user A in the devices group: %q withheld %d, want the GPU's record %q", got, ra.Withheld, want)
	}
	if got := texts(rb.Records); slices.Contains(got, want) || rb.Withheld < 1 {
		t.Errorf("user B outside: %q withheld %d, want the GPU's record withheld", got, rb.Withheld)
	}
}
