// Package testenv holds the one rule for tests that need something of the
// host (root, cgroup v1, /dev/kmsg, Slurm, a browser, a tool): on a
// developer's machine they skip with the reason; under CI=true they fail,
// because CI must run every test and a silent skip there hides a regression.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the tests run under CI (.ci/run exports CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// Skip skips the test with the reason, or fails it under CI.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("CI=true, so this may not skip: %s", msg)
	}
	t.Skip(msg)
}

// NeedRoot skips (fails under CI) unless the test runs as root; what says
// what root is needed for.
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (euid %d): %s", os.Geteuid(), what)
	}
}
