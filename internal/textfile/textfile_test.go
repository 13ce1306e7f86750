package textfile

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEscapes(t *testing.T) {
	if got := Labels("gpu", "a\"b\\c\nd"); got != `{gpu="a\"b\\c\nd"}` {
		t.Errorf("labels: %s", got)
	}
	if got := Labels(); got != "" {
		t.Errorf("no labels: %q", got)
	}
	if got := Labels("z", "1", "a", "2", "m", ""); got != `{a="2",z="1"}` {
		t.Errorf("sorted, empty left out: %s", got)
	}
	if got := EscapeHelp("a\\b\nc\"d"); got != `a\\b\nc"d` {
		t.Errorf("help: %s", got)
	}
	for v, want := range map[float64]string{math.NaN(): "NaN", math.Inf(1): "+Inf", math.Inf(-1): "-Inf", 0.25: "0.25", 3: "3"} {
		if got := FormatValue(v); got != want {
			t.Errorf("FormatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

// One HELP and TYPE per family, families by name, series by labels,
// whatever order the samples came in.
func TestRenderOrder(t *testing.T) {
	fams := map[string]Family{"b_total": {Help: "B.", Type: "counter"}, "a": {Help: "A\nline.", Type: "gauge"}}
	got := string(Render([]Sample{
		{Name: "b_total", Labels: Labels("x", "2"), Value: 2},
		{Name: "a", Value: 1},
		{Name: "b_total", Labels: Labels("x", "1"), Value: 1},
	}, fams))
	want := "# HELP a A\\nline.\n# TYPE a gauge\na 1\n" +
		"# HELP b_total B.\n# TYPE b_total counter\nb_total{x=\"1\"} 1\nb_total{x=\"2\"} 2\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("a series without a family rendered")
		}
	}()
	Render([]Sample{{Name: "c"}}, fams)
}

// Write leaves only the named file, 0644, and replaces it whole.
func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	for _, body := range []string{"first 1\n", "second 2\n"} {
		if err := Write(dir, "x.prom", []byte(body)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "x.prom"))
		if err != nil || string(b) != body {
			t.Fatalf("read %q %v, want %q", b, err, body)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
	st, _ := os.Stat(filepath.Join(dir, "x.prom"))
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
	if err := Write(filepath.Join(dir, "missing"), "x.prom", nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing directory: %v", err)
	}
}
