package upload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/upload/uploadtest"
)

func fastOpts(s *uploadtest.Server, log *bytes.Buffer) Options {
	return Options{
		Env:          s.Getenv,
		Retry:        Retry{InitialInterval: 5 * time.Millisecond, MaxInterval: 20 * time.Millisecond, MaxElapsed: 5 * time.Second, MaxTries: 5},
		StallTimeout: 2 * time.Second,
		Log:          log,
	}
}

func sha(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// noLeak fails when a credential shows up in anything kcrash prints or sends.
func noLeak(t *testing.T, s *uploadtest.Server, what string, texts ...string) {
	t.Helper()
	for _, secret := range s.Secrets() {
		for _, txt := range texts {
			if strings.Contains(txt, secret) {
				t.Errorf("%s holds the credential %q: %s", what, secret, txt)
			}
		}
	}
}

func resultJSON(r any) string {
	b, _ := json.Marshal(r)
	return string(b)
}

func bigBundle(t *testing.T, n int) string {
	data := make([]byte, n)
	rand.New(rand.NewSource(1)).Read(data)
	return uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{Files: map[string][]byte{"raw/blob.bin": data}})
}

func TestParseTarget(t *testing.T) {
	good := []struct {
		in   string
		want Target
		str  string
	}{
		{"jira:PROJ-123", Target{Kind: Jira, Issue: "PROJ-123"}, "jira:PROJ-123"},
		{"jira:abc-9", Target{Kind: Jira, Issue: "ABC-9"}, "jira:ABC-9"},
		{"gitlab:group/sub/project#12", Target{Kind: GitLab, Project: "group/sub/project", Number: 12, Issue: "12"}, "gitlab:group/sub/project#12"},
		{"gitlab:4711#3", Target{Kind: GitLab, Project: "4711", Number: 3, Issue: "3"}, "gitlab:4711#3"},
		{"github:octo/repo#5", Target{Kind: GitHub, Project: "octo/repo", Number: 5, Issue: "5"}, "github:octo/repo#5"},
		{"gitea:https://git.example.com/owner/repo#8", Target{Kind: Gitea, Base: "https://git.example.com", Project: "owner/repo", Number: 8, Issue: "8"}, "gitea:https://git.example.com/owner/repo#8"},
		{"gitea:https://example.com/gitea/owner/repo#8", Target{Kind: Gitea, Base: "https://example.com/gitea", Project: "owner/repo", Number: 8, Issue: "8"}, "gitea:https://example.com/gitea/owner/repo#8"},
		{"file:///srv/bundles/", Target{Kind: File, Path: "/srv/bundles/"}, "file:///srv/bundles/"},
	}
	for _, g := range good {
		got, err := ParseTarget(g.in)
		if err != nil {
			t.Errorf("%s: %v", g.in, err)
			continue
		}
		if got.String() != g.str {
			t.Errorf("%s: String() = %q, want %q", g.in, got.String(), g.str)
		}
		got.URL = nil
		if got != g.want {
			t.Errorf("%s: %+v, want %+v", g.in, got, g.want)
		}
	}
	put, err := ParseTarget("https://bucket.s3.amazonaws.com/k/x.tar.gz?X-Amz-Signature=deadbeefsig&X-Amz-Credential=AKIA")
	if err != nil || put.Kind != HTTP {
		t.Fatalf("https target: %v %+v", err, put)
	}
	if s := put.String(); strings.Contains(s, "deadbeefsig") || s != "https://bucket.s3.amazonaws.com/k/x.tar.gz?…" {
		t.Errorf("http target prints as %q", s)
	}
	for _, bad := range []string{"", "jira:", "jira:PROJ", "gitlab:group#x", "gitlab:group/project", "github:octo#1", "github:a/b/c#1",
		"gitea:ftp://h/o/r#1", "gitea:https://h/r#1", "gitea:https://h/o/r", "file://host/x", "file:relative", "s3://", "s3://b/k?X-Amz-Signature=x",
		"https://user:hunter2pass@host/x", "jira:PROJ-1;rm"} {
		_, err := ParseTarget(bad)
		if err == nil {
			t.Errorf("%q: accepted", bad)
		} else if strings.Contains(err.Error(), "hunter2pass") {
			t.Errorf("%q: error repeats the password: %v", bad, err)
		}
	}
}

