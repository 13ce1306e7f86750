package upload

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kcrash/kcrash/internal/redact"
	"github.com/kcrash/kcrash/internal/visible"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/kcrash/kcrash/internal/human"
)

// newClient never follows redirects: Go forwards custom auth headers such as
// GitLab's PRIVATE-TOKEN to wherever a redirect points, and turns a
// redirected POST into a GET that would lose the upload anyway.
func newClient(c *http.Client) *http.Client {
	var cl http.Client
	if c != nil {
		cl = *c
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ExpectContinueTimeout = 2 * time.Second
		cl.Transport = tr
	}
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	// The stall watchdog bounds each attempt; a total timeout would cut off
	// large uploads on slow links that are still making progress.
	cl.Timeout = 0
	return &cl
}

// request is one HTTP request, rebuilt for each try.
type request struct {
	method string
	url    string
	header http.Header
	body   func() (io.ReadCloser, error) // nil: no body
	length int64                         // the body's exact length: always sent as Content-Length
	what   string                        // "attachment", "comment", for messages
}

func jsonRequest(method, u string, v any) (*request, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // comments hold <details> and > quotes; keep them readable in --dry-run
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	return &request{method: method, url: u, header: h, length: int64(len(data)),
		body: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}, nil
}

// requireCred fails when the credential is missing, except with --dry-run,
// where the plan is still shown, with a warning and the header marked unset.
func (j *Job) requireCred(c *credential, msg string) error {
	if c.value != "" {
		return nil
	}
	if !j.Opts.DryRun {
		return fmt.Errorf("%s", msg)
	}
	j.warn("%s", msg)
	c.from += ", not set"
	return nil
}

// authedJSON is a JSON request carrying cred; what names it in messages.
func authedJSON(method, u string, v any, cred credential, what string) (*request, error) {
	r, err := jsonRequest(method, u, v)
	if err != nil {
		return nil, err
	}
	cred.set(r.header)
	r.what = what
	return r, nil
}

// sendComment posts a comment request and reads back the id and html_url
// that GitHub and Gitea both answer with.
func (j *Job) sendComment(ctx context.Context, r *request, ok ...int) (*Created, error) {
	resp, err := j.send(ctx, r, ok...)
	if err != nil {
		return nil, err
	}
	var out struct {
		ID      flexID `json:"id"`
		HTMLURL string `json:"html_url"`
	}
	if err := resp.decode(&out); err != nil {
		return nil, backoff.Permanent(err)
	}
	return &Created{ID: string(out.ID), URL: out.HTMLURL}, nil
}

// reusedComment finds, in a GitHub/Gitea comment list, the comment an
// earlier try already posted for this bundle (every comment names its sha256).
func reusedComment(resp *response, sha string) *Created {
	var cs []struct {
		ID      flexID `json:"id"`
		Body    string `json:"body"`
		HTMLURL string `json:"html_url"`
	}
	if resp.decode(&cs) != nil {
		return nil
	}
	for _, cm := range cs {
		if strings.Contains(cm.Body, sha) {
			return &Created{ID: string(cm.ID), URL: cm.HTMLURL, Reused: true}
		}
	}
	return nil
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("unexpected answer (HTTP %d): %v", r.status, err)
	}
	return nil
}

