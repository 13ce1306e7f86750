package capture

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestAttachOutputOfSeveralLogs(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	os.WriteFile(a, []byte("from a\n"), 0o644)
	os.WriteFile(b, []byte("from b, no newline"), 0o644)
	f := followLogs([]string{a, b}, []string{a, b})
	f.stop()
	want := "==> " + a + " <==\nfrom a\n\n==> " + b + " <==\nfrom b, no newline\n"
	if got := string(f.output()); got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	one := followLogs([]string{a}, []string{a})
	one.stop()
	if got := string(one.output()); got != "from a\n" {
		t.Fatalf("one log: %q, want it as is", got)
	}
	if n := f.notes(); len(n) != 0 {
		t.Fatalf("notes %q", n)
	}
	missing := followLogs([]string{filepath.Join(dir, "none.log")}, []string{"none.log"})
	missing.stop()
	if n := missing.notes(); len(n) != 1 || !strings.Contains(n[0], "none.log: missing at the end, nothing read") {
		t.Fatalf("notes %q", n)
	}
}

func TestAttachKernelAPILogsFromTargetEnv(t *testing.T) {
	tg := &target{cwd: "/srv/run", env: []string{
		"SGLANG_KERNEL_API_LOGDEST=logs/kapi_%i.log", "FLASHINFER_LOGDEST=stderr", "PATH=/bin"}}
	if got, want := tg.kernelAPILogs(), []string{"/srv/run/logs/kapi_*.log"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("kernel-API logs %q, want %q", got, want)
	}
	if tg.getenv("PATH") != "/bin" || tg.getenv("PAT") != "" {
		t.Fatal("getenv")
	}
}

func TestAttachReadTargetSelf(t *testing.T) {
	tg, err := readTarget(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if tg.cwd != wd || len(tg.args) == 0 || tg.start.IsZero() {
		t.Fatalf("%+v", tg)
	}
}

// TestReadTargetFixture reads a target from a fixture proc tree (a real
// process's files): name, argv, environment, identity, kernel-API logs.
func TestReadTargetFixture(t *testing.T) {
	saved := procFS
	defer func() { procFS = saved }()
	procFS.Root = "../internal/procfs/testdata/proc"
	tg, err := readTarget(13820)
	if err != nil {
		t.Fatal(err)
	}
	if tg.name != "py (w) 1) x" || len(tg.args) != 3 || tg.args[0] != "python3" || tg.getenv("HOME") != "/nonexistent" {
		t.Errorf("%+v", tg)
	}
	if tg.who == nil || tg.who.UID != 0 || tg.who.GID != 0 {
		t.Errorf("identity %+v", tg.who)
	}
	if got, want := tg.kernelAPILogs(), []string{"logs/kapi_*.log"}; !reflect.DeepEqual(got, want) {
		t.Errorf("kernel-API logs %q, want %q", got, want)
	}
	if _, err := readTarget(1); err == nil || err.Error() != "no process with pid 1" {
		t.Errorf("a pid not in the tree: %v", err)
	}
}
