package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// A bundle that kcrash run writes carries its signature, and `kcrash
// signature` gives the same one for the bundle and for the log alone.
func TestSignatureRunBundleAndLog(t *testing.T) {
	noUserConfig(t)
	log := filepath.Join(testcorpus.Dir(t), "2-rocm-userspace-fault", "torch-acceleratorerror-hip-illegal-address.txt")
	out := t.TempDir()
	io, _, _ := iostreams.Test()
	o := &runOptions{IO: io, args: []string{"sh", "-c", "cat " + log + "; exit 1"}, profile: "none", level: 3, collect: "crash",
		noPty: true, ring: 1 << 20, collectorTimeout: 5 * time.Second, hangAction: "stop", sampleInterval: 100 * time.Millisecond,
		workdir: t.TempDir(), quiet: true, out: out, collectors: "host,output"}
	var ee *exitError
	if err := runRun(context.Background(), o); !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("run: %v", err)
	}
	bundles, _ := filepath.Glob(filepath.Join(out, "kcrash-*.tar.gz"))
	if len(bundles) != 1 {
		t.Fatalf("%d bundles", len(bundles))
	}
	b, err := bundle.Open(bundles[0])
	if err != nil {
		t.Fatal(err)
	}
	stored := b.Manifest.Signature
	if stored == nil || stored.Version != 1 || len(stored.Fine) != 16 || !strings.Contains(stored.Title, "hipErrorIllegalAddress") {
		t.Fatalf("manifest signature %+v", stored)
	}

	io, outb, _ := iostreams.Test()
	if err := runSignature(&signatureOptions{IO: io, files: []string{bundles[0], log}, asJSON: true, year: 2026}); err != nil {
		t.Fatal(err)
	}
	var got []signatureOf
	if err := json.Unmarshal(outb.Bytes(), &got); err != nil || len(got) != 2 {
		t.Fatalf("%v: %s", err, outb)
	}
	if got[0].Same == nil || !*got[0].Same || got[0].Stored == nil || got[0].Signature.Fine != stored.Fine {
		t.Errorf("bundle: %+v", got[0])
	}
	if got[1].Stored != nil || got[1].Signature.Fine != stored.Fine || got[1].Signature.Title != stored.Title {
		t.Errorf("the log alone: %+v, the bundle: %+v", got[1].Signature, stored)
	}

	io, outb, _ = iostreams.Test()
	if err := runSignature(&signatureOptions{IO: io, files: []string{log}, year: 2026}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(outb.String(), "  fine:   "+stored.Fine+"\n") {
		t.Errorf("text output:\n%s", outb)
	}
	io, _, _ = iostreams.Test()
	if err := runSignature(&signatureOptions{IO: io, files: []string{filepath.Join(t.TempDir(), "none.log")}}); err == nil {
		t.Error("an unreadable input: no error")
	}
}

// --table computes every signature again with another normalisation table
// and says which changed: the built-in table's own copy changes none, the
// table without its "addr" row changes the signatures whose keys held an
// address, and only those.
func TestSignatureTableDiff(t *testing.T) {
	noUserConfig(t)
	logs, _ := filepath.Glob(filepath.Join(testcorpus.Dir(t), "*", "*.txt"))
	if len(logs) < 50 {
		t.Fatalf("%d corpus logs", len(logs))
	}
	orig, err := os.ReadFile("../../configs/normalize.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	same := filepath.Join(dir, "same.yaml")
	os.WriteFile(same, orig, 0o644)
	i := bytes.Index(orig, []byte("\n  - name: addr\n"))
	j := bytes.Index(orig[i+1:], []byte("\n  - name: "))
	if i < 0 || j < 0 {
		t.Fatal("no addr row in configs/normalize.yaml")
	}
	noAddr := filepath.Join(dir, "no-addr.yaml")
	os.WriteFile(noAddr, append(append([]byte{}, orig[:i]...), orig[i+1+j:]...), 0o644)

	run := func(table string) []signatureOf {
		t.Helper()
		io, out, _ := iostreams.Test()
		if err := runSignature(&signatureOptions{IO: io, files: logs, asJSON: true, year: 2026, table: table}); err != nil {
			t.Fatal(err)
		}
		var got []signatureOf
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != len(logs) {
			t.Fatalf("%v: %d", err, len(got))
		}
		return got
	}
	for _, g := range run(same) {
		if g.TableSame == nil || !*g.TableSame {
			t.Errorf("%s changed under the same table", g.File)
		}
	}
	changed := 0
	for _, g := range run(noAddr) {
		holdsAddr := strings.Contains(g.Signature.Key, "<addr>")
		if *g.TableSame == holdsAddr {
			t.Errorf("%s: same %v, but its key %q", g.File, *g.TableSame, g.Signature.Key)
		}
		if !*g.TableSame {
			changed++
		}
	}
	if changed == 0 {
		t.Error("no signature changed without the addr row")
	}
	io, out, _ := iostreams.Test()
	if err := runSignature(&signatureOptions{IO: io, files: logs[:3], year: 2026, table: noAddr}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "3 inputs: ") || !strings.Contains(out.String(), "  old:    ") {
		t.Errorf("text:\n%s", out)
	}
	var ue *usageError
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte("rows:\n  - name: Bad Name\n    pattern: x\n"), 0o644)
	if err := runSignature(&signatureOptions{IO: io, files: logs[:1], table: broken}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "broken.yaml: line 2") {
		t.Errorf("a broken table: %v", err)
	}
}
