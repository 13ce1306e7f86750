package source

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/crashsig"
	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// tarOf packs files into a .tar.gz of bundles, as a site archives a day's.
func tarOf(t *testing.T, out string, files ...string) string {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Name: "day/" + filepath.Base(p), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	f.Close()
	return out
}

func collect(t *testing.T, w Walk, srcs ...string) ([]index.Summary, Stats) {
	t.Helper()
	var got []index.Summary
	w.Put = func(s []index.Summary) error { got = append(got, s...); return nil }
	st, err := w.Run(context.Background(), srcs)
	if err != nil {
		t.Fatal(err)
	}
	return got, st
}

// Bundles in a directory tree and in a tarball are summarised: host, job,
// rank, the GPU the kernel named (UUID first), the software stack; a bundle
// without a stored signature gets one computed, equal to the stored one of
// the same bug.
func TestWalkDirectoryAndTarball(t *testing.T) {
	corpus := testcorpus.Dir(t)
	xid31 := fleettest.Corpus(t, corpus, "3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt")
	amd := fleettest.Corpus(t, corpus, "1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt")
	dir := t.TempDir()
	sub := filepath.Join(dir, "node-b")
	os.MkdirAll(sub, 0o755)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	stack := map[string]string{"torch": "2.9.1", "sglang": "0.5.3", "nvidia-driver": "570.158.01"}
	a := fleettest.Write(t, fleettest.Spec{Out: dir, Host: "node-a", Time: now, Job: "77", Rank: 3, LocalRank: 3, Log: xid31,
		BusID: "0000:9b:00.0", UUID: "GPU-11111111-2222-3333-4444-555555555555", Stack: stack, Kernel: "6.8.0", Seed: 1})
	fleettest.Write(t, fleettest.Spec{Out: sub, Host: "node-b", Time: now.Add(time.Hour), Job: "77", Rank: 9, LocalRank: 1, Log: amd,
		BusID: "0000:c6:00.0", Stack: stack, Seed: 2, NoSignature: true})
	os.WriteFile(filepath.Join(dir, "junk.tar.gz"), []byte("not a bundle"), 0o644)

	got, st := collect(t, Walk{}, dir)
	if len(got) != 2 || st.Read != 2 || st.Recomputed != 1 || len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "junk.tar.gz") {
		t.Fatalf("%d summaries, stats %+v", len(got), st)
	}
	byHost := map[string]index.Summary{}
	for _, s := range got {
		byHost[s.Host] = s
	}
	x := byHost["node-a"]
	if x.Job != "77" || x.Rank != "3" || x.SigVersion != crashsig.Version || x.Recomputed || !x.Time.Equal(now) ||
		x.Stack["sglang"] != "0.5.3" || x.Stack["nvidia-driver"] != "570.158.01" || x.Stack["kernel"] != "6.8.0" {
		t.Errorf("node-a: %+v", x)
	}
	if len(x.GPUs) != 1 || x.GPUs[0].ID != "GPU-11111111-2222-3333-4444-555555555555" || x.GPUs[0].BusID != "0000:9b:00.0" || x.GPUs[0].Name != "Test GPU" {
		t.Errorf("node-a GPUs: %+v", x.GPUs)
	}
	y := byHost["node-b"]
	if !y.Recomputed || y.Fine == "" || len(y.GPUs) != 1 || y.GPUs[0].ID != "node-b/0000:c6:00.0" || y.GPUs[0].Guessed {
		t.Errorf("node-b: %+v", y)
	}
	// The recomputed signature is the one kcrash stores for the same bug.
	z := fleettest.Write(t, fleettest.Spec{Out: t.TempDir(), Host: "node-c", Time: now, Log: amd, BusID: "0000:0e:00.0", Seed: 3})
	zs, _ := collect(t, Walk{}, z)
	if zs[0].Recomputed || zs[0].Fine != y.Fine {
		t.Errorf("stored %s (recomputed %v), recomputed elsewhere %s", zs[0].Fine, zs[0].Recomputed, y.Fine)
	}

	// A tarball of bundles reads as its bundles.
	tb := tarOf(t, filepath.Join(t.TempDir(), "day.tar.gz"), a, z)
	got, st = collect(t, Walk{}, tb)
	if len(got) != 2 || st.Read != 2 || !strings.HasPrefix(got[0].Path, tb+"//day/kcrash-") {
		t.Fatalf("tarball: %d, %+v, %+v", len(got), st, got)
	}
	// A named source that is not a bundle is an error; a missing one too.
	if _, err := (Walk{Put: func([]index.Summary) error { return nil }}).Run(context.Background(), []string{filepath.Join(dir, "junk.tar.gz")}); err == nil {
		t.Error("junk named on the command line: no error")
	}
	if _, err := (Walk{Put: func([]index.Summary) error { return nil }}).Run(context.Background(), []string{filepath.Join(dir, "none")}); err == nil {
		t.Error("a missing source: no error")
	}
}