func TestJiraAttachAndComment(t *testing.T) {
	s := uploadtest.NewJira(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	var log bytes.Buffer
	res, err := Do(context.Background(), b, s.Target(), fastOpts(s, &log))
	if err != nil {
		t.Fatal(err)
	}
	files := s.Files()
	if len(files) != 1 || files[0].Name != filepath.Base(b) || files[0].SHA256() != sha(t, b) {
		t.Fatalf("stored %+v, want the bundle byte for byte", files)
	}
	cs := s.Comments()
	if len(cs) != 1 {
		t.Fatalf("comments %q", cs)
	}
	for _, want := range []string{"{{gpu_page_fault}}", "(high confidence)", "amdgpu VM fault", "[^" + filepath.Base(b) + "]", "{noformat}", "paged_attention_fwd", sha(t, b)} {
		if !strings.Contains(cs[0], want) {
			t.Errorf("comment lacks %q:\n%s", want, cs[0])
		}
	}
	if res.Attachment == nil || !strings.Contains(res.Attachment.URL, "/secure/attachment/") || res.Comment == nil || !strings.Contains(res.Comment.URL, "/browse/PROJ-1?focusedCommentId=") {
		t.Errorf("result %s", resultJSON(res))
	}
	if res.SHA256 != sha(t, b) || res.Retries != 0 {
		t.Errorf("result %s", resultJSON(res))
	}
	noLeak(t, s, "result", resultJSON(res), log.String(), cs[0])

	// A rerun finds the attachment instead of adding a second one.
	res, err = Do(context.Background(), b, s.Target(), fastOpts(s, &log))
	if err != nil || !res.Attachment.Reused || len(s.Files()) != 1 {
		t.Errorf("rerun: %v %s, %d files", err, resultJSON(res), len(s.Files()))
	}
}

func TestJiraPATAndADF(t *testing.T) {
	s := uploadtest.NewJira(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	opts := fastOpts(s, &bytes.Buffer{})
	opts.Env = func(k string) string { return map[string]string{"JIRA_URL": s.URL + "/", "JIRA_PAT": s.PAT}[k] }
	opts.ADF = true
	res, err := Do(context.Background(), b, s.Target(), opts)
	if err != nil {
		t.Fatal(err)
	}
	cs := s.Comments()
	if len(cs) != 1 || !strings.Contains(cs[0], `"type":"doc"`) || !strings.Contains(cs[0], "gpu_page_fault") || !strings.Contains(cs[0], `"codeBlock"`) {
		t.Errorf("ADF comment %q", cs)
	}
	if !strings.Contains(cs[0], res.Attachment.URL) {
		t.Errorf("ADF comment does not link the attachment %s", res.Attachment.URL)
	}
}

func TestJiraFaults(t *testing.T) {
	cases := []struct {
		name     string
		op       string
		faults   []uploadtest.Fault
		stall    time.Duration
		wantErr  []string // substrings; none: success
		minWait  time.Duration
		files    int
		comments int
		reused   string // "attachment" or "comment"
		retries  int    // at least
		attachTx int    // POSTs of the attachment, 0: don't check
	}{
		{name: "429 with Retry-After", op: uploadtest.OpAttach, faults: []uploadtest.Fault{{Status: 429, RetryAfter: "1"}}, minWait: time.Second, files: 1, comments: 1, retries: 1},
		{name: "500 then success", op: uploadtest.OpComment, faults: []uploadtest.Fault{{Status: 500}}, files: 1, comments: 1, retries: 1},
		{name: "502 twice", op: uploadtest.OpAttach, faults: []uploadtest.Fault{{Status: 502}, {Status: 502}}, files: 1, comments: 1, retries: 2},
		{name: "413", op: uploadtest.OpAttach, faults: []uploadtest.Fault{{Status: 413}}, wantErr: []string{"jira:PROJ-1", "HTTP 413", "too large", "--bundle-url"}, attachTx: 1},
		{name: "401", op: uploadtest.OpAttach, faults: []uploadtest.Fault{{Status: 401}}, wantErr: []string{"jira:PROJ-1", "HTTP 401", "JIRA_USER", "JIRA_API_TOKEN", "JIRA_PAT"}, attachTx: 1},
		{name: "403", op: uploadtest.OpComment, faults: []uploadtest.Fault{{Status: 403}}, wantErr: []string{"jira:PROJ-1: comment: HTTP 403", "Add Comments permission"}, files: 1},
		{name: "404", op: uploadtest.OpLookup, faults: []uploadtest.Fault{{Status: 404}, {Status: 404}}, wantErr: nil, files: 1, comments: 1},
		{name: "connection dropped mid-body", op: uploadtest.OpAttach, faults: []uploadtest.Fault{{Drop: true}}, files: 1, comments: 1, retries: 1},
		{name: "answer lost after the attachment was made", op: uploadtest.OpAttach, faults: []uploadtest.Fault{{DropAfter: true}}, files: 1, comments: 1, reused: "attachment", retries: 1},
		{name: "answer lost after the comment was made", op: uploadtest.OpComment, faults: []uploadtest.Fault{{DropAfter: true}}, files: 1, comments: 1, reused: "comment", retries: 1},
		{name: "slow server stalls", op: uploadtest.OpAttach, faults: []uploadtest.Fault{{Delay: 600 * time.Millisecond}}, stall: 150 * time.Millisecond, files: 1, comments: 1, retries: 1},
		{name: "slow server in time", op: uploadtest.OpComment, faults: []uploadtest.Fault{{Delay: 200 * time.Millisecond}}, files: 1, comments: 1},
		{name: "503 for ever", op: uploadtest.OpAttach, faults: []uploadtest.Fault{{Status: 503}, {Status: 503}, {Status: 503}, {Status: 503}, {Status: 503}, {Status: 503}}, wantErr: []string{"HTTP 503", "gave up after 5 tries"}, attachTx: 5},
		{name: "Retry-After longer than kcrash waits", op: uploadtest.OpAttach, faults: []uploadtest.Fault{{Status: 429, RetryAfter: "3600"}}, wantErr: []string{"HTTP 429", "wait 1h0m0s"}, attachTx: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := uploadtest.NewJira(t)
			b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
			s.Fault(c.op, c.faults...)
			var log bytes.Buffer
			opts := fastOpts(s, &log)
			if c.stall > 0 {
				opts.StallTimeout = c.stall
			}
			start := time.Now()
			res, err := Do(context.Background(), b, s.Target(), opts)
			took := time.Since(start)
			if len(c.wantErr) == 0 && err != nil {
				t.Fatalf("error %v\nlog:\n%s", err, log.String())
			}
			if len(c.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error; result %s", resultJSON(res))
				}
				for _, w := range c.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q: %v", w, err)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				noLeak(t, s, "error", err.Error())
			}
			if took < c.minWait {
				t.Errorf("took %s, Retry-After asked for %s", took, c.minWait)
			}
			if got := len(s.Files()); got != c.files {
				t.Errorf("%d attachments, want %d", got, c.files)
			}
			if got := len(s.Comments()); got != c.comments {
				t.Errorf("%d comments, want %d", got, c.comments)
			}
			if res != nil && res.Retries < c.retries {
				t.Errorf("%d retries, want at least %d", res.Retries, c.retries)
			}
			switch c.reused {
			case "attachment":
				if res == nil || res.Attachment == nil || !res.Attachment.Reused {
					t.Errorf("attachment not marked reused: %s", resultJSON(res))
				}
			case "comment":
				if res == nil || res.Comment == nil || !res.Comment.Reused {
					t.Errorf("comment not marked reused: %s", resultJSON(res))
				}
			}
			if c.attachTx > 0 {
				n := 0
				for _, r := range s.Requests() {
					if r == "POST /rest/api/2/issue/PROJ-1/attachments" {
						n++
					}
				}
				if n != c.attachTx {
					t.Errorf("%d attachment POSTs, want %d", n, c.attachTx)
				}
			}
			noLeak(t, s, "log", log.String(), resultJSON(res))
		})
	}
}

