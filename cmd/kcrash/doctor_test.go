package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/internal/testenv"
)

// doctorEnv points the collectors at a fixture tree (testdata/doctor/host:
// a readable kmsg, two amdgpu cards, meminfo, core_pattern) or at a root
// that holds nothing.
func doctorEnv(t *testing.T, fixture bool) *collectors.Env {
	t.Helper()
	root := t.TempDir()
	if fixture {
		var err error
		if root, err = filepath.Abs("testdata/doctor/host"); err != nil {
			t.Fatal(err)
		}
	}
	env := collectors.NewEnv()
	env.ProcRoot, env.SysRoot, env.DevRoot = filepath.Join(root, "proc"), filepath.Join(root, "sys"), filepath.Join(root, "dev")
	return env
}

// setCoreLimit sets this process's soft core limit for the test (doctor
// reads it as the limit children inherit).
func setCoreLimit(t *testing.T, cur uint64) bool {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &old); err != nil {
		t.Fatal(err)
	}
	if cur > old.Max {
		return false
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: cur, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_CORE, &old) })
	return true
}

// wholeBuild is a build that lost nothing: doctor adds no line for it.
var wholeBuild = buildFacts{Static: true, StartSignals: true}

func TestDoctorAsksEveryCollector(t *testing.T) {
	bin, err := filepath.Abs("testdata/doctor/bin")
	if err != nil {
		t.Fatal(err)
	}
	stacks, stacksWorks := "not root: wchan and state only, no kernel stacks", "partly"
	if os.Geteuid() == 0 {
		stacks, stacksWorks = "root: kernel stacks of every thread readable", "yes"
	}
	type line struct{ works, why string }
	nothing := line{"yes", "needs nothing from the host"}
	for _, tc := range []struct {
		name    string
		fixture bool
		path    string // PATH: the stand-in tools, or an empty dir
		core    uint64 // soft RLIMIT_CORE
		want    map[string]line
	}{
		{name: "fixture host, tools in PATH", fixture: true, path: bin, core: 0, want: map[string]line{
			"kmsg":       {"yes", "^<dev>/kmsg is readable \\(dmesg_restrict=1\\)$"},
			"gpu":        {"yes", "^2 amdgpu card\\(s\\) in sysfs; tools: <bin>/nvidia-smi$"},
			"memory":     {"yes", "^/proc/meminfo readable; cgroup unknown$"},
			"coredump":   {"partly", "^core_pattern \"core\", ulimit -c 0: children dump no core unless they raise the limit$"},
			"stacks":     {stacksWorks, "^" + regexp.QuoteMeta(stacks) + "; py-spy at <bin>/py-spy$"},
			"host":       nothing,
			"kernel-api": nothing,
			"output":     nothing,
			"processes":  nothing,
		}},
		{name: "empty root, nothing in PATH", fixture: false, path: "", core: 4096, want: map[string]line{
			"kmsg":       {"no", "^<dev>/kmsg: no such file or directory; no kcrash agent at [^;]+; and neither dmesg nor journalctl is installed$"},
			"gpu":        {"no", "^no GPU: no nvidia-smi, rocm-smi or amd-smi in PATH and no amdgpu card with mem_info_vram_total in <sys>/class/drm$"},
			"memory":     {"no", "^no <proc>/meminfo$"},
			"coredump":   {"yes", "^core_pattern \"\", ulimit -c 4$"},
			"stacks":     {stacksWorks, "^" + regexp.QuoteMeta(stacks) + "; no py-spy in PATH \\(Python stacks only from kcrash run's faulthandler hook\\)$"},
			"host":       nothing,
			"kernel-api": nothing,
			"output":     nothing,
			"processes":  nothing,
		}},
		{name: "no kmsg, dmesg in PATH", fixture: false, path: bin, core: 0, want: map[string]line{
			"kmsg": {"partly", "^<dev>/kmsg: no such file or directory; no kcrash agent at [^;]+; falling back to <bin>/dmesg \\(dmesg_restrict=\\)$"},
			"gpu":  {"yes", "^0 amdgpu card\\(s\\) in sysfs; tools: <bin>/nvidia-smi$"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := doctorEnv(t, tc.fixture)
			path := tc.path
			if path == "" {
				path = t.TempDir()
			}
			t.Setenv("PATH", path)
			if !setCoreLimit(t, tc.core) {
				testenv.Skip(t, "the hard core limit is under %d bytes", tc.core)
			}
			var js bytes.Buffer
			if err := doctorRun(&doctorOptions{IO: &streams{Out: &js}, Env: env, JSON: true, Build: wholeBuild}); err != nil {
				t.Fatal(err)
			}
			var checks []collectors.Check
			if err := json.Unmarshal(js.Bytes(), &checks); err != nil {
				t.Fatalf("doctor --json: %v\n%s", err, js.String())
			}
			// One line per registered collector, in name order: a new
			// collector shows up without an edit to doctor.
			var names []string
			for _, c := range checks {
				names = append(names, c.Collector)
			}
			var all []string
			for _, info := range collectors.All() {
				all = append(all, info.Name)
			}
			if strings.Join(names, " ") != strings.Join(all, " ") {
				t.Errorf("doctor lists %v, the registry %v", names, all)
			}
			expand := strings.NewReplacer("<dev>", regexp.QuoteMeta(env.DevRoot), "<sys>", regexp.QuoteMeta(env.SysRoot),
				"<proc>", regexp.QuoteMeta(env.ProcRoot), "<bin>", regexp.QuoteMeta(bin))
			for _, c := range checks {
				w, ok := tc.want[c.Collector]
				if !ok {
					continue
				}
				if string(c.Works) != w.works || !regexp.MustCompile(expand.Replace(w.why)).MatchString(c.Why) {
					t.Errorf("%s: %s %q, want %s %s", c.Collector, c.Works, c.Why, w.works, expand.Replace(w.why))
				}
			}

			var tab bytes.Buffer
			if err := doctorRun(&doctorOptions{IO: &streams{Out: &tab}, Env: env, Build: wholeBuild}); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(tab.String(), "\n"), "\n")
			if !regexp.MustCompile(`^COLLECTOR +WORKS +WHY$`).MatchString(lines[0]) || len(lines) != len(checks)+1 {
				t.Fatalf("table:\n%s", tab.String())
			}
			for i, c := range checks {
				if f := strings.Fields(lines[i+1]); len(f) < 3 || f[0] != c.Collector || f[1] != string(c.Works) || !strings.HasSuffix(lines[i+1], c.Why) {
					t.Errorf("table line %q, want %s %s %s", lines[i+1], c.Collector, c.Works, c.Why)
				}
			}
		})
	}
}