// With Seen and Mark, a second walk opens nothing it read before, and a
// bundle added since is the only one read.
func TestWalkIncremental(t *testing.T) {
	corpus := testcorpus.Dir(t)
	amd := fleettest.Corpus(t, corpus, "1-amdgpu-page-fault/gmc9-gfxhub0-no-retry-pt_main_thread.txt")
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 3 {
		fleettest.Write(t, fleettest.Spec{Out: dir, Host: "n" + string(rune('a'+i)), Time: now, Log: amd, Seed: uint64(i)})
	}
	seen := map[string]index.Stamp{}
	w := Walk{
		Seen: func(p string, st index.Stamp) bool { old, ok := seen[p]; return ok && old == st },
		Mark: func(p string, st index.Stamp) error { seen[p] = st; return nil },
	}
	got, st := collect(t, w, dir)
	if len(got) != 3 || st.Skipped != 0 {
		t.Fatalf("first walk: %d, %+v", len(got), st)
	}
	newest := fleettest.Write(t, fleettest.Spec{Out: dir, Host: "nz", Time: now, Log: amd, Seed: 9})
	// Reading the old bundles again would fail now: make them unreadable
	// garbage of the same size and time, so only the stamp can skip them.
	for p, stamp := range seen {
		data := make([]byte, stamp.Size)
		os.WriteFile(p, data, 0o644)
		mt := time.Unix(0, stamp.MTime)
		os.Chtimes(p, mt, mt)
	}
	got, st = collect(t, w, dir)
	if len(got) != 1 || got[0].Path != newest || st.Skipped != 3 || st.Read != 1 || len(st.Errors) != 0 {
		t.Fatalf("second walk: %+v, %+v", got, st)
	}
}

// A bundle whose manifest holds a signature of another version is
// summarised under this version's, remembering the old one, and Changes
// maps the old key to the new.
func TestSummarizeRemembersOlderSignature(t *testing.T) {
	corpus := testcorpus.Dir(t)
	dir := t.TempDir()
	log := fleettest.Corpus(t, corpus, "2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	old := &bundle.Signature{Version: crashsig.Version + 1, Fine: "00000000deadbeef", Coarse: "c", Title: "from another kcrash"}
	fleettest.Write(t, fleettest.Spec{Out: dir, Host: "a", Time: now, Log: log, Stored: old, Seed: 1})
	fleettest.Write(t, fleettest.Spec{Out: dir, Host: "b", Time: now, Log: log, Seed: 2})
	got, st := collect(t, Walk{}, dir)
	if len(got) != 2 || st.Recomputed != 1 {
		t.Fatalf("%d summaries, %d recomputed", len(got), st.Recomputed)
	}
	want := index.SigKey(old.Version, old.Fine)
	var mapped, current *index.Summary
	for i := range got {
		if got[i].Host == "a" {
			mapped = &got[i]
		} else {
			current = &got[i]
		}
	}
	if mapped.SigVersion != crashsig.Version || mapped.Fine != current.Fine || len(mapped.Previous) != 1 || mapped.Previous[0] != want || len(current.Previous) != 0 {
		t.Errorf("mapped %+v\ncurrent %+v", mapped, current)
	}
	ch := Changes(got)
	if len(ch) != 1 || ch[0].Old != want || ch[0].Bundles != 1 || ch[0].New[current.Key()] != 1 {
		t.Errorf("changes %+v", ch)
	}
}

func TestSourceFile(t *testing.T) {
	for in, want := range map[string]string{"/b/x.tar.gz": "/b/x.tar.gz", "/b/day.tgz//day/x.tar.gz": "/b/day.tgz",
		"s3://bk/p/x.tar.gz": "s3://bk/p/x.tar.gz", "s3://bk/p/day.tar//day/x.tar.gz": "s3://bk/p/day.tar"} {
		if got := sourceFile(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
