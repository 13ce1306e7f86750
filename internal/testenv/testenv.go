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

// MutateHostEnv is the variable that lets tests change the host for a
// moment: create users and cgroups, set sysctls, point core_pattern
// elsewhere (each put back, users left). .ci/run sets it; the README's test
// command alone leaves the host as it is.
const MutateHostEnv = "KCRASH_TEST_MUTATE_HOST"

// MutateHost skips (fails under CI) unless the tests may change the host;
// what says what the test changes.
func MutateHost(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(MutateHostEnv) != "1" {
		Skip(t, "%s; set %s=1 to run", what, MutateHostEnv)
	}
	NeedRoot(t, what)
}

// PostgresDSNEnv names the PostgreSQL server the tests may use: a
// postgres:// URL whose role may create schemas in its database.
// scripts/pg-test-server.sh up starts one and prints it; .ci/run exports it.
const PostgresDSNEnv = "KCRASH_TEST_POSTGRES_DSN"

// PostgresDSN returns the test server's DSN, or skips (fails under CI)
// without one; what says what the test needs the server for.
func PostgresDSN(t testing.TB, what string) string {
	t.Helper()
	dsn := os.Getenv(PostgresDSNEnv)
	if dsn == "" {
		Skip(t, "%s needs a PostgreSQL server: set %s (`scripts/pg-test-server.sh up`, as root, starts one and prints it)", what, PostgresDSNEnv)
	}
	return dsn
}
