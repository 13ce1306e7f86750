package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/bundle/bundletest"
)

// peakRSS runs kcrash and returns its exit status, stderr and peak
// resident memory in bytes. Through GNU time where there is one: a child
// this process starts is a vfork whose maxrss starts at this process's own
// RSS, so without it the figure is an upper bound.
func peakRSS(t *testing.T, args ...string) (int, string, int64) {
	t.Helper()
	return peakRSSOf(t, kcrashBin(t), args...)
}

// peakRSSOf is peakRSS of the kcrash binary bin.
func peakRSSOf(t *testing.T, bin string, args ...string) (int, string, int64) {
	t.Helper()
	var cmd *exec.Cmd
	timeOut := filepath.Join(t.TempDir(), "maxrss")
	gnuTime, err := exec.LookPath("/usr/bin/time")
	if err == nil {
		cmd = exec.Command(gnuTime, append([]string{"-o", timeOut, "-f", "%M", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	cmd.Run()
	code := exitStatus(cmd)
	if gnuTime != "" {
		raw, err := os.ReadFile(timeOut)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		kb, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
		if err != nil {
			t.Fatalf("GNU time wrote %q", raw)
		}
		return code, errb.String(), kb << 10
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage")
	}
	return code, errb.String(), ru.Maxrss << 10
}

// A bundle's memory is bounded whatever its names and its number of
// entries: show, report and diff stay under 64 MiB on floods of long names
// and of entries (refused with one line), and on a bundle at the limits
// (read).
func TestBundleReadersMemoryBounded(t *testing.T) {
	dir := t.TempDir()
	const limit = 64 << 20
	for _, c := range []struct {
		what          string
		n, name, full int
		refused       string // "" when the bundle is read
	}{
		{"long-names", 120, 1<<20 - 4096, 0, "longer than"},
		{"many-entries", 300_000, 200, 0, "entries"},
		{"at-limits", bundle.MaxEntries - 20, bundle.MaxName, 19, ""},
	} {
		p := filepath.Join(dir, c.what+".tar.gz")
		bundletest.Flood(t, p, c.n, c.name, c.full, `{"schema_version":1,"command":["sh"]}`)
		for _, args := range [][]string{
			{"show", "--list", p},
			{"show", "--json", p},
			{"report", p, "-o", filepath.Join(dir, c.what+".html")},
			{"diff", p, p},
		} {
			code, stderr, rss := peakRSS(t, args...)
			t.Logf("%s: kcrash %s: exit %d, peak RSS %.1f MiB", c.what, args[0]+" "+args[1], code, float64(rss)/(1<<20))
			if rss > limit {
				t.Errorf("%s: kcrash %v: peak RSS %d MiB, more than 64 MiB", c.what, args[:2], rss>>20)
			}
			if c.refused != "" {
				if code == 0 || !strings.Contains(stderr, c.refused) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 || len(stderr) > 400 {
					t.Errorf("%s: kcrash %v: exit %d, stderr %.400q; want one line saying %q", c.what, args[:2], code, stderr, c.refused)
				}
			} else if args[0] != "diff" && code != 0 {
				t.Errorf("%s: kcrash %v: exit %d, stderr %.400q", c.what, args[:2], code, stderr)
			}
		}
	}
}

// buildKcrash builds the real kcrash binary (not this test binary, which
// carries the test's own data) for measuring what a user runs.
func buildKcrash(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kcrash")
	cmd := exec.Command("go", "build", "-tags", "kcrash_startsignals", "-ldflags=-checklinkname=0", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// sizedJSON writes head, then items made by item(i) joined by commas until
// about size bytes, then tail: a file as large as a reader may meet.
func sizedJSON(size int, head, tail string, item func(i int) string) []byte {
	var b strings.Builder
	b.Grow(size + 4096)
	b.WriteString(head)
	for i := 0; b.Len() < size-len(tail)-4096; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item(i))
	}
	b.WriteString(tail)
	return []byte(b.String())
}

// heavyBundle writes a bundle every reader accepts whose files are as
// large as they may be: timelines of 59 MiB (gpu.json, memory.json,
// processes.json, raw/kmsg-findings.json), a 8 MiB software.json and a
// 16 MiB manifest full of notes, environment and triage findings. Wide,
// its samples are wide instead of many: 64 GPUs each, 3000 meminfo keys,
// command lines and kernel lines of 1 MiB.
func heavyBundle(t *testing.T, p string, wide bool) {
	t.Helper()
	gpus, keys, long := 8, 2, 100
	if wide {
		gpus, keys, long = 64, 3000, 1<<20
	}
	extra := func(i int) string {
		var b strings.Builder
		for k := range keys {
			fmt.Fprintf(&b, `,"Key%d":%d`, k, i+k)
		}
		return b.String()
	}
	const big = 59 << 20
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(i int) string { return t0.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano) }
	files := []struct {
		name string
		data []byte
	}{
		{"summary.md", []byte("# kcrash: python train.py\n\n**Verdict:** GPU fault.\n\n" + strings.Repeat("- a line of the summary\n", 4000))},
		{"gpu.json", sizedJSON(big, `{"interval_ms":1000,"samples":[`, `],"processes":[{"pid":1,"name":"python","gpu":"0000:17:00.0","used_bytes":1000,"in_tree":true}],"tool_errors":[]}`, func(i int) string {
			var g strings.Builder
			for k := range gpus {
				fmt.Fprintf(&g, `%s{"index":%d,"bus_id":"0000:%02x:00.0","name":"H200","vram_used_bytes":%d,"vram_total_bytes":150000000000}`, map[bool]string{true: ",", false: ""}[k > 0], k, 0x17+k, (i%1000)*100000000+k)
			}
			return fmt.Sprintf(`{"time":%q,"gpus":[%s]}`, at(i), g.String())
		})},
		{"memory.json", sizedJSON(big, `{"interval_ms":1000,"samples":[`, `],"cgroup":{"path":"/x","effective_limit_bytes":100000000000,"oom_kill_delta":1}}`, func(i int) string {
			return fmt.Sprintf(`{"time":%q,"meminfo":{"MemTotal":200000000000,"MemAvailable":%d%s},"tree_rss_bytes":%d,"tree_procs":3,"cgroup_usage_bytes":%d}`, at(i), 100000000000-i, extra(i), i*4096, i*8192)
		})},
		{"processes.json", sizedJSON(big, `{"root_pid":1,"processes":[`, `]}`, func(i int) string {
			return fmt.Sprintf(`{"pid":%d,"ppid":1,"name":"worker-%d","cmdline":["python","-m","worker","--rank","%d","%s"],"start_time":%q,"rss_bytes":%d,"first_seen":%q,"last_seen":%q,"exited":true,"exit_code":0}`, i+1, i, i, strings.Repeat("x", long), at(i), (i*7919)%100000*4096, at(i), at(i+10))
		})},
		{"raw/kmsg-findings.json", sizedJSON(big, `{"source":"/dev/kmsg","findings":[`, `]}`, func(i int) string {
			return fmt.Sprintf(`{"kind":"gpu_xid","source":"kmsg","text":"NVRM: Xid (PCI:0000:17:00): 13, pid=%d %s","time":%q,"xid":13,"pid":%d}`, i, strings.Repeat("y", long), at(i), i)
		})},
		{"software.json", sizedJSON(8<<20, `{"python":[{"executable":"/usr/bin/python3","packages":[`, `]}]}`, func(i int) string {
			return fmt.Sprintf(`{"name":"pkg%d","version":"1.%d","gpu":true,"cuda":"12.4"}`, i, i)
		})},
		{"output.log", []byte(strings.Repeat("a line of output\n", 1<<20))},
	}
	var man strings.Builder
	man.WriteString(`{"schema_version":1,"kcrash_version":"test","mode":"run","command":["python","train.py"],"start_time":"2026-01-02T03:04:05Z","end_time":"2026-01-02T04:04:05Z","exit":{"code":null,"signal":"SIGSEGV","core_dumped":false},"host":{"hostname":"h","kernel":"6","gpus":[]},"job":null,`)
	man.WriteString(`"env":{"profiles":[],"set":{},"kept":{},"user":{`)
	for i := range 40000 {
		if i > 0 {
			man.WriteByte(',')
		}
		fmt.Fprintf(&man, `"VAR_%d":"%s"`, i, strings.Repeat("v", 80))
	}
	man.WriteString(`}},"triage":{"verdict":{"kind":"gpu_fault","confidence":"high","summary":"s"},"findings":[`)
	for i := range 30000 {
		if i > 0 {
			man.WriteByte(',')
		}
		fmt.Fprintf(&man, `{"kind":"gpu_xid","source":"kmsg","text":"Xid %d %s","time":%q,"pid":%d}`, i, strings.Repeat("z", 100), at(i), i+1)
	}
	man.WriteString(`],"next_steps":[]},"collectors":[],"truncated":[],"notes":[`)
	for i := 0; man.Len() < bundle.MaxManifest-200; i++ {
		if i > 0 {
			man.WriteByte(',')
		}
		fmt.Fprintf(&man, `"note %d %s"`, i, strings.Repeat("n", 100))
	}
	man.WriteString(`]}`)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	for _, e := range append(files, struct {
		name string
		data []byte
	}{"manifest.json", []byte(man.String())}) {
		if err := tw.WriteHeader(&tar.Header{Name: "kcrash-heavy/" + e.name, Mode: 0o600, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

// A bundle's memory is bounded whatever its files' contents: on a bundle
// whose timelines, software list and manifest are as large as a reader
// accepts, every reader stays under 64 MiB and still reads it.
func TestBundleReadersMemoryBoundedContents(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 250 MB bundle")
	}
	bin := buildKcrash(t)
	for _, wide := range []bool{false, true} {
		readHeavy(t, bin, wide)
	}
}

func readHeavy(t *testing.T, bin string, wide bool) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kcrash-heavy.tar.gz")
	heavyBundle(t, p, wide)
	const limit = 64 << 20
	for _, args := range [][]string{
		{"report", p, "-o", filepath.Join(dir, "heavy.html")},
		{"show", p},
		{"show", "--json", p},
		{"merge", "--json", p, p},
		{"diff", p, p},
	} {
		code, stderr, rss := peakRSSOf(t, bin, args...)
		t.Logf("wide=%v: kcrash %s: exit %d, peak RSS %.1f MiB", wide, strings.Join(args[:2], " "), code, float64(rss)/(1<<20))
		if rss > limit {
			// On a loaded machine (CI runs packages side by side) the
			// collector and the scavenger lag and one run's peak can be
			// 10 MiB above its idle figure: a second run tells such a spike
			// from a reader that really holds more.
			code, stderr, rss = peakRSSOf(t, bin, args...)
			t.Logf("wide=%v: kcrash %s again: exit %d, peak RSS %.1f MiB", wide, strings.Join(args[:2], " "), code, float64(rss)/(1<<20))
		}
		if rss > limit {
			t.Errorf("kcrash %v: peak RSS %d MiB, more than 64 MiB", args[:2], rss>>20)
		}
		if args[0] != "diff" && code != 0 {
			t.Errorf("kcrash %v: exit %d, stderr %.400q", args[:2], code, stderr)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "heavy.html"))
	if err != nil {
		t.Fatal(err)
	}
	// reduced, and saying so; the spike and the run's root still drawn
	for _, want := range []string{"points drawn", "processes shown", "pid 1 "} {
		if wide && want == "processes shown" { // 59 of them, all kept
			continue
		}
		if !strings.Contains(string(page), want) {
			t.Errorf("report.html does not say %q", want)
		}
	}
}
