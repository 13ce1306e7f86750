package collectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/internal/testenv"
)

// gpuTestCorpusFile is the path of one GPU-tool corpus file.
func gpuTestCorpusFile(t testing.TB, name string) string {
	t.Helper()
	return testcorpus.File(t, "7-gpu-tool-output/"+name)
}

// gpuTestCorpus is a corpus file without its 3 header lines (source:,
// expect:, blank), as `tail -n +4` prints it.
func gpuTestCorpus(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfterN(string(b), "\n", 4)
	if len(lines) < 4 {
		t.Fatalf("%s: fewer than 4 lines", path)
	}
	return []byte(lines[3])
}

type gpuTestTree []evidence.Process

func (g gpuTestTree) Processes() []evidence.Process { return g }

func gpuMiB(n uint64) *uint64 { v := n << 20; return &v }

func gpuEqPtr(a, b *uint64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func gpuFmtPtr(p *uint64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatUint(*p, 10)
}

type gpuWant struct {
	index       int
	bus, name   string
	used, total *uint64
}

func gpuCheck(t *testing.T, got []GPUMem, want []gpuWant) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d GPUs, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Index != w.index || (w.bus != "" && g.BusID != w.bus) || (w.name != "" && g.Name != w.name) ||
			!gpuEqPtr(g.UsedBytes, w.used) || !gpuEqPtr(g.TotalBytes, w.total) {
			t.Errorf("GPU %d: got index=%d bus=%q name=%q used=%s total=%s; want index=%d bus=%q name=%q used=%s total=%s",
				i, g.Index, g.BusID, g.Name, gpuFmtPtr(g.UsedBytes), gpuFmtPtr(g.TotalBytes),
				w.index, w.bus, w.name, gpuFmtPtr(w.used), gpuFmtPtr(w.total))
		}
	}
}

// Every nvidia-smi layout in the corpus, read by the one entry point.
func TestGPUParseNvidiaCorpus(t *testing.T) {
	a100 := []uint64{66147, 77105, 50803, 57421, 76651, 0, 6313, 6247}
	var a100Want []gpuWant
	for i, u := range a100 {
		a100Want = append(a100Want, gpuWant{index: i, name: "NVIDIA A100-SXM4-80GB", used: gpuMiB(u), total: gpuMiB(81920)})
	}
	cases := []struct {
		file     string
		want     []gpuWant
		problems bool
	}{
		{"nvidia-smi-query-gpu-csv-8x-a100-80gb.txt", a100Want, false},
		{"nvidia-smi-query-gpu-csv-gb10-unified-memory-NA.txt", []gpuWant{{index: 0}}, false},
		{"nvidia-smi-query-gpu-csv-hami-vgpu-capped-indented.txt", []gpuWant{
			{index: 0, name: "Quadro M4000", used: gpuMiB(963), total: gpuMiB(3000)},
			{index: 1, name: "Tesla P4", used: gpuMiB(1090), total: gpuMiB(3000)}}, false},
		{"nvidia-smi-query-gpu-csv-mixed-rtx4090-1080ti-then-ollama-ps.txt", []gpuWant{
			{index: 0, name: "NVIDIA GeForce RTX 4090", used: gpuMiB(22995), total: gpuMiB(24564)},
			{index: 1, name: "NVIDIA GeForce GTX 1080 Ti", used: gpuMiB(8), total: gpuMiB(11264)}}, false},
		{"nvidia-smi-default-table-driver580-2x3090-under-load-PARTIAL.txt", []gpuWant{
			{index: 0, bus: "0000:05:00.0", name: "NVIDIA GeForce RTX 3090", used: gpuMiB(22284), total: gpuMiB(24576)},
			{index: 1, bus: "0000:0b:00.0", name: "NVIDIA GeForce RTX 3090", used: gpuMiB(22292), total: gpuMiB(24576)}}, false},
		{"nvidia-smi-default-table-driver610-kmd-umd-header-2x3090-PARTIAL.txt", []gpuWant{
			{index: 0, bus: "0000:04:00.0", used: gpuMiB(21865), total: gpuMiB(24576)},
			{index: 1, bus: "0000:09:00.0", used: gpuMiB(21487), total: gpuMiB(24576)}}, false},
		{"nvidia-smi-default-table-gb10-memory-not-supported.txt", []gpuWant{{index: 0, bus: "000f:01:00.0", name: "NVIDIA GB10"}}, false},
		{"nvidia-smi-default-table-p100-x4-driver515-PARTIAL.txt", []gpuWant{
			{index: 0, bus: "0000:04:00.0", name: "Tesla P100-PCIE...", used: gpuMiB(0), total: gpuMiB(16384)}}, false},
		{"nvidia-smi-mig-devices-table-PARTIAL.txt", []gpuWant{
			{index: 1, used: gpuMiB(14366), total: gpuMiB(19968)},
			{index: 1, used: gpuMiB(9880), total: gpuMiB(19968)},
			{index: 1, used: gpuMiB(13), total: gpuMiB(19968)}}, false},
		{"nvidia-smi-q-ecc-remapped-rows-pending-a100.txt", []gpuWant{{index: 0, bus: "0000:10:1c.0", name: "NVIDIA A100-SXM4-80GB"}}, false},
		{"nvidia-smi-q-ecc-sram-uncorrectable-block.txt", nil, true},
		{"nvidia-smi-q-fb-bar1-memory-driver375.txt", []gpuWant{{index: 0, bus: "0000:01:00.0", used: gpuMiB(1934), total: gpuMiB(1995)}}, false},
		{"nvidia-smi-q-fb-memory-with-reserved-driver560-PARTIAL.txt", []gpuWant{{index: 0, bus: "0000:01:00.0", used: gpuMiB(659), total: gpuMiB(8192)}}, false},
		{"nvidia-smi-q-gb10-gh200-bar1-NA-author-elided.txt", []gpuWant{
			{index: 0, bus: "000f:01:00.0", name: "NVIDIA GB10"},
			{index: 1, bus: "0000:dd:00.0", name: "NVIDIA GH200 480GB"}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got, problems := parseNvidiaSMI(gpuTestCorpus(t, gpuTestCorpusFile(t, tc.file)), nvidiaGPUFields)
			gpuCheck(t, got, tc.want)
			if tc.problems != (len(problems) > 0) {
				t.Errorf("problems = %q, want some: %v", problems, tc.problems)
			}
			for _, g := range got {
				if g.Vendor != "nvidia" || g.Source != "nvidia-smi" {
					t.Errorf("vendor/source = %s/%s", g.Vendor, g.Source)
				}
			}
		})
	}
	// The MIG rows name their instance; their BAR1 line is not a GPU.
	got, _ := parseNvidiaSMI(gpuTestCorpus(t, gpuTestCorpusFile(t, "nvidia-smi-mig-devices-table-PARTIAL.txt")), nil)
	if got[1].MIG != "GI 5 CI 0 dev 1" {
		t.Errorf("MIG = %q", got[1].MIG)
	}
}