func TestJiraWrongCredentials(t *testing.T) {
	s := uploadtest.NewJira(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	opts := fastOpts(s, &bytes.Buffer{})
	opts.Env = func(k string) string {
		return map[string]string{"JIRA_URL": s.URL, "JIRA_USER": "dev@example.com", "JIRA_API_TOKEN": "wrong-token-value"}[k]
	}
	_, err := Do(context.Background(), b, s.Target(), opts)
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "check JIRA_USER and JIRA_API_TOKEN") || strings.Contains(err.Error(), "wrong-token-value") {
		t.Errorf("error %v", err)
	}
	opts.Env = func(k string) string { return map[string]string{"JIRA_URL": s.URL}[k] }
	_, err = Do(context.Background(), b, s.Target(), opts)
	if err == nil || !strings.Contains(err.Error(), "no credentials") || len(s.Requests()) != 1 {
		t.Errorf("no credentials: %v, requests %q", err, s.Requests())
	}
}

func TestGitLab(t *testing.T) {
	s := uploadtest.NewGitLab(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	var log bytes.Buffer
	res, err := Do(context.Background(), b, s.Target(), fastOpts(s, &log))
	if err != nil {
		t.Fatal(err)
	}
	files, notes := s.Files(), s.Comments()
	if len(files) != 1 || files[0].SHA256() != sha(t, b) || len(notes) != 1 {
		t.Fatalf("files %d notes %d", len(files), len(notes))
	}
	for _, want := range []string{"[" + filepath.Base(b) + "](/uploads/", "`gpu_page_fault` (high confidence)", "<details>", "paged_attention_fwd"} {
		if !strings.Contains(notes[0], want) {
			t.Errorf("note lacks %q:\n%s", want, notes[0])
		}
	}
	if !strings.HasPrefix(res.Attachment.URL, s.URL+"/-/project/42/uploads/") || !strings.HasPrefix(res.Comment.URL, s.URL+"/group/sub/project/-/issues/7#note_") {
		t.Errorf("result %s", resultJSON(res))
	}
	noLeak(t, s, "output", resultJSON(res), log.String(), notes[0])
}

func TestGitLabNoOrphanAfterLostAnswer(t *testing.T) {
	for _, canList := range []bool{true, false} {
		s := uploadtest.NewGitLab(t)
		s.GitLabCanList = canList
		b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
		s.Fault(uploadtest.OpAttach, uploadtest.Fault{DropAfter: true})
		res, err := Do(context.Background(), b, s.Target(), fastOpts(s, &bytes.Buffer{}))
		if err != nil {
			t.Fatal(err)
		}
		if canList && len(s.Files()) != 1 {
			t.Errorf("maintainer token: %d uploads left, want the orphan deleted", len(s.Files()))
		}
		if !canList && (len(s.Files()) != 2 || len(res.Warnings) == 0) {
			t.Errorf("reporter token: %d uploads, warnings %q", len(s.Files()), res.Warnings)
		}
		if len(s.Comments()) != 1 {
			t.Errorf("%d notes", len(s.Comments()))
		}
	}
}

func TestSizeLimit(t *testing.T) {
	s := uploadtest.NewGitLab(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	opts := fastOpts(s, &bytes.Buffer{})
	opts.MaxSize = 100
	_, err := Do(context.Background(), b, s.Target(), opts)
	if err == nil || !strings.Contains(err.Error(), "over the 100 B limit (--max-size)") || len(s.Requests()) != 0 {
		t.Errorf("error %v, requests %q", err, s.Requests())
	}
}

func TestGitHubComment(t *testing.T) {
	s := uploadtest.NewGitHub(t)
	huge := "# summary\n\n```\n" + strings.Repeat("a long evidence line with ünïcode and 🙂 in it\n", 3000) + "```\n"
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{Kind: "host_oom", Confidence: "medium", Summary: "OOM killer took python", SummaryMD: huge})
	opts := fastOpts(s, &bytes.Buffer{})
	opts.BundleURL = "https://store.example.com/b/" + filepath.Base(b)
	s.Fault(uploadtest.OpComment, uploadtest.Fault{Status: 403, RetryAfter: "0"}, uploadtest.Fault{DropAfter: true})
	res, err := Do(context.Background(), b, s.Target(), opts)
	if err != nil {
		t.Fatal(err)
	}
	cs := s.Comments()
	if len(cs) != 1 {
		t.Fatalf("%d comments after a lost answer, want 1", len(cs))
	}
	c := cs[0]
	if n := len([]rune(c)); n > 65536 {
		t.Errorf("comment %d characters", n)
	}
	for _, want := range []string{"`host_oom` (medium confidence)", "OOM killer took python", "[" + filepath.Base(b) + "](" + opts.BundleURL + ")", "<details>", "(truncated", "```\n\n*(truncated"} {
		if !strings.Contains(c, want) {
			t.Errorf("comment lacks %q", want)
		}
	}
	if !strings.HasSuffix(c, "</details>\n") {
		t.Errorf("comment does not end with </details>: %q", c[len(c)-100:])
	}
	if !res.Comment.Reused || !strings.Contains(res.Comment.URL, "issuecomment-") || len(s.Files()) != 0 {
		t.Errorf("result %s", resultJSON(res))
	}

	// Without anywhere to link, the comment still says what and where.
	res, err = Do(context.Background(), b, s.Target(), fastOpts(s, &bytes.Buffer{}))
	if err != nil || len(res.Warnings) == 0 || !strings.Contains(s.Comments()[1], "not uploaded; kept on host `node1`") {
		t.Errorf("unlinked: %v %s", err, resultJSON(res))
	}
}

func TestGitea(t *testing.T) {
	t.Run("default types", func(t *testing.T) {
		s := uploadtest.NewGitea(t)
		b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
		s.Fault(uploadtest.OpAttach, uploadtest.Fault{Status: 500})
		res, err := Do(context.Background(), b, s.Target(), fastOpts(s, &bytes.Buffer{}))
		if err != nil {
			t.Fatal(err)
		}
		f := s.Files()
		if len(f) != 1 || f[0].Name != filepath.Base(b) || f[0].SHA256() != sha(t, b) {
			t.Fatalf("files %+v", f)
		}
		if cs := s.Comments(); len(cs) != 1 || !strings.Contains(cs[0], "]("+s.URL+"/git/attachments/uuid-") || !strings.Contains(cs[0], "gpu_page_fault") {
			t.Errorf("comments %q", cs)
		}
		if res.Retries != 1 || !strings.Contains(res.Comment.URL, "/git/octo/repo/issues/3#issuecomment-") {
			t.Errorf("result %s", resultJSON(res))
		}
	})
	t.Run("only tgz allowed", func(t *testing.T) {
		s := uploadtest.NewGitea(t)
		s.GiteaAllowed = ".tgz,.zip"
		b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
		if _, err := Do(context.Background(), b, s.Target(), fastOpts(s, &bytes.Buffer{})); err != nil {
			t.Fatal(err)
		}
		if f := s.Files(); len(f) != 1 || f[0].Name != strings.TrimSuffix(filepath.Base(b), ".tar.gz")+".tgz" {
			t.Errorf("files %+v", f)
		}
	})
	t.Run("neither allowed", func(t *testing.T) {
		s := uploadtest.NewGitea(t)
		s.GiteaAllowed = ".zip,.txt"
		b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
		_, err := Do(context.Background(), b, s.Target(), fastOpts(s, &bytes.Buffer{}))
		if err == nil || !strings.Contains(err.Error(), "accept neither .tar.gz nor .tgz") || len(s.Files()) != 0 {
			t.Errorf("error %v", err)
		}
	})
	t.Run("server size limit", func(t *testing.T) {
		s := uploadtest.NewGitea(t)
		s.GiteaMaxMB = 1
		b := bigBundle(t, 1<<20+1000)
		_, err := Do(context.Background(), b, s.Target(), fastOpts(s, &bytes.Buffer{}))
		if err == nil || !strings.Contains(err.Error(), "MAX_SIZE") || len(s.Files()) != 0 {
			t.Errorf("error %v", err)
		}
	})
}

func TestHTTPPut(t *testing.T) {
	s := uploadtest.NewPut(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	var log bytes.Buffer
	s.Fault(uploadtest.OpAttach, uploadtest.Fault{Status: 500}, uploadtest.Fault{Drop: true})
	res, err := Do(context.Background(), b, s.Target(), fastOpts(s, &log))
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Files(); len(f) != 1 || f[0].SHA256() != sha(t, b) {
		t.Fatalf("files %+v", f)
	}
	if res.Attachment.URL != s.URL+"/bucket/crash.tar.gz" || res.Attachment.ID == "" || res.Retries != 2 {
		t.Errorf("result %s", resultJSON(res))
	}
	noLeak(t, s, "output", resultJSON(res), log.String())

	s.Fault(uploadtest.OpAttach, uploadtest.Fault{Status: 403})
	_, err = Do(context.Background(), b, s.Target(), fastOpts(s, &log))
	if err == nil || !strings.Contains(err.Error(), "pre-signed URL may have expired") || !strings.Contains(err.Error(), "/bucket/crash.tar.gz?…") {
		t.Errorf("403: %v", err)
	}
	noLeak(t, s, "error", err.Error())

	// A large body, the connection dropped while it is going up.
	big := bigBundle(t, 1300<<10)
	s.Fault(uploadtest.OpAttach, uploadtest.Fault{Drop: true})
	res, err = Do(context.Background(), big, s.Target(), fastOpts(s, &log))
	if err != nil || res.Retries != 1 {
		t.Fatalf("large: %v %s", err, resultJSON(res))
	}
	if f := s.Files(); len(f) != 1 || f[0].SHA256() != sha(t, big) {
		t.Errorf("large: stored %d files", len(f))
	}
}

func TestLargeMultipart(t *testing.T) {
	s := uploadtest.NewJira(t)
	big := bigBundle(t, 1300<<10)
	s.Fault(uploadtest.OpAttach, uploadtest.Fault{Drop: true})
	res, err := Do(context.Background(), big, s.Target(), fastOpts(s, &bytes.Buffer{}))
	if err != nil || res.Retries != 1 {
		t.Fatalf("%v %s", err, resultJSON(res))
	}
	if f := s.Files(); len(f) != 1 || f[0].SHA256() != sha(t, big) {
		t.Errorf("stored %d files", len(f))
	}
	// The server's limit, met after the bundle was announced: 413, not retried.
	s2 := uploadtest.NewJira(t)
	s2.MaxBytes = 1 << 20
	_, err = Do(context.Background(), big, s2.Target(), fastOpts(s2, &bytes.Buffer{}))
	if err == nil || !strings.Contains(err.Error(), "HTTP 413") || !strings.Contains(err.Error(), "1.3 MB bundle") {
		t.Errorf("413: %v", err)
	}
}

func TestPutThenGitHubLinks(t *testing.T) {
	put, gh := uploadtest.NewPut(t), uploadtest.NewGitHub(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	opts := fastOpts(gh, &bytes.Buffer{})
	res, err := DoAll(context.Background(), b, []string{put.Target(), gh.Target()}, opts)
	if err != nil || len(res) != 2 {
		t.Fatal(err, len(res))
	}
	c := gh.Comments()[0]
	if !strings.Contains(c, "]("+put.URL+"/bucket/crash.tar.gz)") {
		t.Errorf("comment does not link the put copy:\n%s", c)
	}
	noLeak(t, put, "comment", c)
}

func TestFile(t *testing.T) {
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	dir := t.TempDir()
	res, err := Do(context.Background(), b, "file://"+dir+"/sub/", Options{})
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "sub", filepath.Base(b))
	if sha(t, dest) != sha(t, b) || res.Attachment.URL != "file://"+dest {
		t.Errorf("copy %s: %s", dest, resultJSON(res))
	}
	if res, err = Do(context.Background(), b, "file://"+dest, Options{}); err != nil || !res.Attachment.Reused {
		t.Errorf("rerun: %v %s", err, resultJSON(res))
	}
	other := filepath.Join(dir, "other.tar.gz")
	os.WriteFile(other, []byte("not this"), 0o644)
	if _, err = Do(context.Background(), b, "file://"+other, Options{}); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Errorf("overwrite: %v", err)
	}
	if data, _ := os.ReadFile(other); string(data) != "not this" {
		t.Error("overwrote another file")
	}
}

func TestSecretsRefused(t *testing.T) {
	s := uploadtest.NewGitLab(t)
	// The upload's own credential inside the bundle: the writer did not know it.
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{Files: map[string][]byte{
		"output.log": []byte("starting\nusing token " + s.Token + " for the hub\nok\n"),
	}})
	opts := fastOpts(s, &bytes.Buffer{})
	_, err := Do(context.Background(), b, s.Target(), opts)
	if err == nil || !strings.Contains(err.Error(), "output.log line 2") || !strings.Contains(err.Error(), "--allow-unredacted") {
		t.Fatalf("error %v", err)
	}
	noLeak(t, s, "error", err.Error())
	if len(s.Requests()) != 0 {
		t.Errorf("sent %q before refusing", s.Requests())
	}
	opts.DryRun = true
	if _, err := Do(context.Background(), b, s.Target(), opts); err == nil {
		t.Error("dry run did not refuse")
	}
	opts.DryRun, opts.AllowUnredacted = false, true
	if _, err := Do(context.Background(), b, s.Target(), opts); err != nil {
		t.Fatal(err)
	}
	noLeak(t, s, "note", s.Comments()...)
}

