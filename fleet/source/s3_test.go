package source

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/internal/s3test"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

// A prefix of more objects than a page lists them all, page by page; the
// bundles and a tarball of bundles are read and named by their s3:// URL;
// what is not a bundle by its name is not fetched; a damaged object is
// noted, not fatal.
func TestWalkS3Paginated(t *testing.T) {
	srv := s3test.Need(t)
	srv.SetEnv(t, "KCRASHWALKKEY", "walk-secret-value-6")
	bucket := srv.Bucket(t)
	dir := t.TempDir()
	hip := fleettest.Corpus(t, testcorpus.Dir(t), "2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		fleettest.Write(t, fleettest.Spec{Out: dir, Host: "gpu-0" + string(rune('1'+i)), Time: now.Add(-time.Duration(i) * time.Hour), Log: hip, Seed: uint64(i + 1)})
	}
	files, _ := filepath.Glob(filepath.Join(dir, "kcrash-*.tar.gz"))
	for _, p := range files[:2] {
		data, _ := os.ReadFile(p)
		srv.Put(t, bucket, "fleet/"+filepath.Base(p), data)
	}
	tarball := tarOf(t, filepath.Join(t.TempDir(), "day.tgz"), files[2])
	data, _ := os.ReadFile(tarball)
	srv.Put(t, bucket, "fleet/archive/day.tgz", data)
	srv.Put(t, bucket, "fleet/broken.tar.gz", []byte("not gzip"))
	srv.Put(t, bucket, "fleet/README.txt", []byte("not a bundle"))
	srv.Put(t, bucket, "other/"+filepath.Base(files[0]), []byte("outside the prefix"))

	listPageSize = 2
	t.Cleanup(func() { listPageSize = 0 })
	var sums []index.Summary
	var marked []string
	st, err := Walk{
		Put:  func(s []index.Summary) error { sums = append(sums, s...); return nil },
		Mark: func(p string, _ index.Stamp) error { marked = append(marked, p); return nil },
	}.Run(context.Background(), []string{"s3://" + bucket + "/fleet"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Read != 3 || len(st.Errors) != 1 || !strings.HasPrefix(st.Errors[0], "s3://"+bucket+"/fleet/broken.tar.gz") {
		t.Fatalf("read %d, errors %q", st.Read, st.Errors)
	}
	var paths []string
	for _, s := range sums {
		paths = append(paths, s.Path)
	}
	sort.Strings(paths)
	want := []string{"s3://" + bucket + "/fleet/" + filepath.Base(files[0]), "s3://" + bucket + "/fleet/" + filepath.Base(files[1]),
		"s3://" + bucket + "/fleet/archive/day.tgz//day/" + filepath.Base(files[2])}
	sort.Strings(want)
	if strings.Join(paths, "\n") != strings.Join(want, "\n") {
		t.Errorf("paths:\n%s\nwant:\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	lists := 0
	for _, r := range srv.Requests(t, bucket) {
		if r.Method == "GET" && r.AccessKey == "KCRASHWALKKEY" && (r.Path == "/"+bucket || r.Path == "/"+bucket+"/") {
			lists++
		}
		if strings.HasSuffix(r.Path, "README.txt") && r.AccessKey != s3test.OwnerKey {
			t.Errorf("fetched %s", r.Path)
		}
	}
	if lists < 3 {
		t.Errorf("%d LIST pages for 5 objects at 2 a page", lists)
	}
	if len(marked) != 3 {
		t.Errorf("marked %q; the broken object must be tried again next time", marked)
	}
}
