// Package textfiletest runs Debian's real node_exporter over a textfile
// directory, for the tests of every writer of .prom files.
package textfiletest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
)

const nodeExporter = "/usr/bin/prometheus-node-exporter" // Debian's prometheus-node-exporter

// Exposition reads the text format into series (name{labels}) → value,
// and HELP lines by name.
func Exposition(t testing.TB, text string) (map[string]float64, map[string]string) {
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

// StartNodeExporter runs Debian's node_exporter with only the textfile
// collector on a free loopback port, stopped at the end of the test, and
// returns its /metrics URL once it answers.
func StartNodeExporter(t testing.TB, dir string) string {
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

// Scrape GETs url and returns the body.
func Scrape(t testing.TB, url string) string {
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