func TestDryRunSendsNothing(t *testing.T) {
	servers := []*uploadtest.Server{uploadtest.NewJira(t), uploadtest.NewGitLab(t), uploadtest.NewGitHub(t), uploadtest.NewGitea(t), uploadtest.NewPut(t)}
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	for _, s := range servers {
		opts := fastOpts(s, &bytes.Buffer{})
		opts.DryRun = true
		res, err := Do(context.Background(), b, s.Target(), opts)
		if err != nil {
			t.Fatalf("%s: %v", s.Kind, err)
		}
		if len(s.Requests()) != 0 {
			t.Errorf("%s: dry run sent %q", s.Kind, s.Requests())
		}
		if len(res.Plan) == 0 || !res.DryRun {
			t.Errorf("%s: no plan", s.Kind)
		}
		out := resultJSON(res)
		noLeak(t, s, s.Kind+" plan", out)
		if s.Kind != "put" && !strings.Contains(out, "gpu_page_fault") {
			t.Errorf("%s: plan does not show the comment: %s", s.Kind, out)
		}
	}
	j := servers[0]
	opts := fastOpts(j, &bytes.Buffer{})
	opts.DryRun = true
	res, _ := Do(context.Background(), b, j.Target(), opts)
	if h := strings.Join(res.Plan[1].Headers, "\n"); !strings.Contains(h, "Authorization: Basic <JIRA_USER:JIRA_API_TOKEN>") || !strings.Contains(h, "X-Atlassian-Token: no-check") {
		t.Errorf("attachment step headers:\n%s", h)
	}
}

