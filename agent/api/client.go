package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"
)

// ErrNoAgent is wrapped by a Client's errors when no agent listens on the
// socket (no such file, or nothing accepting on it), so that a caller can
// say "no agent" rather than report a failure.
var ErrNoAgent = errors.New("no kcrash agent")

// MaxResponseBytes bounds what a client reads of one answer: the agent caps
// its own answers well below it, so more means something else answered.
const MaxResponseBytes = 64 << 20

// New returns a client of the agent listening on socket.
func New(socket string) *Client { return &Client{Socket: socket} }

// SocketPath is where a client finds the agent: $KCRASH_AGENT_SOCKET, else
// DefaultSocket.
func SocketPath() string {
	if p := os.Getenv(SocketEnv); p != "" {
		return p
	}
	return DefaultSocket
}

// Info asks the agent who it is and what it gives this caller.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var out Info
	err := c.do(ctx, http.MethodGet, PathInfo, nil, nil, &out)
	return out, err
}

// Kmsg asks for the kernel records of q's window that this caller may see.
func (c *Client) Kmsg(ctx context.Context, q KmsgQuery) (KmsgResponse, error) {
	v := window(q.Since, q.Until)
	if q.Mark != "" {
		v.Set("mark", q.Mark)
	}
	// An agent that knows the compact form answers in it; an older one
	// ignores the parameter and answers the full form, which is read too.
	v.Set(FormParam, FormCompact)
	var out KmsgResponse
	err := c.do(ctx, http.MethodGet, PathKmsg, v, nil, &out)
	return out, err
}

// GPU asks for the GPU samples of q's window, reduced to this caller's.
func (c *Client) GPU(ctx context.Context, q GPUQuery) (GPUResponse, error) {
	var out GPUResponse
	err := c.do(ctx, http.MethodGet, PathGPU, window(q.Since, q.Until), nil, &out)
	return out, err
}

// Crash tells the agent a crash bundle was written, for the node's metrics.
func (c *Client) Crash(ctx context.Context, n CrashNotice) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, PathCrash, nil, b, nil)
}

// Crashes lists the crash notices of Slurm job id (root only).
func (c *Client) Crashes(ctx context.Context, job string) ([]CrashRecord, error) {
	var out []CrashRecord
	err := c.do(ctx, http.MethodGet, PathCrashes, url.Values{"job": {job}}, nil, &out)
	return out, err
}

func window(since, until time.Time) url.Values {
	v := url.Values{}
	if !since.IsZero() {
		v.Set("since", since.Format(time.RFC3339Nano))
	}
	if !until.IsZero() {
		v.Set("until", until.Format(time.RFC3339Nano))
	}
	return v
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	socket := c.Socket
	if socket == "" {
		socket = SocketPath()
	}
	u := url.URL{Scheme: "http", Host: "kcrash-agent", Path: path, RawQuery: query.Encode()}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// One connection per call, closed after it: a run asks a few times in
	// its life, and an idle pooled connection would hold one of the
	// agent's bounded slots.
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w at %s: %v", ErrNoAgent, socket, err)
		}
		return fmt.Errorf("kcrash agent at %s: %w", socket, err)
	}
	defer resp.Body.Close()
	b, err := readAnswer(resp)
	if err != nil {
		return fmt.Errorf("kcrash agent at %s: reading the answer: %w", socket, err)
	}
	if len(b) > MaxResponseBytes {
		return fmt.Errorf("kcrash agent at %s: answer larger than %d bytes", socket, MaxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var e Error
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("kcrash agent at %s: %s: %s", socket, resp.Status, e.Error)
		}
		return fmt.Errorf("kcrash agent at %s: %s", socket, resp.Status)
	}
	if out == nil {
		return nil
	}
	if d, ok := out.(answerDecoder); ok {
		err = d.decodeAnswer(b)
	} else {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		return fmt.Errorf("kcrash agent at %s: %s: %w", socket, path, err)
	}
	return nil
}

// readAnswer reads a body of at most MaxResponseBytes (+1, to tell a larger
// one), in one buffer of its announced length.
func readAnswer(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= MaxResponseBytes {
		// make, not bytes.Buffer.Grow: Grow cleared the megabytes of a
		// flood's answer in a pass of its own before they were read into
		// (a fifth of a client's query), where memory fresh from the
		// system is not cleared again. net/http ends a body of announced
		// length there, with io.ErrUnexpectedEOF when it is cut short.
		buf := make([]byte, n)
		m, err := io.ReadFull(resp.Body, buf)
		return buf[:m], err
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, MaxResponseBytes+1))
	return buf.Bytes(), err
}

// answerDecoder is an answer read by hand rather than by encoding/json.
type answerDecoder interface{ decodeAnswer([]byte) error }

func (k *KmsgResponse) decodeAnswer(b []byte) error {
	r, err := DecodeKmsgResponse(b)
	*k = r
	return err
}