// StatusError is an HTTP answer that was not what the request wanted.
type StatusError struct {
	Method string
	URL    string // without query
	Status int
	What   string // "attachment", "comment"
	Hint   string // what to check
	Detail string // the server's message, one line, shortened
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s: HTTP %d %s from %s %s", e.What, e.Status, http.StatusText(e.Status), e.Method, e.URL)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// retryable marks an error worth another try; after, when set, is the
// server's Retry-After, which backoff.Retry finds through Unwrap.
type retryable struct {
	err   error
	after time.Duration
}

func (e *retryable) Error() string { return e.err.Error() }
func (e *retryable) Unwrap() []error {
	if e.after > 0 {
		return []error{e.err, &backoff.RetryAfterError{Duration: e.after}}
	}
	return []error{e.err}
}

var errStalled = errors.New("stalled")

// send makes one try of r and returns the answer when its status is one of
// want. Other answers and failures come back classified: retryable ones
// plain (or *retryable with a Retry-After), the rest backoff.Permanent.
func (j *Job) send(ctx context.Context, r *request, want ...int) (*response, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := j.Opts.StallTimeout
	watchdog := time.AfterFunc(stall, func() { cancel(errStalled) })
	defer watchdog.Stop()
	touch := func() { watchdog.Reset(stall) }

	var body io.ReadCloser
	if r.body != nil {
		b, err := r.body()
		if err != nil {
			return nil, backoff.Permanent(err)
		}
		var bar *progress
		if j.Opts.Progress != nil && r.length >= progressMin {
			bar = newProgress(j.Opts.Progress, fmt.Sprintf("%s %s", j.Target, r.what), r.length)
			defer bar.done()
		}
		body = &watchedReader{rc: b, touch: touch, bar: bar}
	}
	req, err := http.NewRequestWithContext(actx, r.method, r.url, body)
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, backoff.Permanent(fmt.Errorf("%s: %s %s: not a usable URL", r.what, r.method, safeURL(nil, r.url)))
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if body != nil {
		// An exact Content-Length rather than chunked: pre-signed object-store
		// URLs and some proxies refuse chunked bodies.
		req.ContentLength = r.length
		if r.length == 0 {
			req.Body = http.NoBody
		}
		if r.length > 1<<20 {
			// Let the server refuse (401, 413) before megabytes go up.
			req.Header.Set("Expect", "100-continue")
		}
	}
	shown := safeURL(req.URL, "")
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, j.classifyNetErr(ctx, actx, r, shown, err)
	}
	defer resp.Body.Close()
	touch()
	data, err := io.ReadAll(io.LimitReader(&watchedReader{rc: resp.Body, touch: touch}, 4<<20))
	if err != nil {
		return nil, j.classifyNetErr(ctx, actx, r, shown, err)
	}
	out := &response{status: resp.StatusCode, header: resp.Header, body: data}
	for _, w := range want {
		if resp.StatusCode == w {
			return out, nil
		}
	}
	return out, j.classifyStatus(r, shown, out)
}

func (j *Job) classifyNetErr(ctx, actx context.Context, r *request, shown string, err error) error {
	if ctx.Err() != nil {
		return backoff.Permanent(context.Cause(ctx))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // url.Error repeats the URL, query and all
	}
	if errors.Is(context.Cause(actx), errStalled) {
		return fmt.Errorf("%s: %s %s: no progress for %s (server too slow or connection stuck)", r.what, r.method, shown, j.Opts.StallTimeout)
	}
	e := fmt.Errorf("%s: %s %s: %w", r.what, r.method, shown, err)
	if permanentNetErr(err) {
		return backoff.Permanent(e)
	}
	// Dropped and refused connections, resets, EOF mid-body, timeouts.
	return e
}

// permanentNetErr: a failure no retry mends, an untrusted certificate or a
// name that does not resolve.
func permanentNetErr(err error) bool {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		certErr   *tls.CertificateVerificationError
		dnsErr    *net.DNSError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &certErr) ||
		(errors.As(err, &dnsErr) && dnsErr.IsNotFound)
}

func (j *Job) classifyStatus(r *request, shown string, resp *response) error {
	e := &StatusError{Method: r.method, URL: shown, Status: resp.status, What: r.what}
	switch {
	case resp.status == 401 || resp.status == 403 || resp.status == 404:
		e.Hint = hint(j.Target, resp.status, j.baseForHint(), r.what)
		if resp.status == 403 && j.Target.Kind == GitHub && (resp.header.Get("X-RateLimit-Remaining") == "0" || resp.header.Get("Retry-After") != "") {
			e.Hint = "GitHub rate limit"
		}
	case resp.status == 413:
		e.Hint = fmt.Sprintf("the server refused the %s bundle as too large; ask its admin for a higher attachment limit, or put the bundle elsewhere (--to https://... or file://) and link it with --bundle-url", human.Bytes(j.Payload.Size))
	case resp.status >= 300 && resp.status < 400:
		loc := resp.header.Get("Location")
		lu, _ := url.Parse(loc)
		e.Hint = "the server redirects to " + safeURL(lu, loc) + "; point the target (or its *_URL variable) at the final address"
	default:
		e.Detail = j.serverDetail(r, resp.body)
		if d := strings.ToLower(e.Detail); strings.Contains(d, "too large") || strings.Contains(d, "exceeds") {
			e.Hint = fmt.Sprintf("the %s bundle is over the server's limit; put it elsewhere (--to https://... or file://) and link it with --bundle-url", human.Bytes(j.Payload.Size))
		}
	}
	// GitHub's secondary rate limits answer 403 with Retry-After, or with
	// the primary limit spent: both pass, so both are worth waiting for.
	ghLimited := j.Target.Kind == GitHub && resp.status == 403 &&
		(resp.header.Get("Retry-After") != "" || resp.header.Get("X-RateLimit-Remaining") == "0")
	if ghLimited && resp.header.Get("Retry-After") == "" {
		if reset, err := strconv.ParseInt(resp.header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			resp.header.Set("Retry-After", strconv.FormatInt(max(0, reset-time.Now().Unix()), 10))
		}
	}
	if ghLimited || resp.status == 429 || resp.status == 408 || (resp.status >= 500 && resp.status != 501 && resp.status != 505) {
		after, ok := retryAfter(resp.header.Get("Retry-After"))
		if ok && after > j.Opts.Retry.MaxRetryAfter {
			return backoff.Permanent(fmt.Errorf("%w; the server asks to wait %s before retrying, longer than kcrash waits", e, after.Round(time.Second)))
		}
		return &retryable{err: e, after: after}
	}
	return backoff.Permanent(e)
}

