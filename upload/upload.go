// Package upload sends a crash bundle to where people will look at it: a
// ticket (Jira, GitLab, GitHub, Gitea), an object store (an S3 bucket through
// the AWS SDK, or an HTTP PUT), or a path.
//
// Every upload goes through the same gate first: the bundle is read back and
// scanned for secrets once more, its size is checked against the target's
// limit, and only then is anything sent. Credentials come from Options.Env
// (the environment or the config file), never from the target string, and
// never appear in a comment, a dry-run plan, an error or --json output.
package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/redact"
	"github.com/kcrash/kcrash/internal/s3client"
	"github.com/kcrash/kcrash/internal/visible"
)

// Kind names a family of targets.
type Kind string

// Target kinds.
const (
	Jira   Kind = "jira"
	GitLab Kind = "gitlab"
	GitHub Kind = "github"
	Gitea  Kind = "gitea"
	HTTP   Kind = "http"
	S3     Kind = "s3"
	File   Kind = "file"
)

// Target is a parsed --to value.
type Target struct {
	Kind    Kind
	Issue   string   // jira: the issue key; gitlab/github/gitea: the issue number as written
	Number  int      // gitlab IID, github/gitea issue number
	Project string   // gitlab: group/subgroup/project or a numeric id; github, gitea: owner/repo
	Base    string   // gitea: https://host[/prefix], the instance the issue lives on
	URL     *url.URL // http: where to PUT
	Path    string   // file: destination file, or directory when it ends in /
	Bucket  string   // s3: the bucket
	Prefix  string   // s3: the key prefix, "" or ending in /; the object is Prefix + the bundle's name
}

