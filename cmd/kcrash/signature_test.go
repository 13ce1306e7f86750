package main

import (
	"context"
	"encoding/json"
	"errors"
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
