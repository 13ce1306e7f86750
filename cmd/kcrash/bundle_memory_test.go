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

	"github.com/kcrash/kcrash/bundle"
)

// floodBundle writes a bundle of n empty entries with names of nameLen
// bytes (PAX records), then full files (8 MiB each, the most a reader
// keeps of one), then a valid manifest.
func floodBundle(t *testing.T, p string, n, nameLen, full int) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	for i := range n {
		id := fmt.Sprintf("f%d-", i)
		name := "kcrash-flood/" + id + strings.Repeat("n", max(nameLen-len("kcrash-flood/")-len(id), 1))
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
	}
	line := []byte(strings.Repeat("a line of output ", 7) + "\n")
	for i := range full {
		const size = 8 << 20
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("kcrash-flood/raw/full-%d.log", i), Mode: 0o600, Size: size, Typeflag: tar.TypeReg})
		for n := 0; n < size; n += len(line) {
			tw.Write(line[:min(len(line), size-n)])
		}
	}
	mj := []byte(`{"schema_version":1,"command":["sh"]}`)
	tw.WriteHeader(&tar.Header{Name: "kcrash-flood/manifest.json", Mode: 0o600, Size: int64(len(mj)), Typeflag: tar.TypeReg})
	tw.Write(mj)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

// peakRSS runs kcrash and returns its exit status, stderr and peak
// resident memory in bytes. Through GNU time where there is one: a child
// this process starts is a vfork whose maxrss starts at this process's own
// RSS, so without it the figure is an upper bound.
func peakRSS(t *testing.T, args ...string) (int, string, int64) {
	t.Helper()
	var cmd *exec.Cmd
	timeOut := filepath.Join(t.TempDir(), "maxrss")
	gnuTime, err := exec.LookPath("/usr/bin/time")
	if err == nil {
		cmd = exec.Command(gnuTime, append([]string{"-o", timeOut, "-f", "%M", kcrashBin(t)}, args...)...)
	} else {
		cmd = exec.Command(kcrashBin(t), args...)
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
		floodBundle(t, p, c.n, c.name, c.full)
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
