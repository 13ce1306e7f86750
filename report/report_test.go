package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/internal/human"
)

var update = flag.Bool("update", false, "rewrite the golden SVG files in testdata/golden")

// fixtures are bundles kcrash wrote (extracted): a GPU page fault under a
// stand-in nvidia-smi (testdata/bundles/crash-gpu), a hang stopped by the
// hang detector, `kcrash collect` with no child and no GPU, and a
// --snapshot-signal snapshot of a live run.
var fixtures = []string{"crash-gpu", "hang", "collect", "snapshot"}

func loadFixture(t testing.TB, name string) *Input {
	t.Helper()
	dir := filepath.Join("testdata", "bundles", name)
	in, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Load streams the timelines without keeping them; the tests change
	// their bytes, which build then reads through the same stream.
	for n := range streamed {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
			in.files[n] = b
		}
	}
	return in
}

// charts renders every chart of in, by name; a chart with nothing to draw is "".
func charts(in *Input) map[string]string {
	m := build(in)
	a := axis{m.start, m.end}
	procs, _ := processSVG(m, a)
	return map[string]string{"vram": vramSVG(m, a), "memory": memorySVG(m, a), "processes": procs, "events": eventsSVG(m, a), "kernel-api": apiSVG(m, a)}
}

func TestGoldenSVG(t *testing.T) {
	for _, fx := range fixtures {
		for name, svg := range charts(loadFixture(t, fx)) {
			golden := filepath.Join("testdata", "golden", fx+"-"+name+".svg")
			if *update {
				if svg == "" {
					os.Remove(golden)
					continue
				}
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(svg+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(golden)
			if os.IsNotExist(err) {
				if svg != "" {
					t.Errorf("%s %s: drew a chart, the golden file says there is none (go test ./report -run TestGoldenSVG -update)", fx, name)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if svg+"\n" != string(want) {
				t.Errorf("%s %s: SVG differs from %s (go test ./report -run TestGoldenSVG -update to accept)", fx, name, golden)
			}
		}
	}
}

// TestPageEveryKind renders each fixture and checks what the page must say,
// and that a bundle without GPUs gets no empty VRAM frame.
func TestPageEveryKind(t *testing.T) {
	cases := []struct {
		fx       string
		verdict  string
		charts   []string
		nochart  []string
		contains []string
	}{
		{"crash-gpu", "gpu_page_fault", []string{"vram", "memory", "processes", "events"}, nil,
			[]string{"Memory access fault by GPU node-2", "output.log:12", "killed by SIGABRT", "GPU 0", "GPU 1", "Fp8LinearMethod.apply", "started and never returned", "100%"}},
		{"hang", "hang", []string{"memory", "processes", "events"}, []string{"vram"},
			[]string{"hang declared", "the child was still running (hang)", "VRAM: skipped"}},
		{"collect", "", []string{"memory", "events"}, []string{"vram", "processes"},
			[]string{"no-retry page fault", "Processes: skipped"}},
		{"snapshot", "unknown", []string{"memory", "processes", "events"}, []string{"vram"},
			[]string{`class="ev k-hang"`, "the child was still running (snapshot)", "running at collection", "working"}},
	}
	for _, c := range cases {
		t.Run(c.fx, func(t *testing.T) {
			in := loadFixture(t, c.fx)
			var buf bytes.Buffer
			if err := Write(&buf, in); err != nil {
				t.Fatal(err)
			}
			page := buf.String()
			if c.verdict != "" && !strings.Contains(page, `data-kind="`+c.verdict+`"`) {
				t.Errorf("verdict %s not on the page", c.verdict)
			}
			for _, ch := range c.charts {
				if n := strings.Count(page, `data-timeline="`+ch+`"`); n != 1 {
					t.Errorf("chart %s drawn %d times, want 1", ch, n)
				}
			}
			for _, ch := range c.nochart {
				if strings.Contains(page, `data-timeline="`+ch+`"`) {
					t.Errorf("chart %s drawn with nothing to draw", ch)
				}
			}
			for _, s := range c.contains {
				if !strings.Contains(page, s) {
					t.Errorf("page lacks %q", s)
				}
			}
			for _, bad := range []string{"<script", "http://", "https://", "src="} {
				if strings.Contains(page, bad) {
					t.Errorf("page holds %q: it must load nothing", bad)
				}
			}
		})
	}
}

// TestPageEscapes feeds bundle text that would inject markup or drive a
// terminal: it must come out as text, control characters visible.
func TestPageEscapes(t *testing.T) {
	in := loadFixture(t, "crash-gpu")
	evil := `</pre><script>alert(1)</script><img src=x onerror=alert(2)>"'` + "\x1b]52;c;ZXZpbA==\x07\u202e"
	in.files["output.log"] = append(in.files["output.log"], []byte(evil+"\n")...)
	in.files["kmsg.log"] = append(in.files["kmsg.log"], []byte(evil+"\n")...)
	in.Manifest.Command = []string{"sh", "-c", evil}
	in.Manifest.Host.Hostname = evil
	in.Manifest.Notes = append(in.Manifest.Notes, evil)
	var tri map[string]any
	if err := json.Unmarshal(in.Manifest.Triage, &tri); err != nil {
		t.Fatal(err)
	}
	f0 := tri["findings"].([]any)[0].(map[string]any)
	f0["text"] = "</svg><script>alert(3)</script>\x1b[2J " + f0["text"].(string)
	in.Manifest.Triage = mustJSON(tri)
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"<script", "<img", "\x1b", "\x07", "\u202e", "</svg><script"} {
		if strings.Contains(page, bad) {
			t.Errorf("page holds %q raw", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)", `\x1b[2J`, `\u202e`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks the escaped %q", want)
		}
	}
}

func TestDownsampleKeepsPeaks(t *testing.T) {
	a := axis{synthStart, synthStart.Add(time.Hour)}
	var pts []point
	for s := 0; s < 3600*4; s++ {
		v := float64(s % 97)
		if s == 7777 {
			v = 1e6
		}
		if s == 9999 {
			v = -5
		}
		pts = append(pts, point{synthStart.Add(time.Duration(s) * 250 * time.Millisecond), v})
	}
	d := downsample(pts, a)
	if len(d) > 2*(plotX1-plotX0)+2 {
		t.Errorf("%d points drawn of %d, want at most two a unit", len(d), len(pts))
	}
	var hi, lo bool
	for i, p := range d {
		hi = hi || p.v == 1e6
		lo = lo || p.v == -5
		if i > 0 && p.t.Before(d[i-1].t) {
			t.Fatalf("points out of time order at %d", i)
		}
	}
	if !hi || !lo {
		t.Errorf("peak kept %v, dip kept %v", hi, lo)
	}
}

// TestSyntheticHour checks the 1-hour, 8-GPU run: the page stays small,
// every GPU has a lane, the exact peak is in the table and drawn, and the
// Xid marker sits at its time.
func TestSyntheticHour(t *testing.T) {
	in := synthetic(8, 3600, 2000)
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if buf.Len() > 2<<20 {
		t.Errorf("page is %s, want under 2 MiB", human.Bytes(int64(buf.Len())))
	}
	if n := strings.Count(page, `<g class="lane"`); n != 8 {
		t.Errorf("%d VRAM lanes, want 8", n)
	}
	if !strings.Contains(page, human.Bytes(synthPeak)+" (94%)") {
		t.Errorf("the exact peak %s is not in the VRAM table", human.Bytes(synthPeak))
	}
	peakMS := synthPeakAt.Milliseconds()
	if !regexp.MustCompile(`class="peak used"[^>]*data-t="` + strconv.FormatInt(peakMS, 10) + `"`).MatchString(page) {
		t.Errorf("no peak marker at %dms", peakMS)
	}
	if !strings.Contains(page, `class="ev k-xid" data-t="3598000"`) {
		t.Error("no Xid marker at +59m58s")
	}
	if !strings.Contains(page, "120 of 3601 sampled moments") {
		t.Error("no samples table of 120 moments")
	}
	if !strings.Contains(page, "40 of 2000 processes drawn") {
		t.Error("the process chart does not say it shows 40 of 2000")
	}
}

// BenchmarkRenderHour8GPU is the page of a 1-hour, 8-GPU run sampled every
// second with 2000 processes: ns/op is the render time, page-bytes its size.
//
//	go test ./report -run '^$' -bench RenderHour8GPU -benchmem
func BenchmarkRenderHour8GPU(b *testing.B) {
	in := synthetic(8, 3600, 2000)
	var size int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var buf bytes.Buffer
		if err := Write(&buf, in); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "page-bytes")
}

// TestSparklines: one line per GPU and per memory series, the exact peak
// printed, and the spike one sample wide still drawn at full height in its
// column.
func TestSparklines(t *testing.T) {
	in := synthetic(8, 3600, 50)
	lines := Sparklines(in, 60)
	if len(lines) != 8+3+1 {
		t.Fatalf("%d lines, want 8 GPUs, 3 memory series and the axis:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	g3 := lines[synthPeakGPU]
	if !strings.Contains(g3, "GPU 3") || !strings.Contains(g3, "peak "+human.Bytes(synthPeak)+" of 85.5 GB (94%) at +41m7s") {
		t.Errorf("GPU 3 line: %s", g3)
	}
	spark := []rune(strings.Fields(g3)[2])
	at := float64(synthPeakAt) / float64(time.Hour) * 60
	col := int(at)
	if len(spark) != 60 || spark[col] != '█' {
		t.Errorf("GPU 3 sparkline %q: want 60 cells, █ at %d", string(spark), col)
	}
	if !strings.HasPrefix(lines[8], "Mem   host") || !strings.Contains(lines[9], "of limit 400.0 GB") {
		t.Errorf("memory lines:\n%s\n%s", lines[8], lines[9])
	}
	if got := Sparklines(loadFixture(t, "collect"), 60); len(got) == 0 || strings.Contains(strings.Join(got, "\n"), "VRAM") {
		t.Errorf("collect without GPUs: %q", got)
	}
}

func TestOffset(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0", 250 * time.Millisecond: "+250ms", 2500 * time.Millisecond: "+2.5s", 3 * time.Second: "+3s",
		100 * time.Second: "+1m40s", 2 * time.Minute: "+2m", time.Hour + 6*time.Minute + 7*time.Second: "+1h6m7s", time.Hour: "+1h", -1500 * time.Millisecond: "−1.5s"} {
		if got := offset(d); got != want {
			t.Errorf("offset(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestPageAttachSlurmJob: a bundle of `attach --slurm-job` holds no
// process tree, no samples and no exit code, only the job's identity and
// state: the page says who and what, and draws no empty frame.
func TestPageAttachSlurmJob(t *testing.T) {
	in := newInput("kcrash-20260502T140000Z-node7-99-r3")
	rank, world := 3, 8
	end := synthStart.Add(time.Hour)
	in.Manifest.SchemaVersion, in.Manifest.Mode = 1, "attach"
	in.Manifest.Command = []string{"srun", "python3", "train.py"}
	in.Manifest.StartTime, in.Manifest.EndTime = synthStart, end
	in.Manifest.Exit.Reason = "job 4242 ended FAILED (exit 1:0)"
	in.Manifest.Host.Hostname = "node7"
	in.Manifest.Job = &bundle.Job{Scheduler: "slurm", JobID: "4242", StepID: "0", Rank: &rank, WorldSize: &world, Node: "node7"}
	in.Manifest.Collectors = []bundle.CollectorStatus{{Name: "gpu", Status: "skipped", Error: "no GPU found"}, {Name: "processes", Status: "skipped", Error: "no supervised process tree"}}
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{"slurm job 4242 step 0 rank 3 of 8 on node7", "job 4242 ended FAILED (exit 1:0)", "VRAM: skipped: no GPU found", "Processes: skipped: no supervised process tree", `data-kind="unknown"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<svg") {
		t.Error("an empty chart frame for a bundle with nothing to draw")
	}
}