var (
	jiraKey     = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9_]*-[0-9]+|[0-9]+)$`)
	ownerRepo   = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	gitlabPath  = regexp.MustCompile(`^(?:[0-9]+|[A-Za-z0-9_.][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.][A-Za-z0-9_.-]*)+)$`)
	targetUsage = "want jira:KEY-123, gitlab:group/project#IID, github:owner/repo#N, gitea:https://host/owner/repo#N, https://..., http://..., s3://bucket/prefix or file:///path"
)

// ParseTarget parses a --to value. Its errors never repeat a URL's query or
// user info: a pre-signed URL's signature is a credential.
func ParseTarget(s string) (Target, error) {
	scheme, rest, _ := strings.Cut(s, ":")
	switch strings.ToLower(scheme) {
	case "jira":
		if !jiraKey.MatchString(rest) {
			return Target{}, fmt.Errorf("target %q: want an issue key, as in jira:PROJ-123", s)
		}
		return Target{Kind: Jira, Issue: strings.ToUpper(rest)}, nil
	case "gitlab":
		proj, n, err := projectNumber(s, rest, gitlabPath, "gitlab:group/project#IID")
		if err != nil {
			return Target{}, err
		}
		return Target{Kind: GitLab, Project: proj, Number: n, Issue: strconv.Itoa(n)}, nil
	case "github":
		proj, n, err := projectNumber(s, rest, ownerRepo, "github:owner/repo#N")
		if err != nil {
			return Target{}, err
		}
		return Target{Kind: GitHub, Project: proj, Number: n, Issue: strconv.Itoa(n)}, nil
	case "gitea", "forgejo":
		return parseGitea(s, rest)
	case "http", "https":
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.Opaque != "" {
			return Target{}, fmt.Errorf("target %s: not a usable URL", safeURL(u, s))
		}
		if u.User != nil {
			return Target{}, fmt.Errorf("target %s: user:password in the URL would sit in shell history; use a pre-signed URL", safeURL(u, s))
		}
		u.Fragment, u.RawFragment = "", ""
		return Target{Kind: HTTP, URL: u}, nil
	case "s3":
		loc, err := s3client.Parse(s)
		if err != nil {
			return Target{}, fmt.Errorf("target %s: want s3://bucket/prefix (credentials come from the AWS SDK's chain, not the URL)", safeURL(nil, s))
		}
		return Target{Kind: S3, Bucket: loc.Bucket, Prefix: loc.Prefix}, nil
	case "file":
		u, err := url.Parse(s)
		if err != nil || (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") {
			return Target{}, fmt.Errorf("target %q: want file:///absolute/path", s)
		}
		p := filepath.FromSlash(u.Path)
		if strings.HasSuffix(u.Path, "/") && !strings.HasSuffix(p, string(filepath.Separator)) {
			p += string(filepath.Separator)
		}
		return Target{Kind: File, Path: p}, nil
	}
	return Target{}, fmt.Errorf("unknown target %q: %s", s, targetUsage)
}

func projectNumber(s, rest string, re *regexp.Regexp, form string) (string, int, error) {
	proj, num, ok := strings.Cut(rest, "#")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n <= 0 || !re.MatchString(proj) {
		return "", 0, fmt.Errorf("target %q: want %s", s, form)
	}
	return proj, n, nil
}

func parseGitea(s, rest string) (Target, error) {
	bad := fmt.Errorf("target %q: want gitea:https://host/owner/repo#N", s)
	u, err := url.Parse(rest)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
		return Target{}, bad
	}
	if u.User != nil {
		return Target{}, fmt.Errorf("target %q: credentials go in GITEA_TOKEN, not the URL", u.Redacted())
	}
	n, err := strconv.Atoi(u.Fragment)
	if err != nil || n <= 0 {
		return Target{}, bad
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(segs) < 2 {
		return Target{}, bad
	}
	proj := strings.Join(segs[len(segs)-2:], "/")
	if !ownerRepo.MatchString(proj) {
		return Target{}, bad
	}
	base := u.Scheme + "://" + u.Host
	if prefix := strings.Join(segs[:len(segs)-2], "/"); prefix != "" {
		base += "/" + prefix
	}
	return Target{Kind: Gitea, Base: base, Project: proj, Number: n, Issue: strconv.Itoa(n)}, nil
}

// String is the target as it may be printed: a pre-signed URL's query is hidden.
func (t Target) String() string {
	switch t.Kind {
	case Jira:
		return "jira:" + t.Issue
	case GitLab, GitHub:
		return fmt.Sprintf("%s:%s#%d", t.Kind, t.Project, t.Number)
	case Gitea:
		return fmt.Sprintf("gitea:%s/%s#%d", t.Base, t.Project, t.Number)
	case HTTP:
		return safeURL(t.URL, "")
	case File:
		return "file://" + filepath.ToSlash(t.Path)
	case S3:
		return s3client.Location{Bucket: t.Bucket, Prefix: t.Prefix}.String()
	}
	return string(t.Kind)
}

// safeURL prints u without user info or query: both carry credentials in
// pre-signed and basic-auth URLs.
func safeURL(u *url.URL, raw string) string {
	if u == nil {
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			raw = raw[:i] + "?…"
		}
		if i := strings.Index(raw, "@"); i >= 0 {
			if j := strings.Index(raw, "://"); j >= 0 && j < i {
				raw = raw[:j+3] + "…@" + raw[i+1:]
			}
		}
		return raw
	}
	c := *u
	c.User = nil
	hidden := c.RawQuery != ""
	c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = "", false, "", ""
	if hidden {
		return c.String() + "?…"
	}
	return c.String()
}

// withoutUserinfo drops user:password@ from a URL, keeping the rest as is.
func withoutUserinfo(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i, j := strings.Index(raw, "://"), strings.Index(raw, "@"); err != nil && i >= 0 && j > i {
			return raw[:i+3] + raw[j+1:]
		}
		return raw
	}
	u.User = nil
	return u.String()
}

// Options control an upload. The zero value is usable.
type Options struct {
	DryRun          bool   // describe what would be sent where; send nothing
	AllowUnredacted bool   // send even when the secrets scan finds something
	MaxSize         int64  // refuse bundles larger than this; 0: the target's own default
	BundleURL       string // where the bundle can be downloaded, for targets that cannot hold it (GitHub)
	ADF             bool   // Jira: comment through API v3 in Atlassian Document Format

	// Env looks up credentials and service URLs (JIRA_URL, GITLAB_TOKEN...).
	// nil means os.Getenv; the CLI chains the config file behind it.
	Env func(string) string

	HTTPClient   *http.Client  // nil: a client honouring HTTPS_PROXY; redirects are never followed
	Retry        Retry         // zero fields take the defaults
	StallTimeout time.Duration // give up an attempt after this long with no byte sent and no answer; default 60s

	Progress io.Writer        // a terminal to draw a progress bar on for large bodies; nil: none
	Log      io.Writer        // retry notices and warnings, one line each; nil: discarded
	Redactor *redact.Redactor // nil: built from os.Environ() plus the upload credentials
}

// Retry bounds the retries of one request. Retries happen on 429, 5xx, and
// connections that dropped or stalled, with exponential backoff and jitter;
// a Retry-After header replaces the computed wait.
type Retry struct {
	InitialInterval time.Duration // default 500ms
	MaxInterval     time.Duration // default 30s
	MaxElapsed      time.Duration // default 5m, the attempts' own time included
	MaxTries        uint          // default 8
	MaxRetryAfter   time.Duration // a longer Retry-After ends the retries; default 2m
}

func (r Retry) withDefaults() Retry {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&r.InitialInterval, 500*time.Millisecond)
	def(&r.MaxInterval, 30*time.Second)
	def(&r.MaxElapsed, 5*time.Minute)
	def(&r.MaxRetryAfter, 2*time.Minute)
	if r.MaxTries == 0 {
		r.MaxTries = 8
	}
	return r
}

// Result is what one upload created, printed by --json.
type Result struct {
	Target     string   `json:"target"`
	Kind       Kind     `json:"kind"`
	Bundle     string   `json:"bundle"`
	Size       int64    `json:"size"`
	SHA256     string   `json:"sha256"`
	DryRun     bool     `json:"dry_run,omitempty"`
	Attachment *Created `json:"attachment,omitempty"`
	Comment    *Created `json:"comment,omitempty"`
	Plan       []Step   `json:"plan,omitempty"`
	Retries    int      `json:"retries"`
	Warnings   []string `json:"warnings,omitempty"`
}

// Created is one object an upload made on the server (or found there).
type Created struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	URL  string `json:"url,omitempty"`
	// Reused: an identical one was already there (an earlier try whose answer
	// was lost, or an earlier run), so none was added.
	Reused bool `json:"reused,omitempty"`
}

// BundleURL is where the bundle can be fetched after this upload, "" when
// the target keeps no copy reachable over HTTP.
func (r *Result) BundleURL() string {
	if r == nil || r.Attachment == nil || r.DryRun {
		return ""
	}
	if u, err := url.Parse(r.Attachment.URL); err == nil && (u.Scheme == "https" || u.Scheme == "http") {
		return r.Attachment.URL
	}
	return ""
}

// Step is one request a dry run would make.
type Step struct {
	Why     string   `json:"why"`
	Method  string   `json:"method"`
	URL     string   `json:"url"`
	Headers []string `json:"headers,omitempty"`
	Body    string   `json:"body,omitempty"`    // exactly what is sent, or a description of a file body
	Comment string   `json:"comment,omitempty"` // the comment's text inside Body, for humans to read
}

// Uploader is one kind of target.
type Uploader interface {
	// Plan lists the requests Upload would make, sending nothing.
	Plan(j *Job) ([]Step, error)
	// Upload sends the bundle and fills j.Result with what it created.
	Upload(ctx context.Context, j *Job) error
}

func uploaderFor(k Kind) Uploader {
	switch k {
	case Jira:
		return jiraUploader{}
	case GitLab:
		return gitlabUploader{}
	case GitHub:
		return githubUploader{}
	case Gitea:
		return giteaUploader{}
	case HTTP:
		return putUploader{}
	case File:
		return fileUploader{}
	case S3:
		return s3Uploader{}
	}
	return nil
}

// Payload is a bundle that passed the checks, and what comments say about it.
type Payload struct {
	Path    string
	Name    string
	Size    int64
	SHA256  string
	Verdict Verdict
	Summary string // summary.md, secrets masked
	Host    string
	Exit    string // "exit code 1", "signal SIGSEGV (core dumped)"
}

// Verdict is manifest.triage.verdict (SPEC §5).
type Verdict struct {
	Kind       string `json:"kind"`
	Confidence string `json:"confidence"`
	Summary    string `json:"summary"`
}

// Job is one bundle going to one target.
type Job struct {
	Target  Target
	Payload *Payload
	Opts    Options
	Result  *Result

	client  *http.Client
	start   time.Time
	retries int
}

// env looks up a credential or setting.
func (j *Job) env(k string) string {
	if j.Opts.Env != nil {
		return strings.TrimSpace(j.Opts.Env(k))
	}
	return strings.TrimSpace(os.Getenv(k))
}

func (j *Job) warn(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	j.Result.Warnings = append(j.Result.Warnings, msg)
	if j.Opts.Log != nil {
		fmt.Fprintf(j.Opts.Log, "kcrash: %s: warning: %s\n", j.Target, msg)
	}
}

// credentialNames are every variable whose value authenticates an upload: the
// secrets scan and the comment masking treat their values as secrets even
// when they come from the config file rather than the environment.
var credentialNames = []string{"JIRA_API_TOKEN", "JIRA_PAT", "GITLAB_TOKEN", "GITHUB_TOKEN", "GITEA_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// Do checks the bundle at bundlePath and sends it to target: what
// `kcrash upload` and `kcrash run --upload` both call.
func Do(ctx context.Context, bundlePath string, target string, opts Options) (*Result, error) {
	res, err := DoAll(ctx, bundlePath, []string{target}, opts)
	if len(res) > 0 {
		return res[0], err
	}
	return nil, err
}

// DoAll sends one bundle to several targets in order, stopping at the first
// failure. A target that cannot hold the bundle (GitHub) links to the copy an
// earlier target made, unless opts.BundleURL names one: so
// `--to https://bucket/... --to github:o/r#1` puts then links.
func DoAll(ctx context.Context, bundlePath string, targets []string, opts Options) ([]*Result, error) {
	var ts []Target
	for _, s := range targets {
		t, err := ParseTarget(s)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return nil, errors.New("no upload target")
	}
	p, err := Load(bundlePath, opts)
	if err != nil {
		return nil, err
	}
	var out []*Result
	for _, t := range ts {
		r, err := Send(ctx, p, t, opts)
		if r != nil {
			out = append(out, r)
		}
		if err != nil {
			return out, err
		}
		if opts.BundleURL == "" && r.BundleURL() != "" {
			opts.BundleURL = r.BundleURL()
			if t.Kind == HTTP && t.URL.RawQuery != "" && opts.Log != nil {
				fmt.Fprintf(opts.Log, "kcrash: %s: warning: later targets link %s, the URL without its signature; it opens only if the bucket allows reads (else pass --bundle-url)\n", t, opts.BundleURL)
			}
		}
	}
	return out, nil
}

