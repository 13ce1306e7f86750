package upload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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
