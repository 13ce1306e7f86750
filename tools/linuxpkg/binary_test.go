package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// buildTiny builds an empty Go program for arch with args, as a stand-in
// binary whose build settings the check reads.
func buildTiny(t *testing.T, arch string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	out := filepath.Join(dir, "tiny")
	cmd := exec.Command(goCmd(t), append(append([]string{"build", "-o", out}, args...), ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func goCmd(t *testing.T) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func TestCheckBinary(t *testing.T) {
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if other == "" {
		t.Skipf("kcrash is released for amd64 and arm64, not %s", runtime.GOARCH)
	}
	tagged := buildTiny(t, runtime.GOARCH, "-tags", "kcrash_startsignals")
	for _, tc := range []struct {
		name, path, arch, err string
	}{
		{"release build", tagged, runtime.GOARCH, ""},
		{"dynamic (the host's /bin/sh)", "/bin/sh", runtime.GOARCH, "dynamically linked"},
		{"no start-signal tag", buildTiny(t, runtime.GOARCH), runtime.GOARCH, `-tags=""`},
		{"the other architecture's binary", buildTiny(t, other, "-tags", "kcrash_startsignals"), runtime.GOARCH, "want " + elfMachines[runtime.GOARCH].String()},
		{"an architecture not released", tagged, "riscv64", "not released"},
		{"not ELF", filepath.Join("scripts", "postinstall.sh"), runtime.GOARCH, "bad magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkBinary(tc.path, tc.arch)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("checkBinary(%s, %s) = %v, want %q", tc.path, tc.arch, err, tc.err)
			}
		})
	}
}
