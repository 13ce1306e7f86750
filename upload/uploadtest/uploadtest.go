// Package uploadtest provides strict fake ticket servers for testing
// uploads: each implements one API's documented request shapes (method,
// path, headers, auth scheme, multipart field name) and records anything
// else as a violation that fails the test, and each can inject faults.
package uploadtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
)

// Fault is what the server does to one request instead of, or besides,
// answering it normally.
type Fault struct {
	Status     int           // answer with this status, the request not processed
	RetryAfter string        // with Status: the Retry-After header
	Delay      time.Duration // wait this long before anything else
	Drop       bool          // read half the body, then close the connection
	DropAfter  bool          // process the request fully, then close without answering
}

// File is an attachment the server stored.
type File struct {
	ID   int
	Name string
	Data []byte
}

// SHA256 is the stored file's digest in hex.
func (f File) SHA256() string {
	s := sha256.Sum256(f.Data)
	return hex.EncodeToString(s[:])
}

// Server is one fake API.
type Server struct {
	*httptest.Server
	Kind string // jira, gitlab, github, gitea, put

	// Credentials the server accepts.
	User, Token, PAT string

	// MaxBytes answers 413 to larger attachment bodies when > 0.
	MaxBytes int64
	// GitLabCanList lets the token list and delete uploads (Maintainer).
	GitLabCanList bool
	// GiteaAllowed is the [attachment] ALLOWED_TYPES list; GiteaMaxMB its MAX_SIZE.
	GiteaAllowed string
	GiteaMaxMB   int64

	t          testing.TB
	mu         sync.Mutex
	faults     map[string][]Fault
	files      []File
	comments   []string
	requests   []string
	violations []string
	nextID     int
}

// Ops that faults attach to.
const (
	OpAttach  = "attach"  // the attachment, upload, asset or PUT
	OpComment = "comment" // the comment or note
	OpLookup  = "lookup"  // any GET
)

func newServer(t testing.TB, kind string) *Server {
	s := &Server{Kind: kind, t: t, faults: map[string][]Fault{}, nextID: 10000,
		User: "dev@example.com", Token: "test-api-token-7f3a9c", PAT: "test-pat-value-51be2d",
		GitLabCanList: true, GiteaAllowed: ".gz,.tgz,.zip,.log,.txt,.md", GiteaMaxMB: 2048}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.Server.CloseClientConnections()
		s.Server.Close()
		for _, v := range s.Violations() {
			t.Errorf("%s server: %s", kind, v)
		}
	})
	return s
}

// NewJira is Jira's REST v2 (attachments, comments) and v3 comments, issue PROJ-1.
func NewJira(t testing.TB) *Server { return newServer(t, "jira") }

// NewGitLab is GitLab's API v4, project group/sub/project, issue 7.
func NewGitLab(t testing.TB) *Server { return newServer(t, "gitlab") }

// NewGitHub is GitHub's REST API, octo/repo issue 5.
func NewGitHub(t testing.TB) *Server { return newServer(t, "github") }

// NewGitea is a Gitea served under /git, octo/repo issue 3.
func NewGitea(t testing.TB) *Server { return newServer(t, "gitea") }

// NewPut is an object store taking pre-signed PUTs under /bucket/.
func NewPut(t testing.TB) *Server { return newServer(t, "put") }

// Target is the --to value that points at this server.
func (s *Server) Target() string {
	switch s.Kind {
	case "jira":
		return "jira:PROJ-1"
	case "gitlab":
		return "gitlab:group/sub/project#7"
	case "github":
		return "github:octo/repo#5"
	case "gitea":
		return "gitea:" + s.URL + "/git/octo/repo#3"
	case "put":
		return s.URL + "/bucket/crash.tar.gz?X-Amz-Signature=" + putSignature + "&X-Amz-Expires=600"
	}
	return ""
}

const putSignature = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"