func TestGPUParseNvidiaVariants(t *testing.T) {
	// What the collector really gets: noheader,nounits.
	got, problems := parseNvidiaSMI([]byte("0, 00000000:1B:00.0, NVIDIA H100 80GB HBM3, 75011, 81559\n1, 00000000:43:00.0, NVIDIA H100 80GB HBM3, [N/A], [N/A]\n"), nvidiaGPUFields)
	gpuCheck(t, got, []gpuWant{{index: 0, bus: "0000:1b:00.0", name: "NVIDIA H100 80GB HBM3", used: gpuMiB(75011), total: gpuMiB(81559)}, {index: 1, bus: "0000:43:00.0"}})
	if len(problems) != 0 {
		t.Errorf("problems: %q", problems)
	}
	// The driver is gone: nothing parses, and that is said.
	got, problems = parseNvidiaSMI([]byte("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"), nvidiaGPUFields)
	if len(got) != 0 || len(problems) != 1 {
		t.Errorf("driver failure: gpus %+v problems %q", got, problems)
	}
	apps, problems := parseNvidiaComputeApps([]byte("4242, 00000000:1B:00.0, 74000\n99, 00000000:43:00.0, [N/A]\n"), nvidiaAppFields)
	if len(apps) != 2 || apps[0].Pid != 4242 || apps[0].GPU != "0000:1b:00.0" || !gpuEqPtr(apps[0].Used, gpuMiB(74000)) || apps[1].Used != nil || len(problems) != 0 {
		t.Errorf("apps %+v problems %q", apps, problems)
	}
	apps, problems = parseNvidiaComputeApps([]byte("No running processes found\n"), nvidiaAppFields)
	if len(apps) != 0 || len(problems) != 0 {
		t.Errorf("no processes: %+v %q", apps, problems)
	}
}