// Load reads the bundle back and refuses it when it holds something that
// looks like a secret (SPEC §4), naming the file and line, unless
// opts.AllowUnredacted. The bundle was redacted when written, but it may
// have been written by another version, edited, or made on a host whose
// secrets differ from this one's.
func Load(bundlePath string, opts Options) (*Payload, error) {
	fi, err := os.Stat(bundlePath)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a bundle file", bundlePath)
	}
	r := redactorFor(opts)
	sc := &scanner{r: r}
	visit := sc.visit
	if opts.AllowUnredacted {
		visit = nil
	}
	b, err := bundle.OpenFunc(bundlePath, visit)
	if err != nil {
		return nil, err
	}
	if err := sc.verdict(b.Path); err != nil {
		return nil, err
	}
	sum, err := fileSHA256(bundlePath)
	if err != nil {
		return nil, err
	}
	p := &Payload{Path: bundlePath, Name: filepath.Base(bundlePath), Size: fi.Size(), SHA256: sum}
	var tri struct {
		Verdict Verdict `json:"verdict"`
	}
	if len(b.Manifest.Triage) > 0 && string(b.Manifest.Triage) != "null" {
		if err := json.Unmarshal(b.Manifest.Triage, &tri); err != nil {
			return nil, fmt.Errorf("%s: manifest.json: triage: %v", bundlePath, err)
		}
	}
	p.Verdict = Verdict{Kind: r.String(tri.Verdict.Kind), Confidence: r.String(tri.Verdict.Confidence), Summary: r.String(tri.Verdict.Summary)}
	if p.Verdict.Kind == "" {
		p.Verdict.Kind = "unknown"
	}
	if s, ok := b.File("summary.md"); ok {
		p.Summary = r.String(string(s))
	}
	p.Host = r.String(b.Manifest.Host.Hostname)
	p.Exit = describeExit(b.Manifest.Exit)
	return p, nil
}

