package calldiff

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fuzzBundle writes a bundle holding log as kernel-api.log, sw as
// software.json and tri as the manifest's triage (when it is JSON).
func fuzzBundle(t *testing.T, log, sw, tri []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kcrash-fuzz.tar.gz")
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	mj := []byte(`{"schema_version":1,"command":["sh"],"triage":null}`)
	if len(tri) > 0 {
		mj = append(append([]byte(`{"schema_version":1,"command":["sh"],"triage":`), tri...), '}')
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"kernel-api.log", log}, {"software.json", sw}, {"manifest.json", mj}} {
		tw.WriteHeader(&tar.Header{Name: "kcrash-fuzz/" + f.name, Mode: 0o600, Size: int64(len(f.data)), Typeflag: tar.TypeReg})
		tw.Write(f.data)
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzSources feeds diff's two sources untrusted text: a kernel-API log
// (plain and gzipped) against a bundle's sectioned kernel-api.log, its
// software.json and its triage. Whatever they hold, the comparison ends,
// never panics, and its text has no raw control character.
//
//	go test ./calldiff -run '^$' -fuzz FuzzSources -fuzztime 30s
func FuzzSources(f *testing.F) {
	good := model([]int{4, 1, 1}, false, false, -1)
	bad := "==> /w/sglang_kernel_api_300.log <==\n" + model([]int{4, 1, 288}, true, true, 1) + "==> /w/x.log: permission denied <==\n"
	f.Add([]byte(good), []byte(bad), []byte(`{"python":[]}`), []byte(`{"verdict":{"kind":"gpu_fault"}}`))
	f.Add([]byte("==> \n==> a <==\n==> b (last 1 of 2 bytes) <=="), []byte("==> "+strings.Repeat("x", 300)+" <==\n\x1b[2J"), []byte(`[`), []byte(`"x"`))
	f.Fuzz(func(t *testing.T, logA, logB, sw, tri []byte) {
		hung := time.AfterFunc(10*time.Second, func() {
			panic(fmt.Sprintf("hung on %q / %q / %q / %q", logA, logB, sw, tri))
		})
		defer hung.Stop()
		a := filepath.Join(t.TempDir(), "kapi_1.log")
		if err := os.WriteFile(a, logA, 0o600); err != nil {
			t.Fatal(err)
		}
		az := filepath.Join(t.TempDir(), "kapi_2.log.gz")
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(logA)
		zw.Close()
		if err := os.WriteFile(az, zb.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		b := fuzzBundle(t, logB, sw, tri)
		for _, pair := range [][2]string{{a, b}, {b, az}, {b, b}} {
			start := time.Now()
			r, err := Compare(pair[0], pair[1], Options{Window: 50, MaxLogBytes: 1 << 20})
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("%s against %s took %v", filepath.Base(pair[0]), filepath.Base(pair[1]), d)
			}
			if err != nil {
				continue // a refusal is an answer; a panic or a hang is not
			}
			var out strings.Builder
			WriteText(&out, r, func(s string) string {
				return strings.Map(func(r rune) rune {
					if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f {
						return '?'
					}
					return r
				}, s)
			})
			if i := strings.IndexAny(out.String(), "\x1b\x07\x00"); i >= 0 {
				t.Fatalf("raw control in the text at %d: %q", i, out.String()[max(i-40, 0):min(i+40, out.Len())])
			}
		}
	})
}
