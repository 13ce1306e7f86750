package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/s3test"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/upload/uploadtest"
)

// runS3 runs the real kcrash binary on a crashing child with --upload to
// target, the SDK finding the test server and the given key.
func runS3(t *testing.T, srv *s3test.Server, target, keyID, secret string) (out, stderr string) {
	t.Helper()
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	out = t.TempDir()
	cmd := exec.Command(bin, "run", "-q", "--out", out, "--skip-collectors", skipSlow(), "--upload", target, "--",
		"sh", "-c", `echo "RuntimeError: CUDA error: an illegal memory access was encountered" >&2; kill -SEGV $$`)
	cmd.Env = append(os.Environ(), "KCRASH_CONFIG=", "XDG_CONFIG_HOME="+t.TempDir())
	for k, v := range srv.Env(t, keyID, secret) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	// The upload changes nothing of the run: kcrash dies of the child's signal.
	if _, ok := err.(*exec.ExitError); !ok || exitStatus(cmd) != 128+11 {
		t.Fatalf("exit %v, want 139\nstderr:\n%s", err, errb.String())
	}
	if strings.Contains(errb.String(), secret) {
		t.Errorf("stderr holds the secret:\n%s", errb.String())
	}
	return out, errb.String()
}

// `kcrash run --upload s3://bucket/prefix` of a real crash: the bundle is
// in the bucket byte for byte, signed with the environment's key.
func TestRunUploadS3(t *testing.T) {
	srv := s3test.Need(t)
	bucket := srv.Bucket(t)
	out, stderr := runS3(t, srv, "s3://"+bucket+"/runs", "KCRASHRUNKEY", "run-secret-value-3")
	b := oneBundle(t, out).Path
	key := "runs/" + filepath.Base(b)
	want, _ := os.ReadFile(b)
	if got := srv.Objects(t, bucket); len(got) != 1 || !bytes.Equal(got[key], want) {
		t.Fatalf("bucket holds %d objects; want %s byte for byte\nstderr:\n%s", len(got), key, stderr)
	}
	if !strings.Contains(stderr, "kcrash: s3://"+bucket+"/runs/: put id ") || !strings.Contains(stderr, "s3://"+bucket+"/"+key) {
		t.Errorf("stderr:\n%s", stderr)
	}
	rs := srv.Requests(t, bucket)
	if !s3test.Has(rs, "PUT", "KCRASHRUNKEY") {
		t.Errorf("no PUT signed with the environment's key: %+v", rs)
	}
	for _, r := range rs {
		if r.AccessKey != "KCRASHRUNKEY" && r.AccessKey != s3test.OwnerKey {
			t.Errorf("%s %s signed by %q", r.Method, r.Path, r.AccessKey)
		}
	}
}

// A bucket that does not exist: one line says so, the child's status still
// propagates (runS3 checks 139), and the bundle stays on disk.
func TestRunUploadS3NoSuchBucket(t *testing.T) {
	srv := s3test.Need(t)
	out, stderr := runS3(t, srv, "s3://kcrash-no-such-bucket/runs", "KCRASHRUNKEY", "run-secret-value-3")
	oneBundle(t, out)
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "kcrash-no-such-bucket") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "kcrash: upload: s3://kcrash-no-such-bucket/runs/: PUT ") || !strings.Contains(lines[0], "NoSuchBucket") {
		t.Errorf("want one line naming NoSuchBucket; stderr:\n%s", stderr)
	}
}