// Env is the environment that points kcrash at this server.
func (s *Server) Env() map[string]string {
	switch s.Kind {
	case "jira":
		return map[string]string{"JIRA_URL": s.URL, "JIRA_USER": s.User, "JIRA_API_TOKEN": s.Token}
	case "gitlab":
		return map[string]string{"GITLAB_URL": s.URL, "GITLAB_TOKEN": s.Token}
	case "github":
		return map[string]string{"GITHUB_API_URL": s.URL, "GITHUB_TOKEN": s.Token}
	case "gitea":
		return map[string]string{"GITEA_TOKEN": s.Token}
	}
	return map[string]string{}
}

// Getenv looks up Env, for upload.Options.Env.
func (s *Server) Getenv(k string) string { return s.Env()[k] }

// Secrets are the values that must never be printed or sent in a body.
func (s *Server) Secrets() []string { return []string{s.Token, s.PAT, putSignature} }

// Fault queues faults for the next requests of op, one each.
func (s *Server) Fault(op string, f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = append(s.faults[op], f...)
}

// Files are the attachments stored, in order.
func (s *Server) Files() []File {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]File(nil), s.files...)
}

// Comments are the comment bodies stored: text, or the ADF JSON for Jira v3.
func (s *Server) Comments() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.comments...)
}

// Requests lists "METHOD path" of every request.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Violations are requests the real API would not accept as sent.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

func (s *Server) violate(w http.ResponseWriter, format string, a ...any) {
	s.mu.Lock()
	s.violations = append(s.violations, fmt.Sprintf(format, a...))
	s.mu.Unlock()
	http.Error(w, `{"message":"rejected by the fake: `+fmt.Sprintf(format, a...)+`"}`, http.StatusBadRequest)
}

func (s *Server) popFault(op string) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[op]
	if len(q) == 0 {
		return Fault{}
	}
	s.faults[op] = q[1:]
	return q[0]
}

func (s *Server) id() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return s.nextID
}

type route struct {
	op      string
	handler func(w http.ResponseWriter, r *http.Request)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+p)
	s.mu.Unlock()
	var rt *route
	switch s.Kind {
	case "jira":
		rt = s.jira(r, p)
	case "gitlab":
		rt = s.gitlab(r, p)
	case "github":
		rt = s.github(r, p)
	case "gitea":
		rt = s.gitea(r, p)
	case "put":
		rt = s.put(r, p)
	}
	if rt == nil {
		s.violate(w, "no such endpoint: %s %s", r.Method, p)
		return
	}
	if !s.auth(w, r) {
		return
	}
	f := s.popFault(rt.op)
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case f.Drop:
		if r.ContentLength > 1 {
			io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		}
		hangUp(w)
	case f.Status != 0:
		io.Copy(io.Discard, r.Body)
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.Status)
		fmt.Fprintf(w, `{"message":"injected %d"}`, f.Status)
	case f.DropAfter:
		rt.handler(httptest.NewRecorder(), r)
		hangUp(w)
	default:
		rt.handler(w, r)
	}
}