func TestGPUParseROCmSMICorpus(t *testing.T) {
	mi300 := func(i int) gpuWant { return gpuWant{index: i, used: gpuU64(297771008), total: gpuU64(206141652992)} }
	cases := []struct {
		file     string
		want     []gpuWant
		problems string // substring of some problem; "" for none
	}{
		{"rocm-smi-concise-mi300x-spx-partial.txt", nil, "no VRAM figures"},
		{"rocm-smi-concise-tail-then-showmeminfo-mi300x-cpx-partial.txt", []gpuWant{mi300(0), mi300(1), mi300(2), mi300(3), mi300(4), mi300(5), mi300(6)}, ""},
		{"rocm-smi-csv-productname-meminfo-dgpu-plus-igpu.txt", []gpuWant{
			{index: 0, name: "Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]", used: gpuU64(692142080), total: gpuU64(17163091968)},
			{index: 1, name: "Raphael", used: gpuU64(26079232), total: gpuU64(67108864)}}, ""},
		{"rocm-smi-csv-showuse-meminfo-rx7900xt.txt", []gpuWant{{index: 0, name: "Radeon RX 7900 XT", used: gpuU64(27856896), total: gpuU64(21458059264)}}, ""},
		{"rocm-smi-default-table-rocm33-vram-na.txt", nil, "no VRAM figures"},
		{"rocm-smi-errors-unable-to-get-memory-use-tabs.txt", nil, "GPU[0]: Unable to get GPU memory use."},
		{"rocm-smi-json-showmemuse-old-percent-only.txt", []gpuWant{{index: 0}, {index: 1}}, ""},
		{"rocm-smi-json-showmemuse-with-bytes.txt", []gpuWant{
			{index: 0, used: gpuU64(17453056), total: gpuU64(17163091968)},
			{index: 1, used: gpuU64(17457152), total: gpuU64(17163091968)}}, ""},
		{"rocm-smi-json-showuse-meminfo-vram-rx7900xt.txt", []gpuWant{{index: 0, name: "Radeon RX 7900 XT", used: gpuU64(27856896), total: gpuU64(21458059264)}}, ""},
		{"rocm-smi-showmeminfo-vram-plain-single-gpu.txt", []gpuWant{{index: 0, used: gpuU64(108814336), total: gpuU64(4278190080)}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got, problems := parseROCmSMI(gpuTestCorpus(t, gpuTestCorpusFile(t, tc.file)))
			gpuCheck(t, got, tc.want)
			joined := strings.Join(problems, "\n")
			if tc.problems == "" && len(problems) > 0 || tc.problems != "" && !strings.Contains(joined, tc.problems) {
				t.Errorf("problems = %q, want %q", problems, tc.problems)
			}
		})
	}
	// Percent only: kept as a percentage, bytes stay unknown.
	got, _ := parseROCmSMI(gpuTestCorpus(t, gpuTestCorpusFile(t, "rocm-smi-json-showmemuse-old-percent-only.txt")))
	if got[0].UsedPercent == nil || *got[0].UsedPercent != 0 || got[0].UsedBytes != nil {
		t.Errorf("percent-only card0: %+v", got[0])
	}
}

func TestGPUParseAMDSMICorpus(t *testing.T) {
	var cpx []gpuWant
	for i := 0; i < 32; i++ {
		cpx = append(cpx, gpuWant{index: i, used: gpuMiB(283), total: gpuMiB(196300)})
	}
	var mi300 []gpuWant
	for i, b := range []string{"0c", "22", "38", "5c", "9f", "af", "bf", "df"} {
		mi300 = append(mi300, gpuWant{index: i, bus: "0000:" + b + ":00.0", name: "AMD Instinct MI300X", used: gpuMiB(4976), total: gpuMiB(196592)})
	}
	gb := func(f float64) *uint64 { v := uint64(f * (1 << 30)); return &v }
	cases := []struct {
		file     string
		want     []gpuWant
		procs    []gpuProcEntry
		problems string
	}{
		{"amd-smi-default-view-8x-mi300x-with-processes.txt", mi300, []gpuProcEntry{
			{Pid: 2427396, GPU: "0", Used: gb(2.0)}, {Pid: 2427396, GPU: "1", Used: gb(2.2)}, {Pid: 2427396, GPU: "2", Used: gb(2.3)},
			{Pid: 2427396, GPU: "3", Used: gb(2.3)}, {Pid: 2427396, GPU: "4", Used: gb(2.1)}, {Pid: 2427396, GPU: "5", Used: gb(2.0)},
			{Pid: 2427396, GPU: "6", Used: gb(2.1)}, {Pid: 2427396, GPU: "7", Used: gb(2.1)}}, ""},
		{"amd-smi-metric-full-elided-by-vendor-mem-usage.txt", []gpuWant{{index: 0, used: gpuMiB(283), total: gpuMiB(196592)}}, nil, ""},
		{"amd-smi-metric-rdna-usage-power-clock-PARTIAL.txt", nil, nil, "no VRAM figures"},
		{"amd-smi-monitor-guest-attributeerror.txt", nil, nil, "AttributeError: 'Namespace' object has no attribute 'violation'"},
		{"amd-smi-monitor-ptv-mi300x-cpx-32-partitions.txt", cpx, nil, ""},
		{"amd-smi-monitor-q-full-columns-with-process-table.txt", []gpuWant{{index: 0, used: gpuMiB(1235), total: gpuMiB(16335)}},
			[]gpuProcEntry{{Pid: 1564865, Name: "rvs", GPU: "0", Used: gb(1.1)}}, ""},
		{"amd-smi-monitor-rocm71-vram-usage-GB-fraction.txt", []gpuWant{{index: 0, used: gb(0.2), total: gb(25.4)}}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got, procs, problems := parseAMDSMI(gpuTestCorpus(t, gpuTestCorpusFile(t, tc.file)))
			gpuCheck(t, got, tc.want)
			if len(procs) != len(tc.procs) {
				t.Fatalf("procs = %+v, want %d", procs, len(tc.procs))
			}
			for i, w := range tc.procs {
				p := procs[i]
				if p.Pid != w.Pid || p.GPU != w.GPU || !gpuEqPtr(p.Used, w.Used) || (w.Name != "" && p.Name != w.Name) {
					t.Errorf("proc %d = %+v (used %s), want %+v (used %s)", i, p, gpuFmtPtr(p.Used), w, gpuFmtPtr(w.Used))
				}
			}
			joined := strings.Join(problems, "\n")
			if tc.problems == "" && len(problems) > 0 || tc.problems != "" && !strings.Contains(joined, tc.problems) {
				t.Errorf("problems = %q, want %q", problems, tc.problems)
			}
		})
	}
}

