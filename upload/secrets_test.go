package upload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/upload/uploadtest"
)

// A proxy that echoes the request's headers in its error body must not put
// the credential on the terminal: GitHub, GitLab, Gitea tokens and Jira's
// basic auth (base64 of user:token) alike.
func TestErrorBodyEchoingCredentialsIsRedacted(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sb strings.Builder
		for k, v := range r.Header {
			fmt.Fprintf(&sb, "%s: %s\n", k, strings.Join(v, ","))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"message": "proxy refused: " + sb.String()})
	}))
	defer echo.Close()
	const tok = "s3cr3tT0ken" // no token shape: only the request's own credential says it is one
	basic := base64.StdEncoding.EncodeToString([]byte("me@example.com:" + tok))
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	for _, c := range []struct {
		target string
		env    map[string]string
	}{
		{"jira:OPS-1", map[string]string{"JIRA_URL": echo.URL, "JIRA_USER": "me@example.com", "JIRA_API_TOKEN": tok}},
		{"jira:OPS-1", map[string]string{"JIRA_URL": echo.URL, "JIRA_PAT": tok}},
		{"gitlab:g/p#1", map[string]string{"GITLAB_URL": echo.URL, "GITLAB_TOKEN": tok}},
		{"github:o/r#1", map[string]string{"GITHUB_API_URL": echo.URL, "GITHUB_TOKEN": tok}},
		{"gitea:" + echo.URL + "/o/r#1", map[string]string{"GITEA_TOKEN": tok}},
	} {
		opts := Options{Env: func(k string) string { return c.env[k] }, BundleURL: "https://example.com/b.tar.gz",
			Retry: Retry{InitialInterval: time.Millisecond, MaxTries: 1}, StallTimeout: 2 * time.Second}
		_, err := Do(context.Background(), b, c.target, opts)
		if err == nil {
			t.Fatalf("%s: no error from a 400", c.target)
		}
		msg := err.Error()
		if strings.Contains(msg, tok) || strings.Contains(msg, basic) || strings.Contains(msg, basic[:20]) {
			t.Errorf("%s: the credential is in the error: %s", c.target, msg)
		}
		if !strings.Contains(msg, "proxy refused") {
			t.Errorf("%s: the server's message is gone: %s", c.target, msg)
		}
	}
}

// --dry-run prints the service URLs without their user:password@.
func TestDryRunHidesURLUserinfo(t *testing.T) {
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	for _, c := range []struct {
		target string
		env    map[string]string
	}{
		{"jira:OPS-1", map[string]string{"JIRA_URL": "https://admin:pa55word@jira.example.com", "JIRA_PAT": "x"}},
		{"gitlab:g/p#1", map[string]string{"GITLAB_URL": "https://admin:pa55word@gitlab.example.com", "GITLAB_TOKEN": "x"}},
		{"github:o/r#1", map[string]string{"GITHUB_API_URL": "https://admin:pa55word@ghe.example.com/api/v3", "GITHUB_TOKEN": "x"}},
	} {
		opts := Options{DryRun: true, Env: func(k string) string { return c.env[k] }, BundleURL: "https://example.com/b.tar.gz"}
		res, err := Do(context.Background(), b, c.target, opts)
		if err != nil {
			t.Fatalf("%s: %v", c.target, err)
		}
		out := resultJSON(res)
		if strings.Contains(out, "pa55word") || strings.Contains(out, "admin:") {
			t.Errorf("%s: dry run shows the password: %s", c.target, out)
		}
		if !strings.Contains(out, "example.com") {
			t.Errorf("%s: dry run lost the host: %s", c.target, out)
		}
	}
}

// The upload's last scan sees a secret however the bundle encodes it, and
// in files of any size (streamed).
func TestScanSeesJSONEscapedSecretAndLargeFiles(t *testing.T) {
	secret := `hunter&2<xyz>`
	esc, _ := json.Marshal(secret) // "hunter\u00262\u003cxyz\u003e"
	big := bytes.Repeat([]byte("x"), 9<<20)
	big = append(big, []byte(" pw="+secret+"\n")...)
	for name, data := range map[string][]byte{"raw/escaped.json": []byte(`{"arg": ` + string(esc) + "}\n"), "raw/big.log": big} {
		b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{Files: map[string][]byte{name: data}})
		// written without that secret known, read back on a host where it is
		_, err := Load(b, Options{Env: func(string) string { return "" }, Redactor: nil})
		if err != nil {
			t.Fatalf("%s: clean host refused: %v", name, err)
		}
		t.Setenv("DB_PASSWORD", secret)
		_, err = Load(b, Options{Env: func(string) string { return "" }})
		if err == nil || !strings.Contains(err.Error(), "refusing to upload") || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: scan missed it: %v", name, err)
		}
		t.Setenv("DB_PASSWORD", "")
	}
}

// An S3-compatible server (or a proxy before it) that echoes the request's
// signed headers in its error: the access key id, the session token and the
// secret (were a broken client to send it) stay out of the error, and out
// of the retry notices on the log.
func TestS3ErrorEchoingCredentialsIsRedacted(t *testing.T) {
	const (
		keyID   = "AKIAKCRASHTESTECHO01"
		secret  = "kcrashEchoSecretValue/0123456789abcdefABCD"
		session = "kcrashEchoSessionToken0123456789"
	)
	puts := 0
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		puts++
		status := http.StatusServiceUnavailable // retried: the notice goes to the log
		if puts > 1 {
			status = http.StatusBadRequest
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<Error><Code>InvalidRequest</Code><Message>proxy refused: %s %s %s</Message></Error>",
			r.Header.Get("Authorization"), r.Header.Get("X-Amz-Security-Token"), secret)
	}))
	defer echo.Close()
	dir := t.TempDir()
	empty := dir + "/empty"
	os.WriteFile(empty, nil, 0o600)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_S3": echo.URL, "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": empty, "AWS_SHARED_CREDENTIALS_FILE": empty, "AWS_PROFILE": "",
		"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": session} {
		t.Setenv(k, v)
	}
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	var logBuf bytes.Buffer
	opts := Options{Env: func(string) string { return "" }, Log: &logBuf,
		Retry: Retry{InitialInterval: time.Millisecond, MaxTries: 2}, StallTimeout: 2 * time.Second}
	_, err := Do(context.Background(), b, "s3://bucket/prefix", opts)
	if err == nil {
		t.Fatal("no error from a 400")
	}
	for _, out := range []string{err.Error(), logBuf.String()} {
		for _, c := range []string{keyID, secret, session} {
			if strings.Contains(out, c) {
				t.Errorf("the credential %q is in: %s", c, out)
			}
		}
	}
	if !strings.Contains(err.Error(), "proxy refused") || !strings.Contains(logBuf.String(), "retrying") {
		t.Errorf("the server's message or the retry notice is gone: %s\nlog: %s", err, logBuf.String())
	}
}
