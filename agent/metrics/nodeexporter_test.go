package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/internal/textfile/textfiletest"
)

// A real node_exporter reads kcrash.prom whole: every kcrash series with
// its value and HELP, no scrape error. A second file that breaks a rule of
// the format (a client-side timestamp) makes the scrape error 1, so the
// check above can fail.
func TestNodeExporterScrapesKcrashProm(t *testing.T) {
	dir := t.TempDir()
	m := New(Config{
		Journal: func() api.JournalStats {
			return api.JournalStats{Records: 9, Bytes: 4096, Gaps: 1, Lost: 3, Newest: base.Add(1500 * time.Millisecond)}
		},
		GPU: func() api.GPUStats { return api.GPUStats{Samples: 7, LastSample: base.Add(2 * time.Second)} },
	})
	observeCorpus(m)
	if err := m.WriteFile(dir); err != nil {
		t.Fatal(err)
	}
	url := textfiletest.StartNodeExporter(t, dir)

	wantVals, wantHelp := textfiletest.Exposition(t, string(m.Render()))
	gotVals, gotHelp := textfiletest.Exposition(t, textfiletest.Scrape(t, url))
	if len(wantVals) < 20 {
		t.Fatalf("only %d series rendered", len(wantVals))
	}
	for s, v := range wantVals {
		if g, ok := gotVals[s]; !ok || g != v {
			t.Errorf("%s: scraped %v (present %v), want %v", s, g, ok, v)
		}
	}
	for name, h := range wantHelp {
		if gotHelp[name] != h {
			t.Errorf("HELP %s: scraped %q, want %q", name, gotHelp[name], h)
		}
	}
	if v, ok := gotVals["node_textfile_scrape_error"]; !ok || v != 0 {
		t.Errorf("node_textfile_scrape_error = %v (present %v)", v, ok)
	}
	mtime := fmt.Sprintf(`node_textfile_mtime_seconds{file=%q}`, filepath.Join(dir, FileName))
	if _, ok := gotVals[mtime]; !ok {
		// node_exporter 1.5 labels the file by base name
		if _, ok := gotVals[`node_textfile_mtime_seconds{file="`+FileName+`"}`]; !ok {
			t.Errorf("no node_textfile_mtime_seconds for %s", FileName)
		}
	}

	bad := "# HELP kcrash_test_timestamped a series with a timestamp\n# TYPE kcrash_test_timestamped gauge\nkcrash_test_timestamped 1 1700000000000\n"
	if err := os.WriteFile(filepath.Join(dir, "other.prom"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, _ := textfiletest.Exposition(t, textfiletest.Scrape(t, url)); v["node_textfile_scrape_error"] != 1 {
		t.Errorf("a timestamped file did not make node_textfile_scrape_error 1: %v", v["node_textfile_scrape_error"])
	}
}