// amd-smi process's own layout is not in the corpus; this is the shape
// amd-smi's docs describe, to keep the PROCESS_INFO path honest.
func TestGPUParseAMDSMIProcessBlocks(t *testing.T) {
	out := "GPU: 0\n    PROCESS_INFO:\n        NAME: python3\n        PID: 4242\n        MEMORY_USAGE:\n            GTT_MEM: 2.0 MB\n            CPU_MEM: 1.0 GB\n            VRAM_MEM: 170.5 GB\n" +
		"GPU: 1\n    PROCESS_INFO: No running processes detected\n"
	gpus, procs, problems := parseAMDSMI([]byte(out))
	if len(gpus) != 0 || len(problems) != 0 || len(procs) != 1 || procs[0].Pid != 4242 || procs[0].GPU != "0" || procs[0].Name != "python3" ||
		!gpuEqPtr(procs[0].Used, gpuU64(uint64(170.5*(1<<30)))) {
		t.Errorf("gpus %+v procs %+v problems %q", gpus, procs, problems)
	}
}

func TestGPUSysfsAMD8Cards(t *testing.T) {
	root := filepath.Join("testdata", "sys", "amd-8card")
	var a amdSysfs
	got := a.read(root)
	var want []gpuWant
	cards := []string{"card1", "card2", "card3", "card4", "card5", "card9", "card10", "card11"}
	used := []uint64{183251763200, 297771008, 297771008, 297771008, 297771008, 297771008, 150323855360, 297771008}
	for i, b := range []string{"0c", "22", "38", "5c", "9f", "af", "bf", "df"} {
		want = append(want, gpuWant{index: i, bus: "0000:" + b + ":00.0", name: "AMD Instinct MI300X", used: gpuU64(used[i]), total: gpuU64(206141652992)})
	}
	gpuCheck(t, got, want)
	for i, g := range got {
		if g.Card != cards[i] || g.Vendor != "amd" || g.Source != "sysfs" {
			t.Errorf("GPU %d: card %s vendor %s source %s, want %s amd sysfs", i, g.Card, g.Vendor, g.Source, cards[i])
		}
	}
	procs := a.kfdProcesses(root)
	byKey := map[string]gpuProcEntry{}
	for _, p := range procs {
		byKey[fmt.Sprintf("%d@%s", p.Pid, p.GPU)] = p
	}
	for k, v := range map[string]uint64{"4242@0000:0c:00.0": 182536110080, "4242@0000:bf:00.0": 149250113536, "5151@0000:0c:00.0": 402653184} {
		if p, ok := byKey[k]; !ok || !gpuEqPtr(p.Used, gpuU64(v)) {
			t.Errorf("kfd %s = %+v (have %v)", k, p, byKey)
		}
	}
	if len(procs) != 3 {
		t.Errorf("kfd procs = %+v", procs)
	}
	if n, ok := isDRMCard("card0-DP-1"); ok {
		t.Errorf("card0-DP-1 accepted as card %d", n)
	}
}

// gpuTestBin makes a directory of stand-in tools and puts it alone on PATH,
// so a real nvidia-smi on the host cannot answer instead. Scripts call
// their helpers by absolute path.
type gpuTestBin struct {
	t     *testing.T
	dir   string
	tools map[string]string // helpers by absolute path, found before PATH changed
}

func newGPUTestBin(t *testing.T) *gpuTestBin {
	b := &gpuTestBin{t: t, dir: t.TempDir(), tools: map[string]string{}}
	for _, n := range []string{"sh", "tail", "cat", "sleep"} {
		b.tools[n] = gpuTestLook(t, n)
	}
	t.Setenv("PATH", b.dir)
	return b
}

func gpuTestLook(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Skip(t, "%s not installed: %v", name, err)
	}
	return p
}

// script writes tool: it counts its calls in <dir>/<tool>.calls, then runs
// body with $D set to the directory.
func (b *gpuTestBin) script(tool, body string) {
	sh := b.tools["sh"]
	s := fmt.Sprintf("#!%s\nD=%q\necho \"$*\" >> \"$D/%s.calls\"\n%s\n", sh, b.dir, tool, body)
	if err := os.WriteFile(filepath.Join(b.dir, tool), []byte(s), 0o755); err != nil {
		b.t.Fatal(err)
	}
}

func (b *gpuTestBin) calls(tool string) int {
	data, err := os.ReadFile(filepath.Join(b.dir, tool+".calls"))
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\n")
}

// catCorpus is a shell command printing a corpus file as the tool would.
func (b *gpuTestBin) catCorpus(name string) string {
	return fmt.Sprintf("%s -n +4 %q", b.tools["tail"], gpuTestCorpusFile(b.t, name))
}

