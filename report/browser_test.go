package report

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
)

// The browser tests open pages in Debian's chromium, headless, driven over
// the DevTools protocol on a pipe (no port is opened). Name resolution is
// mapped to nothing and every request goes to a proxy on a closed port, so
// the network is off; on top, every request the page makes is recorded and
// any that is not the page's own file fails the test, as does any console
// message of level error, any exception and any CSP report.

// cdp is a DevTools protocol connection over --remote-debugging-pipe.
type cdp struct {
	t      testing.TB
	cmd    *exec.Cmd
	w      io.WriteCloser
	mu     sync.Mutex
	nextID int
	wait   map[int]chan cdpMsg
	events chan cdpMsg
	done   chan struct{}
}

type cdpMsg struct {
	ID        int                       `json:"id,omitempty"`
	Method    string                    `json:"method,omitempty"`
	Params    json.RawMessage           `json:"params,omitempty"`
	Result    json.RawMessage           `json:"result,omitempty"`
	Error     *struct{ Message string } `json:"error,omitempty"`
	SessionID string                    `json:"sessionId,omitempty"`
}

func chromiumPath(t testing.TB) string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	testenv.Skip(t, "no chromium in PATH (.ci/run installs Debian's chromium)")
	return ""
}

func startBrowser(t testing.TB) *cdp {
	t.Helper()
	bin := chromiumPath(t)
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	toChrome, ours, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	theirs, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	profile := t.TempDir()
	cmd := exec.Command(bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
		"--user-data-dir="+profile, "--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--metrics-recording-only",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
		"--window-size=1280,900", "--hide-scrollbars", "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fd 3: chrome reads, fd 4: chrome writes
	cmd.Env = append(os.Environ(), "HOME="+profile, "XDG_CONFIG_HOME="+profile, "XDG_CACHE_HOME="+profile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toChrome.Close()
	fromChrome.Close()
	c := &cdp{t: t, cmd: cmd, w: ours, wait: map[int]chan cdpMsg{}, events: make(chan cdpMsg, 4096), done: make(chan struct{})}
	go c.read(theirs)
	t.Cleanup(func() {
		c.call("", "Browser.close", nil)
		ours.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		theirs.Close()
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", stderr.String())
		}
	})
	return c
}

func (c *cdp) read(r io.Reader) {
	defer close(c.done)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMsg
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		if m.ID != 0 {
			c.mu.Lock()
			ch := c.wait[m.ID]
			delete(c.wait, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		select {
		case c.events <- m:
		default: // a flood of events the test does not read
		}
	}
}

// call sends one command and waits for its answer.
func (c *cdp) call(session, method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan cdpMsg, 1)
	c.wait[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	if _, err := c.w.Write(append(b, 0)); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		return m.Result, nil
	case <-c.done:
		return nil, fmt.Errorf("%s: chromium went away", method)
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("%s: no answer in 60s", method)
	}
}

func (c *cdp) must(session, method string, params any) json.RawMessage {
	c.t.Helper()
	r, err := c.call(session, method, params)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// pageVisit is what loading one page did.
type pageVisit struct {
	requests []string // URLs the page asked for
	problems []string // console errors, exceptions, CSP reports, failed loads
	session  string
}

// open loads file in a new tab and waits for its load event.
func (c *cdp) open(file string) *pageVisit {
	c.t.Helper()
	var target struct{ TargetID string }
	json.Unmarshal(c.must("", "Target.createTarget", map[string]any{"url": "about:blank"}), &target)
	var att struct{ SessionID string }
	json.Unmarshal(c.must("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}), &att)
	v := &pageVisit{session: att.SessionID}
	for _, d := range []string{"Network.enable", "Runtime.enable", "Log.enable", "Page.enable"} {
		c.must(v.session, d, nil)
	}
	url := "file://" + file
	c.must(v.session, "Page.navigate", map[string]any{"url": url})
	deadline := time.After(60 * time.Second)
	for loaded := false; !loaded; {
		select {
		case e := <-c.events:
			if e.SessionID != v.session {
				continue
			}
			loaded = c.note(v, e) || loaded
		case <-deadline:
			c.t.Fatalf("%s: no load event in 60s", file)
		}
	}
	// events already queued (a late console message)
	for {
		select {
		case e := <-c.events:
			if e.SessionID == v.session {
				c.note(v, e)
			}
			continue
		case <-time.After(300 * time.Millisecond):
		}
		break
	}
	return v
}

// note records one event; it reports the page's load event.
func (c *cdp) note(v *pageVisit, e cdpMsg) bool {
	switch e.Method {
	case "Page.loadEventFired":
		return true
	case "Network.requestWillBeSent":
		var p struct{ Request struct{ URL string } }
		json.Unmarshal(e.Params, &p)
		v.requests = append(v.requests, p.Request.URL)
	case "Network.loadingFailed":
		v.problems = append(v.problems, "loading failed: "+string(e.Params))
	case "Runtime.exceptionThrown":
		v.problems = append(v.problems, "exception: "+string(e.Params))
	case "Runtime.consoleAPICalled":
		var p struct{ Type string }
		json.Unmarshal(e.Params, &p)
		if p.Type == "error" || p.Type == "warning" || p.Type == "assert" {
			v.problems = append(v.problems, "console: "+string(e.Params))
		}
	case "Log.entryAdded":
		var p struct {
			Entry struct{ Level, Text, Source string }
		}
		json.Unmarshal(e.Params, &p)
		if p.Entry.Level == "error" || p.Entry.Level == "warning" || p.Entry.Source == "security" {
			v.problems = append(v.problems, "log: "+p.Entry.Source+": "+p.Entry.Text)
		}
	}
	return false
}

// eval runs a JavaScript expression in the page and decodes its value.
func (c *cdp) eval(v *pageVisit, expr string, out any) {
	c.t.Helper()
	raw := c.must(v.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	var r struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct{ Text string }
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		c.t.Fatal(err)
	}
	if r.ExceptionDetails != nil {
		c.t.Fatalf("evaluating in the page: %s", r.ExceptionDetails.Text)
	}
	if err := json.Unmarshal(r.Result.Value, out); err != nil {
		c.t.Fatalf("page answered %s: %v", r.Result.Value, err)
	}
}

// screenshot saves the whole page as PNG.
func (c *cdp) screenshot(v *pageVisit, path string) {
	c.t.Helper()
	var lm struct {
		CSSContentSize struct{ Width, Height float64 }
	}
	json.Unmarshal(c.must(v.session, "Page.getLayoutMetrics", nil), &lm)
	raw := c.must(v.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": lm.CSSContentSize.Width, "height": lm.CSSContentSize.Height, "scale": 1}})
	var s struct{ Data string }
	json.Unmarshal(raw, &s)
	png, err := base64.StdEncoding.DecodeString(s.Data)
	if err != nil || len(png) < 1000 {
		c.t.Fatalf("screenshot: %d bytes, %v", len(png), err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// screenshotDir is where a person finds the screenshots: $KCRASH_TEST_OUTPUT
// or test-output/ at the top of the repository (ignored by git).
func screenshotDir(t testing.TB) string {
	dir := os.Getenv("KCRASH_TEST_OUTPUT")
	if dir == "" {
		wd, _ := os.Getwd()
		dir = filepath.Join(filepath.Dir(wd), "test-output")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// domFacts is what the test reads back from the rendered page.
type domFacts struct {
	Verdict   string   `json:"verdict"`
	Timelines []string `json:"timelines"`
	Markers   []struct {
		Kind string  `json:"kind"`
		T    int64   `json:"t"`
		X    float64 `json:"x"` // the marker's centre, in the SVG's units, as laid out
	} `json:"markers"`
	Visible bool    `json:"visible"` // every chart has a non-zero laid-out size
	LoadMS  float64 `json:"loadMs"`
}

const domScript = `(() => {
  const r = {verdict: document.querySelector('#verdict')?.dataset.kind || '', timelines: [], markers: [], visible: true};
  for (const s of document.querySelectorAll('svg.tl')) {
    r.timelines.push(s.dataset.timeline);
    const b = s.getBoundingClientRect();
    if (b.width < 100 || b.height < 20) r.visible = false;
  }
  for (const g of document.querySelectorAll('svg.tl[data-timeline="events"] g.ev')) {
    const bb = g.querySelector('path').getBBox();
    r.markers.push({kind: g.getAttribute('class').replace('ev k-', ''), t: Number(g.dataset.t), x: bb.x + bb.width / 2});
  }
  const nav = performance.getEntriesByType('navigation')[0];
  r.loadMs = nav ? nav.loadEventEnd - nav.startTime : -1;
  return r;
})()`

// checkPage loads path and checks what every page must satisfy.
func checkPage(t *testing.T, c *cdp, path string) (*pageVisit, domFacts) {
	t.Helper()
	v := c.open(path)
	for _, u := range v.requests {
		if u != "file://"+path {
			t.Errorf("the page asked for %s: it must load nothing", u)
		}
	}
	for _, p := range v.problems {
		t.Errorf("%s", p)
	}
	var f domFacts
	c.eval(v, domScript, &f)
	seen := map[string]int{}
	for _, n := range f.Timelines {
		seen[n]++
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("timeline %s drawn %d times", n, k)
		}
	}
	if !f.Visible {
		t.Error("a chart is laid out empty")
	}
	return v, f
}

func writePage(t *testing.T, in *Input, dir, name string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBrowserCrashReport(t *testing.T) {
	c := startBrowser(t)
	dir := t.TempDir()
	in := loadFixture(t, "crash-gpu")
	path := writePage(t, in, dir, "crash.html")
	v, f := checkPage(t, c, path)
	if f.Verdict != "gpu_page_fault" {
		t.Errorf("verdict %q on the page, want gpu_page_fault", f.Verdict)
	}
	if got := strings.Join(f.Timelines, ","); got != "vram,memory,processes,events" {
		t.Errorf("timelines %s, want vram,memory,processes,events", got)
	}
	// the exit marker sits at the manifest's end time, the unfinished call's
	// evidence at its time: placed by the browser where the axis puts them
	m := build(in)
	span := m.end.Sub(m.start)
	wantAt := func(kind string, at time.Time) {
		t.Helper()
		ms := at.Sub(m.start).Milliseconds()
		for _, mk := range f.Markers {
			if mk.Kind == kind && mk.T == ms {
				want := plotX0 + float64(at.Sub(m.start))/float64(span)*(plotX1-plotX0)
				if math.Abs(mk.X-want) > 1 {
					t.Errorf("%s marker laid out at x=%.1f, want %.1f (+%dms of %s)", kind, mk.X, want, ms, span)
				}
				return
			}
		}
		t.Errorf("no %s marker at +%dms; markers: %+v", kind, ms, f.Markers)
	}
	wantAt("exit", in.Manifest.EndTime)
	for _, fd := range m.triage.Findings {
		if fd.Source == "kernel-api-log" && fd.Time != nil {
			wantAt("fault", *fd.Time) // the call that never returned
		}
	}
	shot := filepath.Join(screenshotDir(t), "report-crash-gpu.png")
	c.screenshot(v, shot)
	t.Logf("screenshot of the crash bundle's report: %s", shot)
}

func TestBrowserEveryKind(t *testing.T) {
	c := startBrowser(t)
	dir := t.TempDir()
	for _, fx := range []string{"hang", "collect", "snapshot"} {
		t.Run(fx, func(t *testing.T) {
			in := loadFixture(t, fx)
			_, f := checkPage(t, c, writePage(t, in, dir, fx+".html"))
			for _, n := range f.Timelines {
				if n == "vram" {
					t.Error("a VRAM chart in a bundle without GPUs")
				}
			}
		})
	}
	t.Run("hour-8gpu", func(t *testing.T) {
		in := synthetic(8, 3600, 2000)
		v, f := checkPage(t, c, writePage(t, in, dir, "hour.html"))
		shot := filepath.Join(screenshotDir(t), "report-hour-8gpu.png")
		c.screenshot(v, shot)
		t.Logf("screenshot of the 1-hour 8-GPU report: %s", shot)
		if got := strings.Join(f.Timelines, ","); got != "vram,memory,processes,events,kernel-api" {
			t.Errorf("timelines %s", got)
		}
		found := false
		for _, mk := range f.Markers {
			if mk.Kind == "xid" && mk.T == 3598000 {
				found = true
				want := plotX0 + 3598.0/3600*(plotX1-plotX0)
				if math.Abs(mk.X-want) > 1 {
					t.Errorf("Xid marker at x=%.1f, want %.1f", mk.X, want)
				}
			}
		}
		if !found {
			t.Errorf("no Xid marker at +59m58s")
		}
		// a figure for the report, not a pass/fail: timing is a benchmark's job
		t.Logf("1-hour 8-GPU page: load event after %.0f ms in headless chromium", f.LoadMS)
	})
}

// TestBrowserCatchesLoads is the check of the checks: a page that tries to
// load an image, a stylesheet and a script, and logs an error, must fail
// each of them.
func TestBrowserCatchesLoads(t *testing.T) {
	c := startBrowser(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.html")
	page := `<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="stylesheet" href="https://fonts.example.com/x.css"></head>
<body><img src="http://203.0.113.7/x.png"><script src="https://cdn.example.com/x.js"></script><script>console.error("boom")</script></body></html>`
	if err := os.WriteFile(bad, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	v := c.open(bad)
	var external []string
	for _, u := range v.requests {
		if u != "file://"+bad {
			external = append(external, u)
		}
	}
	if len(external) < 3 {
		t.Errorf("requests seen %q: the check would miss a page that loads from the network", v.requests)
	}
	joined := strings.Join(v.problems, "\n")
	if !strings.Contains(joined, "boom") {
		t.Errorf("console error not seen; problems: %s", joined)
	}
	// and the same loads in a page with kcrash's policy are blocked before
	// they leave, and reported
	csp := strings.Replace(page, `<meta charset="utf-8">`, `<meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">`, 1)
	good := filepath.Join(dir, "csp.html")
	if err := os.WriteFile(good, []byte(csp), 0o644); err != nil {
		t.Fatal(err)
	}
	v = c.open(good)
	if len(v.problems) == 0 {
		t.Error("a page whose policy blocked loads reported nothing")
	}
	t.Logf("under the policy: requests %q; problems %d", v.requests, len(v.problems))
}

// TestBrowserMerge: `kcrash merge --html` of four ranks, one of which
// faulted first; the first-failure ring is laid out at its time.
func TestBrowserMerge(t *testing.T) {
	c := startBrowser(t)
	r := mergeFixture()
	var buf bytes.Buffer
	if err := WriteMerge(&buf, r); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "merge.html")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	v, f := checkPage(t, c, path)
	if got := strings.Join(f.Timelines, ","); got != "ranks" {
		t.Errorf("timelines %s, want ranks", got)
	}
	var ring struct {
		T int64   `json:"t"`
		X float64 `json:"x"`
		N int     `json:"n"`
	}
	c.eval(v, `(() => { const g = document.querySelectorAll('g.firstfail'); const b = g[0].querySelector('circle').getBBox(); return {n: g.length, t: Number(g[0].dataset.t), x: b.x + b.width/2}; })()`, &ring)
	want := plotX0 + 40.0/100*(plotX1-plotX0) // 40 s into a 100 s axis
	if ring.N != 1 || ring.T != 40000 || math.Abs(ring.X-want) > 1 {
		t.Errorf("first-failure rings %d, at +%dms x=%.1f; want one at +40000ms x=%.1f", ring.N, ring.T, ring.X, want)
	}
	shot := filepath.Join(screenshotDir(t), "merge-4-ranks.png")
	c.screenshot(v, shot)
	t.Logf("screenshot of merge --html: %s", shot)
}