func TestProgressBar(t *testing.T) {
	old := progressMin
	progressMin = 1
	defer func() { progressMin = old }()
	s := uploadtest.NewPut(t)
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	var bar bytes.Buffer
	opts := fastOpts(s, &bytes.Buffer{})
	opts.Progress = &bar
	if _, err := Do(context.Background(), b, s.Target(), opts); err != nil {
		t.Fatal(err)
	}
	if out := bar.String(); !strings.Contains(out, "\r") || !strings.Contains(out, "100%") || !strings.HasSuffix(out, "\n") {
		t.Errorf("progress %q", out)
	}
	noLeak(t, s, "progress", bar.String())
}

func TestRedirectNotFollowed(t *testing.T) {
	var leaked bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { leaked = true }))
	defer other.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusMovedPermanently)
	}))
	defer redir.Close()
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	opts := Options{Env: func(k string) string {
		return map[string]string{"GITLAB_URL": redir.URL, "GITLAB_TOKEN": "glpat-secret-value-1234567890"}[k]
	}, Retry: Retry{InitialInterval: time.Millisecond}}
	_, err := Do(context.Background(), b, "gitlab:g/p#1", opts)
	if err == nil || !strings.Contains(err.Error(), "redirects to "+other.URL) || leaked {
		t.Errorf("err %v, token sent to the redirect target: %v", err, leaked)
	}
}