func (j *Job) baseForHint() string {
	switch j.Target.Kind {
	case Jira:
		return j.env("JIRA_URL")
	case GitLab:
		return gitlabBase(j)
	}
	return ""
}

// retryAfter reads seconds or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := time.Until(t)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// serverMessage pulls one short line out of an error body: the JSON message
// fields these APIs use, else the text itself.
func serverMessage(body []byte) string {
	var m struct {
		Message       any      `json:"message"`
		Error         any      `json:"error"`
		ErrorMessages []string `json:"errorMessages"`
		Errors        any      `json:"errors"`
	}
	s := ""
	if json.Unmarshal(body, &m) == nil {
		switch {
		case len(m.ErrorMessages) > 0:
			s = strings.Join(m.ErrorMessages, "; ")
		case m.Message != nil:
			s = fmt.Sprint(m.Message)
		case m.Error != nil:
			s = fmt.Sprint(m.Error)
		case m.Errors != nil:
			b, _ := json.Marshal(m.Errors)
			s = string(b)
		}
	} else {
		s = string(body)
	}
	return strings.Join(strings.Fields(s), " ")
}

// serverDetailMax is how much of a server's error message is shown.
const serverDetailMax = 200

// serverDetail is the server's error message for a terminal: a proxy or a
// misconfigured server may echo the request, so the request's own
// credentials (the Authorization value, its token, a basic-auth pair
// decoded) and the upload tokens are masked first, then the message is
// shortened, then control characters are made visible.
func (j *Job) serverDetail(r *request, body []byte) string {
	var env []string
	for _, k := range credentialNames {
		if v := j.env(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for _, h := range []string{"Authorization", "Private-Token", "Proxy-Authorization"} {
		v := r.header.Get(h)
		if v == "" {
			continue
		}
		env = append(env, "REQUEST_AUTH="+v)
		if _, tok, ok := strings.Cut(v, " "); ok {
			env = append(env, "REQUEST_AUTH_TOKEN="+tok)
			if dec, err := base64.StdEncoding.DecodeString(tok); err == nil {
				env = append(env, "REQUEST_AUTH_BASIC="+string(dec))
				if _, pw, ok := strings.Cut(string(dec), ":"); ok {
					env = append(env, "REQUEST_AUTH_PASSWORD="+pw)
				}
			}
		}
	}
	s := redactorFor(j.Opts).String(serverMessage(body))
	s = redact.New(env).String(s)
	if r := []rune(s); len(r) > serverDetailMax {
		s = string(r[:serverDetailMax]) + "…"
	}
	return visible.Line(s)
}

// retry runs op under the retry policy. op gets the try number, from 1, so
// that tries after the first can look for what an earlier one made.
func retry[T any](ctx context.Context, j *Job, what string, op func(try int) (T, error)) (T, error) {
	rp := j.Opts.Retry
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = rp.InitialInterval
	b.MaxInterval = rp.MaxInterval
	try := 0
	start := time.Now()
	v, err := backoff.Retry(ctx, func() (T, error) {
		try++
		return op(try)
	}, backoff.WithBackOff(b), backoff.WithMaxTries(rp.MaxTries), backoff.WithMaxElapsedTime(rp.MaxElapsed),
		backoff.WithNotify(func(err error, d time.Duration) {
			j.retries++
			if j.Opts.Log != nil {
				fmt.Fprintf(j.Opts.Log, "kcrash: %s: %v; retrying in %s\n", j.Target, err, d.Round(time.Millisecond))
			}
		}))
	if err != nil && try > 1 {
		var perm *backoff.PermanentError
		if !errors.As(err, &perm) && ctx.Err() == nil {
			err = fmt.Errorf("%w (gave up after %d tries in %s)", err, try, time.Since(start).Round(100*time.Millisecond))
		}
	}
	return v, err
}

// lookup runs one read-only request that only helps avoid duplicates: when
// the account may not list (403, 404, 405), the caller just goes ahead.
func (j *Job) lookup(ctx context.Context, r *request) (*response, bool, error) {
	resp, err := j.send(ctx, r, 200)
	if err == nil {
		return resp, true, nil
	}
	var se *StatusError
	if errors.As(err, &se) && (se.Status == 403 || se.Status == 404 || se.Status == 405 || se.Status == 400) {
		return nil, false, nil
	}
	return nil, false, err
}

// multipartFile is a multipart/form-data body with one file field, streamed
// from disk with its length computed up front: bundles can be large, and a
// Content-Length is what object stores and proxies want.
func multipartFile(p *Payload, field, filename string) (contentType string, length int64, open func() (io.ReadCloser, error), err error) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, field, filename))
	h.Set("Content-Type", "application/gzip")
	if _, err := mw.CreatePart(h); err != nil {
		return "", 0, nil, err
	}
	prefix := append([]byte(nil), head.Bytes()...)
	head.Reset()
	if err := mw.Close(); err != nil {
		return "", 0, nil, err
	}
	suffix := append([]byte(nil), head.Bytes()...)
	open = func() (io.ReadCloser, error) {
		f, err := openSame(p)
		if err != nil {
			return nil, err
		}
		return readCloser{io.MultiReader(bytes.NewReader(prefix), io.LimitReader(f, p.Size), bytes.NewReader(suffix)), f}, nil
	}
	return mw.FormDataContentType(), int64(len(prefix)) + p.Size + int64(len(suffix)), open, nil
}