func TestUploadToS3(t *testing.T) {
	srv := s3test.Need(t)
	bucket := srv.Bucket(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	code, stdout, stderr := runUploadS3(t, srv, "upload", b, "--to", "s3://"+bucket+"/p")
	want := "s3://" + bucket + "/p/: put id "
	if code != 0 || !strings.HasPrefix(stdout, want) || !strings.HasSuffix(strings.TrimSpace(stdout), " s3://"+bucket+"/p/"+filepath.Base(b)) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runUploadS3(t, srv, "upload", b, "--to", "s3://"+bucket+"/p")
	if code != 0 || !strings.Contains(stdout, "(already there, not added again)") {
		t.Errorf("rerun: exit %d, stdout %q", code, stdout)
	}
}

func runUploadS3(t *testing.T, srv *s3test.Server, args ...string) (int, string, string) {
	t.Helper()
	srv.SetEnv(t, "KCRASHCLIKEY", "cli-secret-value-4")
	return runUpload(t, nil, args...)
}

// s3Fleet puts fleetDir's bundles into a bucket under fleet/, at the same
// relative paths.
func s3Fleet(t *testing.T, srv *s3test.Server, now time.Time) (dir, bucket string) {
	t.Helper()
	dir = fleetDir(t, now)
	bucket = srv.Bucket(t)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err == nil {
			srv.Put(t, bucket, "fleet/"+filepath.ToSlash(rel), data)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, bucket
}

func bucketsJSON(t *testing.T, index string, sources ...string) (bucketsReport, string) {
	t.Helper()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	io, out, errOut := iostreams.Test()
	o := &bucketsOptions{IO: io, sources: sources, since: days(7 * 24 * time.Hour), window: days(7 * 24 * time.Hour), k: 3, m: 3, n: 2,
		asJSON: true, index: index, now: now.Format(time.RFC3339)}
	if err := runBuckets(context.Background(), o); err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var rep bucketsReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	return rep, out.String()
}

// `kcrash buckets s3://bucket/prefix` says what it says over the same
// bundles in a directory, to the byte.
func TestBucketsS3SameAsDirectory(t *testing.T) {
	srv := s3test.Need(t)
	srv.SetEnv(t, "KCRASHREADKEY", "read-secret-value-5")
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	dir, bucket := s3Fleet(t, srv, now)
	srv.Put(t, bucket, "fleet/notes.txt", []byte("not a bundle: not listed"))
	fromDir, dirJSON := bucketsJSON(t, "", dir)
	_, s3JSON := bucketsJSON(t, "", "s3://"+bucket+"/fleet")
	if fromDir.Read != 4 || len(fromDir.Buckets) != 2 {
		t.Fatalf("directory: read %d, %d buckets", fromDir.Read, len(fromDir.Buckets))
	}
	if s3JSON != dirJSON {
		t.Errorf("over S3:\n%s\nover the directory:\n%s", s3JSON, dirJSON)
	}
	if !s3test.Has(srv.Requests(t, bucket), "GET", "KCRASHREADKEY") {
		t.Errorf("no GET signed with the environment's key")
	}
}

// With --index, a second run over the same prefix downloads nothing, and a
// third reads only the object added since.
func TestBucketsS3IndexIncremental(t *testing.T) {
	srv := s3test.Need(t)
	srv.SetEnv(t, "KCRASHREADKEY", "read-secret-value-5")
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	_, bucket := s3Fleet(t, srv, now)
	idx := filepath.Join(t.TempDir(), "fleet.db")
	src := "s3://" + bucket + "/fleet/"
	first, _ := bucketsJSON(t, idx, src)
	if first.Read != 4 || first.Skipped != 0 {
		t.Fatalf("first run: read %d skipped %d", first.Read, first.Skipped)
	}
	gets := func() int {
		n := 0
		for _, r := range srv.Requests(t, bucket) {
			if r.Method == "GET" && strings.HasSuffix(r.Path, ".tar.gz") {
				n++
			}
		}
		return n
	}
	before := gets()
	second, _ := bucketsJSON(t, idx, src)
	if second.Read != 0 || second.Skipped != 4 || gets() != before || second.Bundles != 4 {
		t.Fatalf("second run: read %d skipped %d bundles %d, %d downloads", second.Read, second.Skipped, second.Bundles, gets()-before)
	}
	extra := t.TempDir()
	hip := fleettest.Corpus(t, testcorpus.Dir(t), "2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	fleettest.Write(t, fleettest.Spec{Out: extra, Host: "gpu-04", Time: now.Add(-2 * time.Hour), Job: "43", Log: hip,
		Stack: map[string]string{"sglang": "0.5.3"}, Seed: 99})
	p, _ := filepath.Glob(filepath.Join(extra, "kcrash-*.tar.gz"))
	data, err := os.ReadFile(p[0])
	if err != nil {
		t.Fatal(err)
	}
	srv.Put(t, bucket, "fleet/gpu-04/"+filepath.Base(p[0]), data)
	third, _ := bucketsJSON(t, idx, src)
	if third.Read != 1 || third.Skipped != 4 || third.Bundles != 5 || gets() != before+1 {
		t.Fatalf("third run: read %d skipped %d bundles %d, %d downloads", third.Read, third.Skipped, third.Bundles, gets()-before)
	}
}