func redactorFor(opts Options) *redact.Redactor {
	if opts.Redactor != nil {
		return opts.Redactor
	}
	env := os.Environ()
	get := opts.Env
	if get == nil {
		get = os.Getenv
	}
	for _, k := range credentialNames {
		if v := get(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return redact.New(env)
}

// scanner looks for secrets in every file of a bundle as it streams past,
// whatever its size.
type scanner struct {
	r     *redact.Redactor
	hits  []string
	total int
}

func (sc *scanner) visit(name string, rd io.Reader) error {
	return sc.r.Scan(rd, func(line int) {
		sc.total++
		if len(sc.hits) < 3 {
			sc.hits = append(sc.hits, fmt.Sprintf("%s line %d", name, line))
		}
	})
}

// verdict refuses a bundle with a secret in it. The message names places,
// never the secret: it ends up in terminals, CI logs and --json.
func (sc *scanner) verdict(path string) error {
	if sc.total == 0 {
		return nil
	}
	more := ""
	if sc.total > len(sc.hits) {
		more = fmt.Sprintf(" and %d more", sc.total-len(sc.hits))
	}
	return fmt.Errorf("refusing to upload %s: it holds what looks like a secret at %s%s (a token shape, or the value of a secret-named variable); check it, or pass --allow-unredacted",
		filepath.Base(path), visible.Line(strings.Join(sc.hits, ", ")), more)
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func describeExit(e bundle.Exit) string {
	var s string
	switch {
	case e.Signal != nil && *e.Signal != "":
		s = "signal " + *e.Signal
		if e.CoreDumped {
			s += " (core dumped)"
		}
	case e.Code != nil:
		s = fmt.Sprintf("exit code %d", *e.Code)
	default:
		s = "exit unknown"
	}
	if e.Reason != "" {
		s += ", " + e.Reason
	}
	return s
}

// Send sends a loaded bundle to one target, or with opts.DryRun describes
// what it would send.
func Send(ctx context.Context, p *Payload, t Target, opts Options) (*Result, error) {
	opts.Retry = opts.Retry.withDefaults()
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = 60 * time.Second
	}
	j := &Job{
		Target: t, Payload: p, Opts: opts, start: time.Now(),
		Result: &Result{Target: t.String(), Kind: t.Kind, Bundle: p.Path, Size: p.Size, SHA256: p.SHA256, DryRun: opts.DryRun},
	}
	j.client = newClient(opts.HTTPClient)
	u := uploaderFor(t.Kind)
	if u == nil {
		return nil, fmt.Errorf("%s: unknown target kind", t)
	}
	if err := j.checkSize(defaultMaxSize(t.Kind)); err != nil {
		return nil, err
	}
	if opts.DryRun {
		steps, err := u.Plan(j)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		for i := range steps {
			// JIRA_URL=https://user:password@host must not print its password
			steps[i].URL = withoutUserinfo(steps[i].URL)
		}
		j.Result.Plan = steps
		return j.Result, nil
	}
	err := u.Upload(ctx, j)
	j.Result.Retries = j.retries
	if err != nil {
		return j.Result, fmt.Errorf("%s: %w", t, err)
	}
	return j.Result, nil
}

// defaultMaxSize is what a target takes when --max-size does not say:
// GitLab's default maximum attachment size (also gitlab.com's). Jira's and
// Gitea's limits are per instance: Jira answers 413, Gitea publishes its own.
func defaultMaxSize(k Kind) int64 {
	if k == GitLab {
		return 100 << 20
	}
	return 0
}

// checkSize refuses a bundle over the limit before a byte is sent: a
// multi-megabyte body that ends in 413 wastes the user's time and uplink.
func (j *Job) checkSize(def int64) error {
	if j.Target.Kind == GitHub {
		return nil // the bundle itself goes nowhere
	}
	limit, why := j.Opts.MaxSize, "--max-size"
	if limit <= 0 {
		limit, why = def, ""
	}
	if limit <= 0 || j.Payload.Size <= limit {
		return nil
	}
	switch j.Target.Kind {
	case GitLab:
		if why == "" {
			why = "GitLab's default maximum attachment size; if the instance allows more, raise it with --max-size"
		}
	case Gitea:
		if why == "" {
			why = "the server's [attachment] MAX_SIZE"
		}
	}
	return fmt.Errorf("%s: bundle %s is %s, over the %s limit (%s); put it elsewhere (--to https://... or file://) and link it with --bundle-url",
		j.Target, j.Payload.Name, human.Bytes(j.Payload.Size), human.Bytes(limit), why)
}

// credential describes a request's auth for a plan without its value.
type credential struct {
	header string // "Authorization", "PRIVATE-TOKEN"
	scheme string // "Basic ", "Bearer ", "token ", ""
	value  string
	from   string // the variables it came from, for plans and hints
}

func (c credential) set(h http.Header) {
	if c.header != "" {
		h.Set(c.header, c.scheme+c.value)
	}
}

func (c credential) describe() string {
	return fmt.Sprintf("%s: %s<%s>", c.header, c.scheme, c.from)
}

// hint is what to check after 401/403/404, per target kind.
func hint(t Target, status int, base, what string) string {
	switch t.Kind {
	case Jira:
		switch status {
		case 401:
			return "check JIRA_USER and JIRA_API_TOKEN (Jira Cloud: your account's email and an API token) or JIRA_PAT (Server/Data Center personal access token)"
		case 403:
			switch {
			case strings.Contains(what, "comment"):
				return "the account may lack the Add Comments permission on " + t.Issue
			case strings.Contains(what, "attachment") && !strings.Contains(what, "lookup"):
				return "the account may lack the Create Attachments permission on " + t.Issue + ", or attachments are disabled on this Jira"
			}
			return "the account may lack the Browse Projects permission for " + t.Issue
		case 404:
			return "no issue " + t.Issue + " at " + base + " visible to this account: check the key and JIRA_URL"
		}
	case GitLab:
		switch status {
		case 401:
			return "check GITLAB_TOKEN (a personal, project or group access token with the api scope) and GITLAB_URL"
		case 403:
			return "the token's user needs at least Reporter (notes) and Developer (uploads) access to " + t.Project
		case 404:
			return fmt.Sprintf("no project %s or issue #%d at %s visible to this token: check the path, GITLAB_URL and the token's access", t.Project, t.Number, base)
		}
	case GitHub:
		switch status {
		case 401:
			return "check GITHUB_TOKEN (and GITHUB_API_URL for Enterprise)"
		case 403:
			return "the token needs Issues: write on " + t.Project + " (classic tokens: repo or public_repo scope), or a rate limit was hit"
		case 404:
			return fmt.Sprintf("no issue #%d in %s visible to this token: GitHub answers 404 for private repositories the token cannot see", t.Number, t.Project)
		}
	case Gitea:
		switch status {
		case 401:
			return "check GITEA_TOKEN (a token with write:issue scope)"
		case 403:
			return "the token's user cannot write issues or attachments in " + t.Project + ", or attachments are disabled on the server"
		case 404:
			return fmt.Sprintf("no issue #%d in %s at %s visible to this token", t.Number, t.Project, t.Base)
		}
	case HTTP:
		switch status {
		case 401, 403:
			return "the URL was refused: a pre-signed URL may have expired, been signed for another method than PUT, or for other headers"
		case 404:
			return "no such bucket or path on the server"
		}
	}
	return ""
}

// sortedKeys is for deterministic plans.
func sortedKeys(h http.Header) []string {
	var ks []string
	for k := range h {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// joinURL appends escaped path segments to base; segments keep their
// slashes escaped (GitLab's project id is group%2Fproject).
func joinURL(base string, segs ...string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(base, "/"))
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// ownerRepoPath is owner/repo escaped as two segments.
func ownerRepoPath(project string) string {
	owner, repo, _ := strings.Cut(project, "/")
	return url.PathEscape(owner) + "/" + url.PathEscape(repo)
}

// planStep describes a request for a dry run: the credential by the
// variables it comes from, never its value.
func planStep(why, method, u string, c credential, h http.Header, body string) Step {
	s := Step{Why: why, Method: method, URL: u, Body: body}
	if c.header != "" {
		s.Headers = append(s.Headers, c.describe())
	}
	for _, k := range sortedKeys(h) {
		if k == c.header || k == "Authorization" || k == "Private-Token" {
			continue
		}
		for _, v := range h[k] {
			s.Headers = append(s.Headers, k+": "+v)
		}
	}
	return s
}

func withComment(s Step, text string) Step {
	s.Comment = text
	return s
}

func fileBodyDesc(j *Job, field, filename string, length int64) string {
	s := fmt.Sprintf("%s (%d bytes, sha256 %s), Content-Length %d", j.Payload.Path, j.Payload.Size, j.Payload.SHA256, length)
	if field != "" {
		s = fmt.Sprintf("multipart/form-data field %q, filename %q: ", field, filename) + s
	}
	return s
}

// jsonBodyDesc is the exact JSON a request sends.
func jsonBodyDesc(r *request) string {
	rc, err := r.body()
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

// isLoopback reports whether a URL's host is this machine, where clear-text
// HTTP exposes nothing.
func isLoopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
