package triage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if got := mdText("a <b> `c <d>` e"); got != "a &lt;b> `c <d>` e" {
		t.Errorf("mdText %q", got)
	}
	if got := mdCode("a`b"); got != "``a`b``" {
		t.Errorf("mdCode %q", got)
	}
	if got := withCommand("`kcrash run -- CMD --x` and -- CMDX", []string{"a"}); got != "`kcrash run -- a --x` and -- CMDX" {
		t.Errorf("withCommand %q", got)
	}
}
