package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/upload"
	"github.com/kcrash/kcrash/upload/uploadtest"
)

// runUpload runs kcrash in-process with srv's environment.
func runUpload(t *testing.T, srv *uploadtest.Server, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("KCRASH_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, k := range []string{"JIRA_URL", "JIRA_USER", "JIRA_API_TOKEN", "JIRA_PAT", "GITLAB_URL", "GITLAB_TOKEN", "GITHUB_TOKEN", "GITHUB_API_URL", "GITEA_TOKEN"} {
		t.Setenv(k, "")
	}
	if srv != nil {
		for k, v := range srv.Env() {
			t.Setenv(k, v)
		}
	}
	var out, errb bytes.Buffer
	code = run(args, &streams{In: os.Stdin, Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func noSecrets(t *testing.T, srv *uploadtest.Server, texts ...string) {
	t.Helper()
	for _, s := range srv.Secrets() {
		for _, txt := range texts {
			if strings.Contains(txt, s) {
				t.Errorf("output holds the credential %q:\n%s", s, txt)
			}
		}
	}
}

func TestUploadUsage(t *testing.T) {
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"upload", b}, "needs --to TARGET"},
		{[]string{"upload", b, "--to", "jira"}, "want an issue key"},
		{[]string{"upload", b, "--to", "gs://bucket/key"}, "unknown target"},
		{[]string{"upload", b, "--to", "s3://AKIA:hunter22@bucket/key"}, "want s3://bucket/prefix"},
		{[]string{"upload", b, "--to", "github:octo#1"}, "github:owner/repo#N"},
		{[]string{"upload", b, "--to", "https://u:hunter22@h/x"}, "pre-signed URL"},
		{[]string{"upload", b, "--to", "file:///x", "--max-size", "lots"}, "invalid size"},
		{[]string{"upload", b, "--to", "file:///x", "--bundle-url", "ftp://h/x"}, "--bundle-url"},
		{[]string{"upload", "--to", "file:///x"}, "accepts 1 arg"},
	} {
		code, _, stderr := runUpload(t, nil, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "hunter22") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

func TestUploadJiraJSON(t *testing.T) {
	srv := uploadtest.NewJira(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	code, stdout, stderr := runUpload(t, srv, "upload", b, "--to", srv.Target(), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res []upload.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res) != 1 {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	r := res[0]
	if r.Target != "jira:PROJ-1" || r.Attachment == nil || r.Attachment.ID == "" || r.Comment == nil || !strings.Contains(r.Comment.URL, "focusedCommentId="+r.Comment.ID) {
		t.Errorf("result %+v", r)
	}
	if f := srv.Files(); len(f) != 1 || f[0].SHA256() != r.SHA256 {
		t.Errorf("stored %d files", len(f))
	}
	noSecrets(t, srv, stdout, stderr)

	// Plain output: one line per thing made, the rerun finding the attachment.
	code, stdout, _ = runUpload(t, srv, "upload", b, "--to", srv.Target())
	if code != 0 || !strings.Contains(stdout, "jira:PROJ-1: attached (already there, not added again) id ") || !strings.Contains(stdout, "jira:PROJ-1: commented id ") {
		t.Errorf("exit %d, stdout:\n%s", code, stdout)
	}
}

func TestUploadDryRun(t *testing.T) {
	srv := uploadtest.NewGitLab(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	code, stdout, stderr := runUpload(t, srv, "upload", b, "--to", srv.Target(), "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"nothing sent", "POST " + srv.URL + "/api/v4/projects/group%2Fsub%2Fproject/uploads", "PRIVATE-TOKEN: <GITLAB_TOKEN>",
		`multipart/form-data field "file"`, "| **kcrash crash report:** `gpu_page_fault` (high confidence)", "| <details>"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
	if len(srv.Requests()) != 0 {
		t.Errorf("dry run sent %q", srv.Requests())
	}
	noSecrets(t, srv, stdout, stderr)
}

func TestUploadRefusesSecretFromConfigCredential(t *testing.T) {
	srv := uploadtest.NewGitLab(t)
	// The token is only in the config file, and it leaked into the child's output.
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("credentials:\n  GITLAB_TOKEN: "+srv.Token+"\n"), 0o600)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{Files: map[string][]byte{"output.log": []byte("boot\nHF login with " + srv.Token + "\n")}})
	env := srv.Env()
	delete(env, "GITLAB_TOKEN")
	t.Setenv("GITLAB_URL", env["GITLAB_URL"])
	code, stdout, stderr := runUpload(t, nil, "upload", b, "--to", srv.Target(), "--config", cfg)
	if code != 1 || !strings.HasPrefix(stderr, "kcrash: refusing to upload ") || !strings.Contains(stderr, "output.log line 2") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	noSecrets(t, srv, stdout, stderr)
	if len(srv.Requests()) != 0 {
		t.Errorf("sent %q", srv.Requests())
	}
}

func TestUploadErrorIsOneLine(t *testing.T) {
	srv := uploadtest.NewGitea(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	srv.Fault(uploadtest.OpAttach, uploadtest.Fault{Status: 404})
	code, _, stderr := runUpload(t, srv, "upload", b, "--to", srv.Target())
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "kcrash: gitea:"+srv.URL+"/git/octo/repo#3: attachment: HTTP 404") || !strings.Contains(stderr, "no issue #3 in octo/repo") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestUploadFileTarget(t *testing.T) {
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	dir := t.TempDir()
	code, stdout, stderr := runUpload(t, nil, "upload", b, "--to", "file://"+dir+"/")
	want := "file://" + filepath.Join(dir, filepath.Base(b))
	if code != 0 || strings.TrimSpace(stdout) != "file://"+dir+"/: copied "+want {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestRunUploadEndToEnd: `kcrash run --upload` of a crashing child arrives
// at the ticket server with the verdict in the comment and the bundle byte
// for byte.
func TestRunUploadEndToEnd(t *testing.T) {
	bin, err := exec.LookPath("kcrash")
	if err != nil {
		t.Fatal(err)
	}
	srv := uploadtest.NewJira(t)
	out := t.TempDir()
	cmd := exec.Command(bin, "run", "-q", "--out", out, "--skip-collectors", skipSlow(), "--upload", srv.Target(), "--",
		"sh", "-c", `echo "RuntimeError: CUDA error: an illegal memory access was encountered" >&2; kill -SEGV $$`)
	cmd.Env = append(os.Environ(), "KCRASH_CONFIG=", "XDG_CONFIG_HOME="+t.TempDir())
	for k, v := range srv.Env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	// kcrash dies of the child's signal: a shell's $? is 139.
	if _, ok := err.(*exec.ExitError); !ok || exitStatus(cmd) != 128+11 {
		t.Fatalf("exit %v, want 139\nstderr:\n%s", err, stderr.String())
	}
	bundles, _ := filepath.Glob(filepath.Join(out, "kcrash-*.tar.gz"))
	if len(bundles) != 1 {
		t.Fatalf("%d bundles", len(bundles))
	}
	files := srv.Files()
	if len(files) != 1 || files[0].Name != filepath.Base(bundles[0]) || files[0].SHA256() != sha256File(t, bundles[0]) {
		t.Fatalf("server holds %d files; want the bundle byte for byte\nstderr:\n%s", len(files), stderr.String())
	}
	bd, err := bundle.Open(bundles[0])
	if err != nil {
		t.Fatal(err)
	}
	var tri struct {
		Verdict struct{ Kind string } `json:"verdict"`
	}
	json.Unmarshal(bd.Manifest.Triage, &tri)
	cs := srv.Comments()
	if tri.Verdict.Kind == "" || len(cs) != 1 || !strings.Contains(cs[0], "{{"+tri.Verdict.Kind+"}}") {
		t.Errorf("verdict %q, comments %q", tri.Verdict.Kind, cs)
	}
	noSecrets(t, srv, stdout.String(), stderr.String())
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return uploadtest.File{Data: data}.SHA256()
}