func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// auth checks the scheme (a violation when wrong) and the value (401).
func (s *Server) auth(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header.Get("Authorization")
	ok := false
	switch s.Kind {
	case "jira":
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(s.User+":"+s.Token))
		switch {
		case strings.HasPrefix(h, "Basic "), strings.HasPrefix(h, "Bearer "):
			ok = h == basic || h == "Bearer "+s.PAT
		default:
			s.violate(w, "Jira wants Authorization Basic or Bearer, got %q", scheme(h))
			return false
		}
	case "gitlab":
		if h != "" {
			s.violate(w, "GitLab tokens go in PRIVATE-TOKEN here, not Authorization")
			return false
		}
		ok = r.Header.Get("PRIVATE-TOKEN") == s.Token
	case "github":
		if !strings.HasPrefix(h, "Bearer ") {
			s.violate(w, "GitHub wants Authorization: Bearer, got %q", scheme(h))
			return false
		}
		ok = h == "Bearer "+s.Token
	case "gitea":
		if !strings.HasPrefix(h, "token ") {
			s.violate(w, "Gitea wants Authorization: token, got %q", scheme(h))
			return false
		}
		ok = h == "token "+s.Token
	case "put":
		if h != "" {
			s.violate(w, "a pre-signed PUT carries no Authorization header")
			return false
		}
		ok = r.URL.Query().Get("X-Amz-Signature") == putSignature
	}
	if !ok {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"message":"401 Unauthorized"}`)
	}
	return ok
}

func scheme(h string) string {
	s, _, _ := strings.Cut(h, " ")
	return s
}

// readFile checks a multipart/form-data body with exactly one file part in
// field and a Content-Length (no chunking), and returns the file.
func (s *Server) readFile(w http.ResponseWriter, r *http.Request, field string) (string, []byte, bool) {
	if len(r.TransferEncoding) > 0 || r.ContentLength <= 0 {
		s.violate(w, "attachment body without a Content-Length (%v)", r.TransferEncoding)
		return "", nil, false
	}
	if s.MaxBytes > 0 && r.ContentLength > s.MaxBytes {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return "", nil, false
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		s.violate(w, "attachment Content-Type %q, want multipart/form-data", r.Header.Get("Content-Type"))
		return "", nil, false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return "", nil, false
	}
	if int64(len(body)) != r.ContentLength {
		s.violate(w, "body %d bytes, Content-Length %d", len(body), r.ContentLength)
		return "", nil, false
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var name string
	var data []byte
	n := 0
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.violate(w, "bad multipart body: %v", err)
			return "", nil, false
		}
		n++
		if part.FormName() != field {
			s.violate(w, "multipart field %q, want %q", part.FormName(), field)
			return "", nil, false
		}
		name = part.FileName()
		data, _ = io.ReadAll(part)
	}
	if n != 1 || name == "" {
		s.violate(w, "want one file part in field %q, got %d parts (filename %q)", field, n, name)
		return "", nil, false
	}
	return name, data, true
}

func (s *Server) store(name string, data []byte) File {
	f := File{ID: s.id(), Name: name, Data: data}
	s.mu.Lock()
	s.files = append(s.files, f)
	s.mu.Unlock()
	return f
}

func (s *Server) addComment(body string) int {
	id := s.id()
	s.mu.Lock()
	s.comments = append(s.comments, body)
	s.mu.Unlock()
	return id
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// readJSON checks a JSON body and decodes it.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		s.violate(w, "comment Content-Type %q, want application/json", r.Header.Get("Content-Type"))
		return false
	}
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		s.violate(w, "comment body: %v", err)
		return false
	}
	return true
}

func (s *Server) jira(r *http.Request, p string) *route {
	const base = "/rest/api/2/issue/PROJ-1"
	type att struct {
		ID       string `json:"id"`
		Filename string `json:"filename"`
		Size     int    `json:"size"`
		Content  string `json:"content"`
	}
	atts := func() []att {
		var out []att
		for _, f := range s.Files() {
			out = append(out, att{ID: strconv.Itoa(f.ID), Filename: f.Name, Size: len(f.Data), Content: fmt.Sprintf("%s/secure/attachment/%d/%s", s.URL, f.ID, url.PathEscape(f.Name))})
		}
		return out
	}
	comment := func(w http.ResponseWriter, r *http.Request, adf bool) {
		var body struct {
			Body json.RawMessage `json:"body"`
		}
		if !s.readJSON(w, r, &body) {
			return
		}
		var text string
		if adf {
			var doc struct {
				Type    string `json:"type"`
				Version int    `json:"version"`
				Content []any  `json:"content"`
			}
			if json.Unmarshal(body.Body, &doc) != nil || doc.Type != "doc" || doc.Version != 1 || len(doc.Content) == 0 {
				s.violate(w, "v3 comment body is not an ADF document: %.80s", body.Body)
				return
			}
			if bytes.Contains(body.Body, []byte(`"text":""`)) {
				s.violate(w, "ADF text nodes must not be empty")
				return
			}
			text = string(body.Body)
		} else if json.Unmarshal(body.Body, &text) != nil || text == "" {
			s.violate(w, "v2 comment body must be a string")
			return
		}
		if len([]rune(text)) > 32767 {
			s.violate(w, "comment over 32767 characters")
			return
		}
		id := s.addComment(text)
		writeJSON(w, 201, map[string]any{"id": strconv.Itoa(id), "self": fmt.Sprintf("%s%s/comment/%d", s.URL, base, id)})
	}
	switch {
	case r.Method == "GET" && p == base && r.URL.Query().Get("fields") == "attachment":
		return &route{OpLookup, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]any{"key": "PROJ-1", "fields": map[string]any{"attachment": atts()}})
		}}
	case r.Method == "POST" && p == base+"/attachments":
		return &route{OpAttach, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Atlassian-Token") != "no-check" {
				s.violate(w, "attachment without X-Atlassian-Token: no-check (XSRF check failed)")
				return
			}
			name, data, ok := s.readFile(w, r, "file")
			if !ok {
				return
			}
			s.store(name, data)
			all := atts()
			writeJSON(w, 200, all[len(all)-1:])
		}}
	case r.Method == "GET" && p == base+"/comment":
		return &route{OpLookup, func(w http.ResponseWriter, r *http.Request) {
			var cs []map[string]any
			for i, c := range s.Comments() {
				cs = append(cs, map[string]any{"id": strconv.Itoa(i), "body": c})
			}
			writeJSON(w, 200, map[string]any{"comments": cs, "total": len(cs)})
		}}
	case r.Method == "POST" && p == base+"/comment":
		return &route{OpComment, func(w http.ResponseWriter, r *http.Request) { comment(w, r, false) }}
	case r.Method == "POST" && p == "/rest/api/3/issue/PROJ-1/comment":
		return &route{OpComment, func(w http.ResponseWriter, r *http.Request) { comment(w, r, true) }}
	}
	return nil
}

func (s *Server) gitlab(r *http.Request, p string) *route {
	// The project id is one URL-encoded segment: group%2Fsub%2Fproject.
	const base = "/api/v4/projects/group%2Fsub%2Fproject"
	switch {
	case r.Method == "GET" && p == base+"/uploads":
		return &route{OpLookup, func(w http.ResponseWriter, r *http.Request) {
			if !s.GitLabCanList {
				writeJSON(w, 403, map[string]any{"message": "403 Forbidden"})
				return
			}
			var out []map[string]any
			for _, f := range s.Files() {
				out = append(out, map[string]any{"id": f.ID, "size": len(f.Data), "filename": f.Name, "created_at": time.Now().UTC().Format(time.RFC3339)})
			}
			writeJSON(w, 200, out)
		}}
	case r.Method == "DELETE" && strings.HasPrefix(p, base+"/uploads/"):
		return &route{OpLookup, func(w http.ResponseWriter, r *http.Request) {
			id, _ := strconv.Atoi(strings.TrimPrefix(p, base+"/uploads/"))
			s.mu.Lock()
			defer s.mu.Unlock()
			for i, f := range s.files {
				if f.ID == id {
					s.files = append(s.files[:i], s.files[i+1:]...)
					w.WriteHeader(204)
					return
				}
			}
			w.WriteHeader(404)
		}}
	case r.Method == "POST" && p == base+"/uploads":
		return &route{OpAttach, func(w http.ResponseWriter, r *http.Request) {
			name, data, ok := s.readFile(w, r, "file")
			if !ok {
				return
			}
			f := s.store(name, data)
			secret := fmt.Sprintf("%032x", f.ID)
			u := "/uploads/" + secret + "/" + name
			writeJSON(w, 201, map[string]any{"id": f.ID, "alt": name, "url": u,
				"full_path": "/-/project/42/uploads/" + secret + "/" + name, "markdown": "[" + name + "](" + u + ")"})
		}}
	case p == base+"/issues/7/notes" && r.Method == "GET":
		return &route{OpLookup, func(w http.ResponseWriter, r *http.Request) {
			var out []map[string]any
			cs := s.Comments()
			for i := len(cs) - 1; i >= 0; i-- {
				out = append(out, map[string]any{"id": i, "body": cs[i]})
			}
			writeJSON(w, 200, out)
		}}
	case p == base+"/issues/7/notes" && r.Method == "POST":
		return &route{OpComment, func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Body string `json:"body"`
			}
			if !s.readJSON(w, r, &body) || body.Body == "" {
				return
			}
			id := s.addComment(body.Body)
			writeJSON(w, 201, map[string]any{"id": id, "body": body.Body, "noteable_iid": 7})
		}}
	}
	return nil
}

func (s *Server) github(r *http.Request, p string) *route {
	const base = "/repos/octo/repo/issues/5/comments"
	if p != base {
		return nil
	}
	check := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" {
			s.violate(w, "GitHub wants Accept: application/vnd.github+json and X-GitHub-Api-Version: 2022-11-28")
			return false
		}
		return true
	}
	switch r.Method {
	case "GET":
		return &route{OpLookup, func(w http.ResponseWriter, r *http.Request) {
			if !check(w, r) {
				return
			}
			var out []map[string]any
			for i, c := range s.Comments() {
				out = append(out, map[string]any{"id": i, "body": c, "html_url": fmt.Sprintf("https://github.example/octo/repo/issues/5#issuecomment-%d", i)})
			}
			writeJSON(w, 200, out)
		}}
	case "POST":
		return &route{OpComment, func(w http.ResponseWriter, r *http.Request) {
			if !check(w, r) {
				return
			}
			var body struct {
				Body string `json:"body"`
			}
			if !s.readJSON(w, r, &body) {
				return
			}
			if n := len([]rune(body.Body)); n > 65536 || n == 0 {
				s.violate(w, "comment of %d characters; GitHub answers 422 body is too long (maximum is 65536 characters)", n)
				return
			}
			id := s.addComment(body.Body)
			writeJSON(w, 201, map[string]any{"id": id, "html_url": fmt.Sprintf("https://github.example/octo/repo/issues/5#issuecomment-%d", id)})
		}}
	}
	return nil
}

func (s *Server) gitea(r *http.Request, p string) *route {
	const base = "/git/api/v1/repos/octo/repo/issues/3"
	assets := func() []map[string]any {
		var out []map[string]any
		for _, f := range s.Files() {
			out = append(out, map[string]any{"id": f.ID, "name": f.Name, "size": len(f.Data), "uuid": fmt.Sprintf("uuid-%d", f.ID),
				"browser_download_url": fmt.Sprintf("%s/git/attachments/uuid-%d", s.URL, f.ID)})
		}
		return out
	}
	switch {
	case r.Method == "GET" && p == "/git/api/v1/settings/attachment":
		return &route{OpLookup, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]any{"enabled": true, "allowed_types": s.GiteaAllowed, "max_size": s.GiteaMaxMB, "max_files": 5})
		}}
	case r.Method == "GET" && p == base+"/assets":
		return &route{OpLookup, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, assets()) }}
	case r.Method == "POST" && p == base+"/assets":
		return &route{OpAttach, func(w http.ResponseWriter, r *http.Request) {
			name, data, ok := s.readFile(w, r, "attachment")
			if !ok {
				return
			}
			if q := r.URL.Query().Get("name"); q != "" {
				name = q
			}
			allowed := false
			for _, e := range strings.Split(s.GiteaAllowed, ",") {
				if e = strings.TrimSpace(e); e == "*/*" || (strings.HasPrefix(e, ".") && strings.HasSuffix(strings.ToLower(name), e)) {
					allowed = true
				}
			}
			if !allowed {
				writeJSON(w, 422, map[string]any{"message": "This file extension or type is not allowed to be uploaded"})
				return
			}
			s.store(name, data)
			all := assets()
			writeJSON(w, 201, all[len(all)-1])
		}}
	case r.Method == "GET" && p == base+"/comments":
		return &route{OpLookup, func(w http.ResponseWriter, r *http.Request) {
			var out []map[string]any
			for i, c := range s.Comments() {
				out = append(out, map[string]any{"id": i, "body": c, "html_url": fmt.Sprintf("%s/git/octo/repo/issues/3#issuecomment-%d", s.URL, i)})
			}
			writeJSON(w, 200, out)
		}}
	case r.Method == "POST" && p == base+"/comments":
		return &route{OpComment, func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Body string `json:"body"`
			}
			if !s.readJSON(w, r, &body) || body.Body == "" {
				return
			}
			id := s.addComment(body.Body)
			writeJSON(w, 201, map[string]any{"id": id, "html_url": fmt.Sprintf("%s/git/octo/repo/issues/3#issuecomment-%d", s.URL, id)})
		}}
	}
	return nil
}

func (s *Server) put(r *http.Request, p string) *route {
	if r.Method != "PUT" || !strings.HasPrefix(p, "/bucket/") {
		return nil
	}
	return &route{OpAttach, func(w http.ResponseWriter, r *http.Request) {
		// S3 answers 411 MissingContentLength / 501 for chunked uploads to pre-signed URLs.
		if len(r.TransferEncoding) > 0 || r.ContentLength < 0 {
			s.violate(w, "PUT without a Content-Length (Transfer-Encoding %v)", r.TransferEncoding)
			return
		}
		if s.MaxBytes > 0 && r.ContentLength > s.MaxBytes {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		data, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if int64(len(data)) != r.ContentLength {
			s.violate(w, "PUT body %d bytes, Content-Length %d", len(data), r.ContentLength)
			return
		}
		name := strings.TrimPrefix(p, "/bucket/")
		s.mu.Lock()
		for i, f := range s.files {
			if f.Name == name { // PUT replaces
				s.files = append(s.files[:i], s.files[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		f := s.store(name, data)
		w.Header().Set("ETag", `"`+f.SHA256()[:32]+`"`)
		w.WriteHeader(200)
	}}
}

// BundleOptions shape a test bundle.
type BundleOptions struct {
	Kind, Confidence, Summary string // the verdict
	SummaryMD                 string // summary.md; a default naming the verdict when empty
	Files                     map[string][]byte
}

// Bundle writes a real bundle into dir with the bundle package and returns its path.
func Bundle(t testing.TB, dir string, o BundleOptions) string {
	t.Helper()
	if o.Kind == "" {
		o.Kind, o.Confidence, o.Summary = "gpu_page_fault", "high", "amdgpu VM fault at 0x7f3a00001000 in kernel paged_attention_fwd"
	}
	if o.SummaryMD == "" {
		o.SummaryMD = "# kcrash: " + o.Kind + " (" + o.Confidence + ")\n\n" + o.Summary + "\n\n## Evidence\n\n```\n[ 1234.5] amdgpu 0000:c1:00.0: [gfxhub] page fault (src_id:0 ring:24 vmid:3 pasid:32770)\n```\n\n## Next steps\n\n- rerun with --profile rocm-sync\n"
	}
	st, err := bundle.NewStage(t.TempDir(), bundle.Name(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "node1", 4242, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Remove()
	files := map[string][]byte{"summary.md": []byte(o.SummaryMD), "output.log": []byte("loading model\nMemory access fault by GPU node-2\n")}
	for k, v := range o.Files {
		files[k] = v
	}
	for name, data := range files {
		p := filepath.Join(st.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tri, _ := json.Marshal(map[string]any{"verdict": map[string]string{"kind": o.Kind, "confidence": o.Confidence, "summary": o.Summary}, "findings": []any{}, "next_steps": []string{}})
	sig, code := "SIGABRT", 134
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, KcrashVersion: "test", Mode: "run", Command: []string{"python", "-m", "sglang.launch_server"},
		Exit: bundle.Exit{Code: &code, Signal: &sig, CoreDumped: true}, Host: bundle.Host{Hostname: "node1", Kernel: "6.8.0"}, Triage: tri}
	res, err := st.Write(m, bundle.WriteOptions{Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	return res.Path
}
