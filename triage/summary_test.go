package triage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
)

// TestSummaryGolden renders summary.md for every verdict scenario and compares
// it with testdata/golden/<scenario>.md; -update rewrites them.
func TestSummaryGolden(t *testing.T) {
	for _, s := range vdScenarios(t) {
		t.Run(s.name, func(t *testing.T) {
			got := Summary(Decide(s.in), s.meta)
			path := filepath.Join("testdata", "golden", s.name+".md")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./triage -update to create it)", err)
			}
			if string(want) != got {
				t.Errorf("%s differs from the rendering (go test ./triage -run TestSummaryGolden -update); got:\n%s", path, got)
			}
		})
	}
}

func TestSummaryCommandAndQuoting(t *testing.T) {
	r := Decide(Input{Signal: "SIGSEGV"})
	r.Findings[0].Text = "weird ```fence``` and `tick` <script>"
	md := Summary(r, SummaryMeta{Command: []string{"python3", "-c", "import x; x.run('a b')"}, LastLines: []string{"\x1b[31mred\x1b[0m line", "```"}})
	if !strings.Contains(md, "-- python3 -c 'import x; x.run('\\''a b'\\'')'`") {
		t.Errorf("command not substituted:\n%s", md)
	}
	if strings.Contains(md, "-- CMD") {
		t.Errorf("placeholder left:\n%s", md)
	}
	if !strings.Contains(md, "   ````\n   weird ```fence``` and `tick` <script>\n   ````") {
		t.Errorf("evidence fence:\n%s", md)
	}
	if !strings.Contains(md, "````\nred line\n```\n````") {
		t.Errorf("last lines fence or ANSI:\n%s", md)
	}
	if got := mdText("a <b> `c <d>` e"); got != "a `<b>` `c <d>` e" {
		t.Errorf("mdText %q", got)
	}
	if got := mdCode("a`b"); got != "``a`b``" {
		t.Errorf("mdCode %q", got)
	}
	if got := withCommand("`kcrash run -- CMD --x` and -- CMDX", []string{"a"}); got != "`kcrash run -- a --x` and -- CMDX" {
		t.Errorf("withCommand %q", got)
	}
}

// TestSummaryReadsLikeTheTerminal: the last output lines are what a terminal
// showed (a progress bar's last frame, whole), no HTML entities reach the
// text a terminal prints, and the exit status is not repeated as evidence.
func TestSummaryReadsLikeTheTerminal(t *testing.T) {
	frames := "Capturing batches (bs=8):  10%|█         | 1/10 [00:01<00:09]\rCapturing batches (bs=8):  50%|█████     | 5/10 [00:05<00:05]\rCapturing batches (bs=8): 100%|██████████| 10/10 [00:10<00:00]"
	code := 1
	r := Decide(Input{ExitCode: &code, Findings: []evidence.Finding{{Kind: evidence.PythonException, Source: evidence.SourceLog,
		File: "output.log", Line: 3, Text: "ValueError: bad", Details: map[string]any{"signature": "python-traceback", "exception": "ValueError", "message": "bad",
			"frame_func": "<module>", "frame_file": "x.py", "frame_line": int64(3)}}}})
	md := Summary(r, SummaryMeta{LastLines: []string{frames, "ok\x1b[K", "abc\rxy", "50%\r\x1b[K"}})
	want := "```\nCapturing batches (bs=8): 100%|██████████| 10/10 [00:10<00:00]\nok\nxyc\n\n```"
	if !strings.Contains(md, want) {
		t.Errorf("last lines not rendered as a terminal would:\n%s", md)
	}
	if strings.Contains(md, "10%") || strings.Contains(md, "…") {
		t.Errorf("an overwritten frame or a cut survived:\n%s", md)
	}
	if strings.Contains(md, "&lt;") {
		t.Errorf("HTML entity in the summary:\n%s", md)
	}
	if !strings.Contains(md, "`<module>`") {
		t.Errorf("<module> not kept readable:\n%s", md)
	}
	if strings.Contains(md, "· exit") {
		t.Errorf("the exit status is listed as evidence:\n%s", md)
	}
	if !strings.Contains(md, "| Exit | exited with code 1 |") {
		t.Errorf("the exit row is gone:\n%s", md)
	}
}

// A Slurm job's bundle from the epilog: a step's run goes into the job's
// batch script under srun, never around the script outside Slurm.
func TestStepInBatchScript(t *testing.T) {
	step := "Re-run with synchronous launches: `kcrash run --profile rocm-sync -- CMD`."
	got := inBatchScript(step, []string{"/home/u/train.sbatch", "--epochs", "3"}, "812")
	want := "Re-run with synchronous launches: `srun kcrash run --profile rocm-sync -- PROGRAM`: in job 812's batch script `/home/u/train.sbatch`, put it before the program the script runs (PROGRAM), and resubmit with `sbatch /home/u/train.sbatch --epochs 3`."
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := inBatchScript(step, []string{"slurm-job:812"}, "812"); !strings.Contains(got, "`scontrol show job 812`") || !strings.Contains(got, "`srun kcrash run --profile rocm-sync -- PROGRAM`") {
		t.Errorf("without a script path: %s", got)
	}
	if plain := "Look at gpu.json."; inBatchScript(plain, []string{"x"}, "1") != plain {
		t.Error("a step without a run changed")
	}
}