// openSame opens the bundle and checks it is still the size that was
// checked and announced: a bundle rewritten under us would otherwise send a
// body shorter or longer than its Content-Length.
func openSame(p *Payload) (*os.File, error) {
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.Size() != p.Size {
		f.Close()
		return nil, fmt.Errorf("%s changed size while uploading (%d, was %d)", p.Path, fi.Size(), p.Size)
	}
	return f, nil
}

func fileBody(p *Payload) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		f, err := openSame(p)
		if err != nil {
			return nil, err
		}
		return readCloser{io.LimitReader(f, p.Size), f}, nil
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// watchedReader feeds the stall watchdog and the progress bar.
type watchedReader struct {
	rc    io.ReadCloser
	touch func()
	bar   *progress
}

func (w *watchedReader) Read(b []byte) (int, error) {
	n, err := w.rc.Read(b)
	if n > 0 {
		w.touch()
		if w.bar != nil {
			w.bar.add(int64(n))
		}
	}
	return n, err
}

func (w *watchedReader) Close() error { return w.rc.Close() }

// progressMin is the smallest body that gets a progress bar: a smaller one
// is gone before a bar would be readable.
var progressMin int64 = 1 << 20

// progress draws one line, redrawn in place, at most ten times a second.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	total int64
	n     int64
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, label string, total int64) *progress {
	p := &progress{w: w, label: label, total: total, start: time.Now()}
	p.draw()
	return p
}

func (p *progress) add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += n
	if time.Since(p.last) >= 100*time.Millisecond || p.n >= p.total {
		p.draw()
	}
}

func (p *progress) draw() {
	p.last = time.Now()
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = float64(p.n) / float64(p.total)
	}
	if frac > 1 {
		frac = 1
	}
	fill := int(frac * width)
	rate := ""
	if el := time.Since(p.start).Seconds(); el > 0.5 {
		rate = fmt.Sprintf(" %s/s", human.Bytes(int64(float64(p.n)/el)))
	}
	fmt.Fprintf(p.w, "\r\x1b[Kkcrash: %s [%s%s] %3.0f%% %s/%s%s", p.label,
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill), frac*100, human.Bytes(p.n), human.Bytes(p.total), rate)
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
	fmt.Fprint(p.w, "\n")
}
