package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gzBomb writes a real kernel-API log, gzipped, followed by gzip members
// holding size bytes of a line repeated (a concatenated gzip reads as one
// stream): a small file that decompresses to size bytes and more.
func gzBomb(t *testing.T, p string, size int64) {
	t.Helper()
	head, err := os.ReadFile("../../kernelapi/testdata/fi-level5-decode-nan.log")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	gz.Write(head)
	gz.Close()
	const member = 64 << 20
	line := []byte("padding line of a log that goes on\n")
	var one bytes.Buffer
	gz, _ = gzip.NewWriterLevel(&one, gzip.BestCompression)
	gz.Write(bytes.Repeat(line, member/len(line)))
	gz.Close()
	for n := int64(0); n < size; n += member {
		f.Write(one.Bytes())
	}
}

// A .gz log is decompressed up to --max-log-bytes (1 GiB unless set), then
// diff and triage stop with one line naming the file, the limit and the
// flag, instead of reading a bomb for minutes.
func TestGzipLogCap(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small-bomb.log.gz")
	gzBomb(t, small, 64<<20)
	big := filepath.Join(dir, "big-bomb.log.gz")
	gzBomb(t, big, 1<<30+1)
	if fi, _ := os.Stat(big); fi.Size() > 8<<20 {
		t.Fatalf("the bomb is %d bytes", fi.Size())
	}
	plain := "../../kernelapi/testdata/fi-level5-decode-nan.log"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", "--max-log-bytes", "8MiB", small, plain}, "small-bomb.log.gz: more than 8MiB once decompressed (--max-log-bytes raises the limit)"},
		{[]string{"diff", plain, big}, "big-bomb.log.gz: more than 1GiB once decompressed (--max-log-bytes raises the limit)"},
		{[]string{"triage", "--max-log-bytes", "8MiB", "--kernel-api-log", small}, "small-bomb.log.gz: more than 8MiB once decompressed (--max-log-bytes raises the limit)"},
		{[]string{"triage", "--max-log-bytes", "8MiB", "--log", small}, "small-bomb.log.gz: more than 8MiB once decompressed (--max-log-bytes raises the limit)"},
		{[]string{"triage", "--max-log-bytes", "8MiB", small}, "small-bomb.log.gz: more than 8MiB once decompressed (--max-log-bytes raises the limit)"},
	} {
		r := runKcrash(t, 5*time.Minute, nil, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("kcrash %v: exit %d, took %s, stderr %q; want one line with %q", c.args, r.code, r.took, r.stderr, c.want)
		}
	}
	// under the limit, the same log compares
	if r := runKcrash(t, time.Minute, nil, "diff", "--max-log-bytes", "1GiB", small, plain); r.code != 0 {
		t.Errorf("diff under the limit: exit %d, %s", r.code, r.stderr)
	}
}