func gpuTestEnv(t *testing.T, sys string) *Env {
	env := NewEnv()
	env.SysRoot = sys
	env.Start = time.Now()
	env.RootPid = 4242
	env.Tree = gpuTestTree{{Pid: 4242, Name: "python3"}, {Pid: 4243, PPid: 4242, Name: "python3", Exited: true}}
	env.SampleInterval = 50 * time.Millisecond
	return env
}

// readJSON decodes one JSON file a collector wrote into dir.
func readJSON[T any](t *testing.T, dir, name string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func gpuReadJSON(t *testing.T, dir string) gpuFile {
	t.Helper()
	return readJSON[gpuFile](t, dir, "gpu.json")
}

// A stand-in nvidia-smi printing real corpus output: samples during the
// run, per-process VRAM tied to the tree, raw outputs in the bundle.
func TestGPUNvidiaStandIn(t *testing.T) {
	bin := newGPUTestBin(t)
	cat := bin.tools["cat"]
	apps := filepath.Join(bin.dir, "apps.csv")
	os.WriteFile(apps, []byte("4243, 00000000:07:00.0, 76000\n777, 00000000:07:00.0, [N/A]\n"), 0o644)
	bin.script("nvidia-smi", fmt.Sprintf(`case "$1" in
--query-compute-apps=*) %s %q ;;
--query-gpu=*) %s ;;
-q) %s ;;
*) exit 2 ;;
esac`, cat, apps, bin.catCorpus("nvidia-smi-query-gpu-csv-8x-a100-80gb.txt"), bin.catCorpus("nvidia-smi-q-ecc-remapped-rows-pending-a100.txt")))
	env := gpuTestEnv(t, filepath.Join("testdata", "sys", "no-amd"))
	c := newGPUCollector()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Watch(ctx, env); close(done) }()
	waitSamples(t, "two GPU samples", c.samples, 2)
	cancel()
	<-done
	out := t.TempDir()
	if err := c.Collect(context.Background(), env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	f := gpuReadJSON(t, out)
	if len(f.Samples) < 2 {
		t.Fatalf("%d samples", len(f.Samples))
	}
	for _, s := range f.Samples {
		if len(s.GPUs) != 8 || !gpuEqPtr(s.GPUs[1].UsedBytes, gpuMiB(77105)) || s.GPUs[1].Source != "nvidia-smi" {
			t.Fatalf("sample %+v", s)
		}
	}
	if f.Snapshot == nil || len(f.Snapshot.GPUs) != 8 {
		t.Fatalf("snapshot %+v", f.Snapshot)
	}
	if f.IntervalMS != 100 {
		t.Errorf("interval_ms = %d, want 2×SampleInterval", f.IntervalMS)
	}
	if len(f.Processes) != 2 || f.Processes[0].Pid != 4243 || !f.Processes[0].InTree || f.Processes[0].GPU != "0000:07:00.0" ||
		!gpuEqPtr(f.Processes[0].UsedBytes, gpuMiB(76000)) || f.Processes[1].Pid != 777 || f.Processes[1].InTree || f.Processes[1].UsedBytes != nil {
		t.Errorf("processes %+v", f.Processes)
	}
	if len(f.ToolErrors) != 0 {
		t.Errorf("tool errors %+v", f.ToolErrors)
	}
	raw, err := os.ReadFile(filepath.Join(out, "raw", "nvidia-smi.txt"))
	if err != nil || !strings.Contains(string(raw), "NVIDIA A100-SXM4-80GB, 66147 MiB") || !strings.Contains(string(raw), "--query-compute-apps") {
		t.Errorf("raw/nvidia-smi.txt: %v\n%s", err, raw)
	}
	if q, err := os.ReadFile(filepath.Join(out, "raw", "nvidia-smi-q.txt")); err != nil || !strings.Contains(string(q), "Remapped Rows") {
		t.Errorf("raw/nvidia-smi-q.txt: %v", err)
	}
}

// AMD: sysfs sampled, rocm-smi and amd-smi asked once at collection.
func TestGPUAMDStandIns(t *testing.T) {
	bin := newGPUTestBin(t)
	bin.script("rocm-smi", bin.catCorpus("rocm-smi-concise-tail-then-showmeminfo-mi300x-cpx-partial.txt"))
	// amd-smi process's layout is not in the corpus; the default view's
	// Processes box stands in for it.
	bin.script("amd-smi", fmt.Sprintf(`case "$1" in
metric) %s ;;
process) %s ;;
esac`, bin.catCorpus("amd-smi-metric-full-elided-by-vendor-mem-usage.txt"), bin.catCorpus("amd-smi-default-view-8x-mi300x-with-processes.txt")))
	env := gpuTestEnv(t, filepath.Join("testdata", "sys", "amd-8card"))
	c := newGPUCollector()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Watch(ctx, env); close(done) }()
	waitSamples(t, "two GPU samples", c.samples, 2)
	cancel()
	<-done
	if n := bin.calls("rocm-smi") + bin.calls("amd-smi"); n != 0 {
		t.Errorf("rocm-smi/amd-smi ran %d times while sampling; sysfs is enough", n)
	}
	out := t.TempDir()
	if err := c.Collect(context.Background(), env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	f := gpuReadJSON(t, out)
	for _, s := range f.Samples {
		if len(s.GPUs) != 8 || s.GPUs[6].Card != "card10" || !gpuEqPtr(s.GPUs[6].UsedBytes, gpuU64(150323855360)) {
			t.Fatalf("sample %+v", s)
		}
	}
	bySource := map[string]int{}
	for _, g := range f.Snapshot.GPUs {
		bySource[g.Source]++
	}
	if bySource["sysfs"] != 8 || bySource["rocm-smi"] != 7 || bySource["amd-smi"] != 1 {
		t.Errorf("snapshot sources %v", bySource)
	}
	for _, g := range f.Snapshot.GPUs {
		if g.Source == "sysfs" && g.Arch != "gfx942" {
			t.Errorf("%s: arch %q, want gfx942 (KFD gfx_target_version 90402)", g.BusID, g.Arch)
		}
	}
	var run, other, amdsmi bool
	for _, p := range f.Processes {
		switch {
		case p.Pid == 4242 && p.Source == "kfd" && p.GPU == "0000:0c:00.0":
			run = p.InTree && gpuEqPtr(p.MaxUsedBytes, gpuU64(182536110080))
		case p.Pid == 5151 && p.Source == "kfd":
			other = !p.InTree
		case p.Pid == 2427396 && p.Source == "amd-smi":
			amdsmi = !p.InTree
		}
	}
	if !run || !other || !amdsmi {
		t.Errorf("processes run=%v other=%v amdsmi=%v: %+v", run, other, amdsmi, f.Processes)
	}
	if !f.Processes[0].InTree {
		t.Errorf("the run's processes come first: %+v", f.Processes[0])
	}
	for _, name := range []string{"rocm-smi.txt", "amd-smi.txt"} {
		if _, err := os.Stat(filepath.Join(out, "raw", name)); err != nil {
			t.Error(err)
		}
	}
}

// gpuTestGroupGone waits until no live process is in group pgid (zombies
// waiting for a slow init to reap them count as gone).
func gpuTestGroupGone(pgid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		alive := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			f := strings.Fields(s[i+1:])
			if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && pid != os.Getpid() {
				alive = true
			}
		}
		if !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A hung nvidia-smi is killed with its group at the per-call deadline,
// becomes a gpu_hang finding, and is never started again.
func TestGPUHungTool(t *testing.T) {
	bin := newGPUTestBin(t)
	sleep := bin.tools["sleep"]
	bin.script("nvidia-smi", fmt.Sprintf(`echo $$ > "$D/pid"; %s 1000; echo never`, sleep))
	env := gpuTestEnv(t, filepath.Join("testdata", "sys", "no-amd"))
	c := newGPUCollector()
	c.timeout = time.Second
	out := t.TempDir()
	begin := time.Now()
	err := c.Collect(context.Background(), env, NewOutput(out))
	took := time.Since(begin)
	// the only tool hung and nothing else gave data: a timeout, not ok
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "every call of nvidia-smi timed out") {
		t.Fatalf("Collect = %v", err)
	}
	if took > c.timeout+time.Second {
		t.Errorf("Collect took %s with a %s tool deadline", took, c.timeout)
	}
	pidb, _ := os.ReadFile(filepath.Join(bin.dir, "pid"))
	pgid, err := strconv.Atoi(strings.TrimSpace(string(pidb)))
	if err != nil {
		t.Fatalf("stand-in pid: %q", pidb)
	}
	if !gpuTestGroupGone(pgid, 2*time.Second) {
		t.Errorf("process group %d still has live members", pgid)
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if !env.Stuck("nvidia-smi") {
		t.Error("nvidia-smi not marked stuck")
	}
	var hang *evidence.Finding
	for _, f := range env.Findings() {
		if f.Kind == evidence.GPUHang {
			hang = &f
		}
	}
	if hang == nil || hang.Source != evidence.SourceSMI || hang.Text != "nvidia-smi did not answer within 1s (killed): the driver may be wedged" {
		t.Fatalf("findings %+v", env.Findings())
	}
	f := gpuReadJSON(t, out)
	if len(f.ToolErrors) != 1 || !f.ToolErrors[0].TimedOut || len(f.StuckTools) != 1 {
		t.Errorf("tool_errors %+v stuck %v", f.ToolErrors, f.StuckTools)
	}
	if n := bin.calls("nvidia-smi"); n != 1 {
		t.Fatalf("nvidia-smi called %d times", n)
	}
	// Later samples leave it alone.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Watch(ctx, env); close(done) }()
	waitSamples(t, "three GPU samples", c.samples, 3)
	cancel()
	<-done
	if n := bin.calls("nvidia-smi"); n != 1 {
		t.Errorf("nvidia-smi called %d times after it hung", n)
	}
}

// Tools printing garbage or failing: recorded, never fatal, never zero.
func TestGPUGarbageTools(t *testing.T) {
	bin := newGPUTestBin(t)
	bin.script("nvidia-smi", `printf '\001\002\377garbage, more garbage\n%%%%%%\n'`)
	bin.script("rocm-smi", `echo '{"card0": {"VRAM Total Memory (B)": '; echo 'Traceback (most recent call last):' >&2; exit 1`)
	bin.script("amd-smi", bin.catCorpus("amd-smi-monitor-guest-attributeerror.txt"))
	env := gpuTestEnv(t, filepath.Join("testdata", "sys", "no-amd"))
	c := newGPUCollector()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Watch(ctx, env); close(done) }()
	waitFor(t, 10*time.Second, "nvidia-smi tried gpuFailLimit times", func() bool { return bin.calls("nvidia-smi") >= gpuFailLimit })
	waitSamples(t, "three GPU samples after the last try", c.samples, 3)
	cancel()
	<-done
	// A tool that fails every time is left alone after gpuFailLimit tries.
	if n := bin.calls("nvidia-smi"); n > 2*gpuFailLimit {
		t.Errorf("failing nvidia-smi called %d times while sampling", n)
	}
	out := t.TempDir()
	if err := c.Collect(context.Background(), env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	f := gpuReadJSON(t, out)
	if len(f.Snapshot.GPUs) != 0 {
		t.Errorf("GPUs from garbage: %+v", f.Snapshot.GPUs)
	}
	seen := map[string]bool{}
	for _, e := range f.ToolErrors {
		seen[e.Tool] = true
		if e.TimedOut {
			t.Errorf("timed out: %+v", e)
		}
	}
	if !seen["nvidia-smi"] || !seen["rocm-smi"] || !seen["amd-smi"] {
		t.Errorf("tool_errors %+v", f.ToolErrors)
	}
	for _, fd := range env.Findings() {
		t.Errorf("finding from garbage output: %+v", fd)
	}
}

func TestGPUSkipWithoutGPU(t *testing.T) {
	newGPUTestBin(t) // empty PATH
	env := gpuTestEnv(t, filepath.Join("testdata", "sys", "no-amd"))
	out := t.TempDir()
	err := newGPUCollector().Collect(context.Background(), env, NewOutput(out))
	if !errors.Is(err, ErrSkipped) || !strings.Contains(err.Error(), "no GPU found: no nvidia-smi/rocm-smi/amd-smi in PATH and no amdgpu card in testdata/sys/no-amd/class/drm") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "gpu.json")); err == nil {
		t.Error("gpu.json written although skipped")
	}
}

