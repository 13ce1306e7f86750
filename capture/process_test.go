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
