package upload

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/s3test"
	"github.com/kcrash/kcrash/upload/uploadtest"
)

func s3Opts() Options {
	return Options{Env: func(string) string { return "" }, Retry: Retry{InitialInterval: time.Millisecond, MaxTries: 2}, StallTimeout: 10 * time.Second}
}

func TestParseS3Target(t *testing.T) {
	for in, want := range map[string]string{
		"s3://b":         "s3://b/",
		"s3://b/":        "s3://b/",
		"s3://b/nightly": "s3://b/nightly/",
		"s3://b/a/b/":    "s3://b/a/b/",
		"S3://b/x":       "s3://b/x/",
	} {
		tg, err := ParseTarget(in)
		if err != nil || tg.Kind != S3 || tg.String() != want {
			t.Errorf("%s: %+v %v, want %s", in, tg, err, want)
		}
	}
	for _, bad := range []string{"s3://", "s3:///x", "s3://AKID:secret@b/x", "s3://b/x?X-Amz-Signature=abc"} {
		_, err := ParseTarget(bad)
		if err == nil {
			t.Errorf("%s: accepted", bad)
		} else if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "abc") {
			t.Errorf("%s: the error repeats a credential: %v", bad, err)
		}
	}
}

// The object lands at prefix/NAME byte for byte, signed with the key the
// environment gives; a second upload of the same bundle adds nothing.
func TestS3UploadCredentialsFromEnv(t *testing.T) {
	srv := s3test.Need(t)
	srv.SetEnv(t, "KCRASHENVKEY", "env-secret-value-1")
	bucket := srv.Bucket(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	res, err := Do(context.Background(), b, "s3://"+bucket+"/nightly/node1", s3Opts())
	if err != nil {
		t.Fatal(err)
	}
	key := "nightly/node1/" + filepath.Base(b)
	want, _ := os.ReadFile(b)
	objs := srv.Objects(t, bucket)
	if len(objs) != 1 || !bytes.Equal(objs[key], want) {
		t.Fatalf("bucket holds %d objects, want %s byte for byte", len(objs), key)
	}
	if res.Attachment == nil || res.Attachment.URL != "s3://"+bucket+"/"+key || res.Attachment.Reused {
		t.Errorf("result %+v", res.Attachment)
	}
	var puts []string
	for _, r := range srv.Requests(t, bucket) {
		if r.Method == "PUT" && r.Path != "/"+bucket { // not the test's own CreateBucket
			puts = append(puts, r.AccessKey)
		}
	}
	if len(puts) != 1 || puts[0] != "KCRASHENVKEY" {
		t.Errorf("PUTs signed by %q, want one by KCRASHENVKEY", puts)
	}
	again, err := Do(context.Background(), b, "s3://"+bucket+"/nightly/node1/", s3Opts())
	if err != nil || again.Attachment == nil || !again.Attachment.Reused {
		t.Fatalf("second upload: %+v %v", again, err)
	}
	if n := len(srv.Objects(t, bucket)); n != 1 {
		t.Errorf("%d objects after the rerun", n)
	}
}

// With no key in the environment the SDK's chain reads the shared
// credentials file, and the server sees that file's key.
func TestS3UploadCredentialsFromSharedFile(t *testing.T) {
	srv := s3test.Need(t)
	srv.SetEnv(t, "", "")
	creds := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = KCRASHFILEKEY\naws_secret_access_key = file-secret-value-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	bucket := srv.Bucket(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	if _, err := Do(context.Background(), b, "s3://"+bucket, s3Opts()); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Objects(t, bucket)[filepath.Base(b)]; !ok {
		t.Fatalf("no object %s at the bucket's root", filepath.Base(b))
	}
	for _, r := range srv.Requests(t, bucket) {
		if r.Method != "GET" && r.AccessKey != "KCRASHFILEKEY" && r.AccessKey != s3test.OwnerKey {
			t.Errorf("%s %s signed by %q, want KCRASHFILEKEY", r.Method, r.Path, r.AccessKey)
		}
	}
	if got := srv.Requests(t, bucket); !s3test.Has(got, "PUT", "KCRASHFILEKEY") {
		t.Errorf("no PUT signed with the file's key: %+v", got)
	}
}

// Another bundle under the same name is refused, and the object stays as
// it was.
func TestS3UploadNeverOverwrites(t *testing.T) {
	srv := s3test.Need(t)
	srv.SetEnv(t, "KCRASHENVKEY", "env-secret-value-1")
	bucket := srv.Bucket(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	other := []byte("an object someone else wrote")
	srv.Put(t, bucket, "p/"+filepath.Base(b), other)
	_, err := Do(context.Background(), b, "s3://"+bucket+"/p", s3Opts())
	if err == nil || !strings.Contains(err.Error(), "exists and is another object; not overwriting it") {
		t.Fatalf("err %v", err)
	}
	if got := srv.Objects(t, bucket)["p/"+filepath.Base(b)]; !bytes.Equal(got, other) {
		t.Errorf("the object was replaced: %q", got)
	}
}

// A bucket that does not exist is one line that says so, where, and names
// no credential.
func TestS3UploadNoSuchBucket(t *testing.T) {
	srv := s3test.Need(t)
	srv.SetEnv(t, "KCRASHENVKEY", "env-secret-value-1")
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	_, err := Do(context.Background(), b, "s3://kcrash-no-such-bucket/x", s3Opts())
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "NoSuchBucket") || !strings.Contains(msg, srv.Endpoint) ||
		!strings.HasPrefix(msg, "s3://kcrash-no-such-bucket/x/: PUT s3://kcrash-no-such-bucket/x/") || strings.Contains(msg, "retry") {
		t.Errorf("error %q", msg)
	}
	if strings.Contains(msg, "env-secret-value-1") || strings.Contains(msg, "KCRASHENVKEY") {
		t.Errorf("a credential is in the error: %q", msg)
	}
}

// The endpoint of an S3-compatible server comes from each of the SDK's
// standard places, and the requests then go path-style to it.
func TestS3EndpointFromStandardPlaces(t *testing.T) {
	srv := s3test.Need(t)
	for _, place := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "endpoint_url", "services s3"} {
		t.Run(strings.ReplaceAll(place, " ", "_"), func(t *testing.T) {
			srv.SetEnv(t, "KCRASHENDPOINTKEY", "endpoint-secret-value-7")
			t.Setenv("AWS_ENDPOINT_URL_S3", "")
			os.Unsetenv("AWS_ENDPOINT_URL_S3") // the other places are looked at only when it is unset
			conf := filepath.Join(t.TempDir(), "config")
			var text string
			switch place {
			case "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL":
				t.Setenv(place, srv.Endpoint)
			case "endpoint_url":
				text = "[default]\nendpoint_url = " + srv.Endpoint + "\n"
			case "services s3":
				text = "[profile site]\nservices = site-services\n[services site-services]\ns3 =\n  endpoint_url = " + srv.Endpoint + "\n"
				t.Setenv("AWS_PROFILE", "site")
			}
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("AWS_CONFIG_FILE", conf)
			bucket := srv.Bucket(t)
			b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
			if _, err := Do(context.Background(), b, "s3://"+bucket+"/e", s3Opts()); err != nil {
				t.Fatal(err)
			}
			if !s3test.Has(srv.Requests(t, bucket), "PUT", "KCRASHENDPOINTKEY") {
				t.Errorf("no PUT reached the server at /%s/...", bucket)
			}
		})
	}
}

// Uploads of different bundles under one name racing each other: whether a
// loser's HEAD or its conditional PUT sees the winner's object, exactly one
// lands and the object is the winner's bundle.
func TestS3UploadRaceOneWins(t *testing.T) {
	srv := s3test.Need(t)
	srv.SetEnv(t, "KCRASHENVKEY", "env-secret-value-1")
	bucket := srv.Bucket(t)
	const n = 4
	var paths [n]string
	for i := range paths {
		paths[i] = uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{Files: map[string][]byte{"raw/which.txt": []byte(strings.Repeat("x", i+1))}})
	}
	errs := make(chan error, n)
	won := make(chan string, n)
	for _, p := range paths {
		go func() {
			_, err := Do(context.Background(), p, "s3://"+bucket+"/race", s3Opts())
			if err == nil {
				won <- p
			}
			errs <- err
		}()
	}
	var refused int
	for range n {
		if err := <-errs; err != nil {
			if !strings.Contains(err.Error(), "exists and is another object; not overwriting it") {
				t.Errorf("unexpected error: %v", err)
			}
			refused++
		}
	}
	if refused != n-1 || len(won) != 1 {
		t.Fatalf("%d refused, %d landed; want %d and 1", refused, len(won), n-1)
	}
	want, _ := os.ReadFile(<-won)
	if got := srv.Objects(t, bucket)["race/"+filepath.Base(paths[0])]; !bytes.Equal(got, want) {
		t.Errorf("the object is not the winner's bundle")
	}
}
