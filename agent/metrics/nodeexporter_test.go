package metrics

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/internal/testenv"
)

const nodeExporter = "/usr/bin/prometheus-node-exporter" // Debian's prometheus-node-exporter

// exposition reads the text format into series (name{labels}) → value,
// and HELP lines by name.
func exposition(t *testing.T, text string) (map[string]float64, map[string]string) {
	t.Helper()
	vals, help := map[string]float64{}, map[string]string{}
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, "# HELP "); ok {
			name, h, _ := strings.Cut(rest, " ")
			help[name] = h
			continue
		}
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("value of %q: %v", l, err)
		}
		vals[l[:i]] = v
	}
	return vals, help
}

// startNodeExporter runs Debian's node_exporter with only the textfile
// collector on a free loopback port, stopped at the end of the test, and
// returns its /metrics URL once it answers.
func startNodeExporter(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat(nodeExporter); err != nil {
		testenv.Skip(t, "Debian's prometheus-node-exporter is not installed (apt-get install prometheus-node-exporter): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(nodeExporter, "--collector.disable-defaults", "--collector.textfile",
		"--collector.textfile.directory="+dir, "--web.listen-address="+addr, "--web.disable-exporter-metrics")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	url := "http://" + addr + "/metrics"
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("node_exporter exited: %v\n%s", err, stderr.String())
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node_exporter did not answer on %s:\n%s", url, stderr.String())
		}
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s %v", resp.Status, err)
	}
	return string(b)
}

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
	url := startNodeExporter(t, dir)

	wantVals, wantHelp := exposition(t, string(m.Render()))
	gotVals, gotHelp := exposition(t, scrape(t, url))
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
	if v, _ := exposition(t, scrape(t, url)); v["node_textfile_scrape_error"] != 1 {
		t.Errorf("a timestamped file did not make node_textfile_scrape_error 1: %v", v["node_textfile_scrape_error"])
	}
}
