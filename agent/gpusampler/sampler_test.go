package gpusampler

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/internal/testenv"
)

// standInSMI writes an nvidia-smi into a fresh directory put alone on PATH:
// --query-gpu prints a captured 2×RTX 3090 table (bus ids 0000:05:00.0 and
// 0000:0b:00.0), --query-compute-apps prints apps. Each call appends a line
// to the returned file.
func standInSMI(t *testing.T, apps string) (calls string) {
	t.Helper()
	dir := t.TempDir()
	look := func(n string) string {
		p, err := exec.LookPath(n)
		if err != nil {
			testenv.Skip(t, "%s not installed: %v", n, err)
		}
		return p
	}
	sh, tail, cat := look("sh"), look("tail"), look("cat")
	appsFile := filepath.Join(dir, "apps.csv")
	if err := os.WriteFile(appsFile, []byte(apps), 0o644); err != nil {
		t.Fatal(err)
	}
	calls = filepath.Join(dir, "calls")
	table := testcorpus.File(t, "7-gpu-tool-output/nvidia-smi-default-table-driver580-2x3090-under-load-PARTIAL.txt")
	script := fmt.Sprintf(`#!%s
echo "$*" >> %q
case "$1" in
--query-compute-apps=*) %s %q ;;
--query-gpu=*) %s -n +4 %q ;;
*) exit 2 ;;
esac
`, sh, calls, cat, appsFile, tail, table)
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	return calls
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// testUser returns the uid and gid of an unprivileged system user, created
// when missing (and left, as the developers' guide says).
func testUser(t *testing.T, name string) (uint32, uint32) {
	t.Helper()
	uid, gid := testenv.User(t, name)
	return uint32(uid), uint32(gid)
}

// sleeper starts a real process as uid:gid and returns its pid.
func sleeper(t *testing.T, uid, gid uint32) int {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// goneProcess returns the pid of a process that has exited and been reaped.
func goneProcess(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func testEnv() *collectors.Env {
	env := collectors.NewEnv()
	env.SysRoot = filepath.Join("..", "..", "collectors", "testdata", "sys", "no-amd")
	return env
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

func start(t *testing.T, s *Sampler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func mib(n uint64) uint64 { return n << 20 }

func sorted(pids ...int) []int { slices.Sort(pids); return pids }

// Two real users' processes on two GPUs: each user is given its own GPU's
// timeline and its own process, never the other's; what is left out is
// counted. A row whose process was gone when sampled has no owner and is
// nobody's but root's.
func TestWindowPerUser(t *testing.T) {
	testenv.NeedRoot(t, "running processes as two unprivileged users")
	uidA, gidA := testUser(t, "kcrash-gpu-a")
	uidB, gidB := testUser(t, "kcrash-gpu-b")
	pidA, pidB, gone := sleeper(t, uidA, gidA), sleeper(t, uidB, gidB), goneProcess(t)
	calls := standInSMI(t, fmt.Sprintf("%d, 00000000:05:00.0, 20000\n%d, 00000000:0B:00.0, 21000\n%d, 00000000:05:00.0, 100\n", pidA, pidB, gone))

	s := New(Config{Interval: 20 * time.Millisecond, MaxSamples: 5, Env: testEnv()})
	start(t, s)
	// count bound: more samples taken (two calls each) than the ring keeps
	waitFor(t, "8 samples taken", func() bool { return countLines(calls) >= 16 })
	if n := s.Stats().Samples; n != 5 {
		t.Fatalf("ring holds %d samples, MaxSamples is 5", n)
	}

	byUID := func(uid uint32) func(pid, uid int) bool {
		return func(_, u int) bool { return u == int(uid) }
	}
	for _, tc := range []struct {
		name     string
		allow    func(pid, uid int) bool
		gpus     []string
		pids     []int
		withheld int
	}{
		{"user a", byUID(uidA), []string{"0000:05:00.0"}, []int{pidA}, 3}, // B's GPU, B's process, the gone one
		{"user b", byUID(uidB), []string{"0000:0b:00.0"}, []int{pidB}, 3},
		{"root", nil, []string{"0000:05:00.0", "0000:0b:00.0"}, sorted(gone, pidA, pidB), 0},
		{"nobody", byUID(4242424), nil, nil, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Window(time.Time{}, time.Time{}, tc.allow)
			if len(r.Samples) < 4 || r.IntervalMS != 20 || len(r.Tools) != 1 || r.Tools[0] != "nvidia-smi" || len(r.Errors) != 0 {
				t.Fatalf("%d samples, interval %d, tools %v, errors %q", len(r.Samples), r.IntervalMS, r.Tools, r.Errors)
			}
			for _, smp := range r.Samples {
				var got []string
				for _, g := range smp.GPUs {
					got = append(got, g.BusID)
					if g.BusID == "0000:05:00.0" && (g.UsedBytes == nil || *g.UsedBytes != mib(22284) || g.Name != "NVIDIA GeForce RTX 3090") {
						t.Errorf("GPU %+v", g)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.gpus) {
					t.Fatalf("sample GPUs %v, want %v", got, tc.gpus)
				}
			}
			var pids []int
			for _, p := range r.Processes {
				pids = append(pids, p.Pid)
				if p.Pid == pidA && (p.GPU != "0000:05:00.0" || *p.UsedBytes != mib(20000) || *p.MaxUsedBytes != mib(20000) ||
					!p.LastSeen.After(p.FirstSeen) || p.Source != "nvidia-smi") {
					t.Errorf("process %+v", p)
				}
			}
			if fmt.Sprint(pids) != fmt.Sprint(tc.pids) {
				t.Errorf("processes %v, want %v", pids, tc.pids)
			}
			if r.Withheld != tc.withheld {
				t.Errorf("withheld %d, want %d", r.Withheld, tc.withheld)
			}
		})
	}

	// the window cuts on sample time
	st := s.Stats()
	if r := s.Window(st.LastSample.Add(time.Nanosecond), time.Time{}, nil); len(r.Samples) != 0 {
		t.Errorf("samples after the last one: %d", len(r.Samples))
	}
	if r := s.Window(st.LastSample, st.LastSample, nil); len(r.Samples) != 1 || !r.Samples[0].Time.Equal(st.LastSample) {
		t.Errorf("the last sample's instant: %+v", r.Samples)
	}
	if time.Duration(st.Interval) != 20*time.Millisecond || time.Since(st.LastSample) > 5*time.Second {
		t.Errorf("stats %+v", st)
	}
}

// The age bound holds whatever the count bound allows.
func TestRingAge(t *testing.T) {
	calls := standInSMI(t, fmt.Sprintf("%d, 00000000:05:00.0, 1\n", os.Getpid()))
	keep := 100 * time.Millisecond
	s := New(Config{Interval: 10 * time.Millisecond, Keep: keep, MaxSamples: 1000, Env: testEnv()})
	start(t, s)
	// two calls per sample: thirty samples span three times Keep
	waitFor(t, "30 samples taken", func() bool { return countLines(calls) >= 60 })
	r := s.Window(time.Time{}, time.Time{}, nil)
	last := r.Samples[len(r.Samples)-1].Time
	for _, smp := range r.Samples {
		if last.Sub(smp.Time) > keep {
			t.Fatalf("sample %s older than Keep before the last %s", smp.Time, last)
		}
	}
	if taken := countLines(calls) / 2; len(r.Samples) >= taken {
		t.Errorf("ring holds %d of %d samples taken: nothing dropped by age", len(r.Samples), taken)
	}
}