func TestGPUHelpers(t *testing.T) {
	for in, want := range map[string]string{"00000000:05:00.0": "0000:05:00.0", "0000000F:01:00.0": "000f:01:00.0", "0000:0C:00.0": "0000:0c:00.0", "0001:00:00.0": "0001:00:00.0"} {
		if got := gpuNormBusID(in); got != want {
			t.Errorf("gpuNormBusID(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]*uint64{"[N/A]": nil, "Not Supported": nil, "283 MB": gpuMiB(283), "0.0 B": gpuU64(0), "22284MiB": gpuMiB(22284), "12 W": nil, "x": nil} {
		if got := gpuParseSize(in, 1<<20); !gpuEqPtr(got, want) {
			t.Errorf("gpuParseSize(%q) = %s, want %s", in, gpuFmtPtr(got), gpuFmtPtr(want))
		}
	}
}

// The per-sample cost on an 8-GPU AMD node, which is the whole GPU
// sampling cost there (no process is started).
func BenchmarkGPUSampleSysfs(b *testing.B) {
	b.Setenv("PATH", b.TempDir())
	env := NewEnv()
	env.SysRoot = filepath.Join("testdata", "sys", "amd-8card")
	env.RootPid = 4242
	env.Tree = gpuTestTree{{Pid: 4242}}
	c := newGPUCollector()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.addSample(c.sample(ctx, env, false))
	}
}

// A tool still busy when the collection deadline nears is stopped in time
// for gpu.json to be written; it is not called a hang (it never had its
// full deadline).
func TestGPUCollectDeadline(t *testing.T) {
	bin := newGPUTestBin(t)
	bin.script("nvidia-smi", fmt.Sprintf(`%s 1000`, bin.tools["sleep"]))
	env := gpuTestEnv(t, filepath.Join("testdata", "sys", "amd-8card"))
	c := newGPUCollector()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	out := t.TempDir()
	begin := time.Now()
	if err := c.Collect(ctx, env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took >= 1500*time.Millisecond {
		t.Errorf("Collect took %s against a 1.5s deadline", took)
	}
	f := gpuReadJSON(t, out)
	if len(f.Snapshot.GPUs) != 8 || len(f.ToolErrors) == 0 || !strings.Contains(f.ToolErrors[0].Error, "collection deadline") {
		t.Errorf("snapshot %d GPUs, tool errors %+v", len(f.Snapshot.GPUs), f.ToolErrors)
	}
	if env.Stuck("nvidia-smi") || len(env.Findings()) != 0 {
		t.Errorf("stuck %v findings %+v", env.Stuck("nvidia-smi"), env.Findings())
	}
}

// Through the seam: selected by name, watched, collected by the runner.
func TestGPUMemoryCoredumpThroughRunner(t *testing.T) {
	bin := newGPUTestBin(t)
	bin.script("nvidia-smi", fmt.Sprintf(`case "$1" in --query-gpu=*) %s ;; esac`, bin.catCorpus("nvidia-smi-query-gpu-csv-hami-vgpu-capped-indented.txt")))
	cs, err := Select([]string{"gpu", "memory", "coredump"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := gpuTestEnv(t, filepath.Join("testdata", "sys", "amd-8card"))
	env.RootPid = os.Getpid()
	env.Tree = gpuTestTree{{Pid: int32(os.Getpid())}}
	stop := StartWatchers(context.Background(), env, cs)
	for _, c := range cs {
		switch c := c.Collector.(type) {
		case *gpuCollector:
			waitSamples(t, "two GPU samples", c.samples, 2)
		case *memoryCollector:
			waitSamples(t, "two memory samples", c.samples, 2)
		}
	}
	stop(time.Second)
	code := 0
	env.ExitCode = &code
	out := t.TempDir()
	st := Run(context.Background(), env, cs, out, 10*time.Second, nil)
	want := map[string]string{"gpu": "ok", "memory": "ok", "coredump": "skipped"}
	for _, s := range st {
		if s.Status != want[s.Name] {
			t.Errorf("%s: %s (%s)", s.Name, s.Status, s.Error)
		}
	}
	f := gpuReadJSON(t, out)
	if len(f.Samples) < 2 || len(f.Snapshot.GPUs) != 10 {
		t.Errorf("%d samples, snapshot %d GPUs", len(f.Samples), len(f.Snapshot.GPUs))
	}
	if m := memReadJSON(t, out); len(m.Samples) < 2 || m.Samples[0].TreeRSSBytes == 0 {
		t.Errorf("memory samples %+v", m.Samples)
	}
}

// A collector whose every tool call timed out reports timeout, not
// ok: a hung nvidia-smi under the collection deadline, through the runner.
func TestGPUAllCallsTimedOutStatusTimeout(t *testing.T) {
	bin := newGPUTestBin(t)
	bin.script("nvidia-smi", fmt.Sprintf(`%s 1000`, bin.tools["sleep"]))
	cs, err := Select([]string{"gpu"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := gpuTestEnv(t, filepath.Join("testdata", "sys", "no-amd"))
	st := Run(context.Background(), env, cs, t.TempDir(), 2*time.Second, nil)
	if len(st) != 1 || st[0].Status != "timeout" || !strings.Contains(st[0].Error, "timed out") {
		t.Fatalf("status %+v", st)
	}
	if len(st[0].Files) == 0 {
		t.Errorf("what was sampled is still written: files %v", st[0].Files)
	}
}

// nvidia-smi's compute_cap, as a real two-GPU machine printed it (a Titan V
// and an RTX 5880: two generations), names each GPU's arch by index.
func TestSetNvidiaArch(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "smi", "nvidia-smi-query-compute-cap-titanv-rtx5880.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ := strings.Cut(string(b), "--format=csv\n") // after the source line and the command
	gpus := []GPUMem{{Index: 0, Vendor: "nvidia"}, {Index: 1, Vendor: "nvidia"}, {Index: 1, Vendor: "amd"}, {Index: 2, Vendor: "nvidia"}}
	setNvidiaArch(gpus, []byte(out))
	if gpus[0].Arch != "sm_70" || gpus[1].Arch != "sm_89" || gpus[2].Arch != "" || gpus[3].Arch != "" {
		t.Errorf("%+v", gpus)
	}
	// a driver without compute_cap refuses the query: nothing is set
	gpus = []GPUMem{{Index: 0, Vendor: "nvidia"}}
	setNvidiaArch(gpus, []byte("Field \"compute_cap\" is not a valid field to query.\n"))
	if gpus[0].Arch != "" {
		t.Errorf("%+v", gpus)
	}
}

func TestKFDArchNames(t *testing.T) {
	root := t.TempDir()
	for i, v := range []string{"90402", "90010", "110000", "100300"} {
		n := filepath.Join(root, "class", "kfd", "kfd", "topology", "nodes", strconv.Itoa(i))
		os.MkdirAll(n, 0o755)
		os.WriteFile(filepath.Join(n, "gpu_id"), []byte(strconv.Itoa(1000+i)), 0o644)
		os.WriteFile(filepath.Join(n, "properties"), []byte("gfx_target_version "+v+"\nlocation_id "+strconv.Itoa((i+1)<<8)+"\ndomain 0\n"), 0o644)
	}
	_, arch := kfdTopology(root)
	want := map[string]string{"0000:01:00.0": "gfx942", "0000:02:00.0": "gfx90a", "0000:03:00.0": "gfx1100", "0000:04:00.0": "gfx1030"}
	for b, w := range want {
		if arch[b] != w {
			t.Errorf("%s: %q, want %q (all: %v)", b, arch[b], w, arch)
		}
	}
}
