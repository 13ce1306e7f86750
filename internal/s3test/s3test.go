// Package s3test gives tests the real S3-compatible server that .ci/run
// starts (scripts/s3-test-server.sh: tools/s3server, gofakes3), a bucket of
// their own on it, and the access key id the server saw on each request.
// Without the server a test skips, and fails under CI=true.
package s3test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"

	"github.com/kcrash/kcrash/internal/s3client"
	"github.com/kcrash/kcrash/internal/testenv"
)

// The variables scripts/s3-test-server.sh up prints.
const (
	EndpointEnv = "KCRASH_TEST_S3_ENDPOINT"
	LogEnv      = "KCRASH_TEST_S3_LOG"
)

// Server is the running test server.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Log      string // one line per request: access_key=ID method=M path=/bucket/key
}

// Need returns the server, or skips (fails under CI) when none runs.
func Need(t testing.TB) *Server {
	t.Helper()
	s := &Server{Endpoint: os.Getenv(EndpointEnv), Log: os.Getenv(LogEnv)}
	if s.Endpoint == "" || s.Log == "" {
		testenv.Skip(t, "no S3 test server: run eval \"$(scripts/s3-test-server.sh up)\" (.ci/run does), which sets %s and %s", EndpointEnv, LogEnv)
	}
	return s
}

// Env is an environment in which the AWS SDK finds this server and only
// the given credentials, whatever the host's ~/.aws holds: the shared files
// point at empty files and instance metadata is off.
func (s *Server) Env(t testing.TB, keyID, secret string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"AWS_ENDPOINT_URL_S3": s.Endpoint, "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": empty, "AWS_SHARED_CREDENTIALS_FILE": empty,
		"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": secret,
		"AWS_PROFILE": "", "AWS_SESSION_TOKEN": "", "AWS_ENDPOINT_URL": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "",
	}
	return env
}

// SetEnv sets Env for the rest of the test, its empty values unset.
func (s *Server) SetEnv(t *testing.T, keyID, secret string) {
	t.Helper()
	for k, v := range s.Env(t, keyID, secret) {
		t.Setenv(k, v) // restored after the test
		if v == "" {
			// Unset, not empty: the SDK takes an empty AWS_ENDPOINT_URL
			// as set, and then looks no further for an endpoint.
			os.Unsetenv(k)
		}
	}
}

// OwnerKey signs the test's own requests (Client).
const OwnerKey = "KCRASHTESTOWNER"

// Client is an S3 client of the test's own, with its own credentials: what
// the test uses to look at the bucket, not what kcrash uses.
func (s *Server) Client(t testing.TB) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true, Logger: logging.Nop{},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: OwnerKey, SecretAccessKey: "test-owner-secret"}, nil
		}),
	})
}

// Bucket creates a bucket with a name of its own for this test.
func (s *Server) Bucket(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "kcrash-test-" + hex.EncodeToString(b)
	if _, err := s.Client(t).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", name, s.Endpoint, err)
	}
	return name
}

// Objects is every object in bucket: key → content.
func (s *Server) Objects(t testing.TB, bucket string) map[string][]byte {
	t.Helper()
	c := s.Client(t)
	ctx := context.Background()
	out := map[string][]byte{}
	pages := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(got.Body)
			got.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			out[aws.ToString(o.Key)] = data
		}
	}
	return out
}

// Put writes an object as the test's own client.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	_, err := s.Client(t).PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
}

// Request is one logged request.
type Request struct {
	AccessKey, Method, Path string
}

// Requests are the requests the server logged for bucket, in order. The
// server writes each line before it answers, so a request whose answer
// the caller has is here.
func (s *Server) Requests(t testing.TB, bucket string) []Request {
	t.Helper()
	f, err := os.Open(s.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Request
		for _, field := range strings.Fields(sc.Text()) {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "access_key":
				r.AccessKey = v
			case "method":
				r.Method = v
			case "path":
				r.Path = v
			}
		}
		if r.Path == "/"+bucket || strings.HasPrefix(r.Path, "/"+bucket+"/") || strings.HasPrefix(r.Path, "/"+bucket+"?") {
			out = append(out, r)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// URL is s3://bucket/prefix.
func URL(bucket, prefix string) string { return s3client.ObjectURL(bucket, prefix) }

// Has says whether a request of method was signed with key.
func Has(rs []Request, method, key string) bool {
	for _, r := range rs {
		if r.Method == method && r.AccessKey == key {
			return true
		}
	}
	return false
}
