// Package systemd holds kcrash's systemd units; its test checks them with
// systemd's own verifier.
package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/internal/testenv"
)

const unit = "kcrash-agent.service"

// buildKcrash builds the kcrash binary the unit starts into dir.
func buildKcrash(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Skip(t, "no go command to build kcrash with: %v", err)
	}
	bin := filepath.Join(dir, "kcrash")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/kcrash/kcrash/cmd/kcrash")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// verify runs systemd-analyze verify on a unit file and returns what it
// said: it exits 0 on unknown keys and unparsable values, which it only
// prints, so any output is a finding.
func verify(t *testing.T, analyze, path string) (string, error) {
	t.Helper()
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// The unit passes systemd-analyze verify without a word, with ExecStart
// pointing at a freshly built kcrash (verify checks that it is there and
// executable); a copy with a bad value does not, so the check can fail.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Skip(t, "systemd-analyze not installed (Debian: systemd): %v", err)
	}
	text, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildKcrash(t, dir)
	if n := strings.Count(string(text), "ExecStart=/usr/bin/kcrash "); n != 1 {
		t.Fatalf("%d ExecStart=/usr/bin/kcrash lines, want 1", n)
	}
	local := strings.Replace(string(text), "ExecStart=/usr/bin/kcrash ", "ExecStart="+bin+" ", 1)
	path := filepath.Join(dir, unit)
	if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(t, analyze, path); err != nil || out != "" {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}

	bad := filepath.Join(t.TempDir(), unit)
	os.WriteFile(bad, []byte(strings.Replace(local, "ProtectSystem=strict", "ProtectSystem=stricter", 1)), 0o644)
	if out, _ := verify(t, analyze, bad); !strings.Contains(out, "stricter") {
		t.Errorf("a bad ProtectSystem value went unnoticed: %q", out)
	}

	t.Run("flags", func(t *testing.T) {
		help, _ := exec.Command(bin, "agent", "--help").CombinedOutput()
		if strings.Contains(string(help), `unknown command "agent"`) {
			testenv.Skip(t, "this kcrash has no agent command yet: %s", strings.TrimSpace(string(help)))
		}
		exec := regexp.MustCompile(`(?m)^ExecStart=\S+ agent (.*)$`).FindStringSubmatch(string(text))
		if exec == nil {
			t.Fatal("no ExecStart=... agent line")
		}
		for _, f := range strings.Fields(exec[1]) {
			if strings.HasPrefix(f, "--") && !strings.Contains(string(help), f) {
				t.Errorf("kcrash agent --help does not know %s:\n%s", f, help)
			}
		}
	})
}
