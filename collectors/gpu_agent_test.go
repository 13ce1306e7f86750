package collectors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/gpusampler"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/internal/testenv"
)

// agentClient speaks the agent's GPU route over its unix socket: GET
// /v1/gpu?since=&until= (RFC 3339), a JSON api.GPUResponse back.
type agentClient struct{ hc *http.Client }

func newAgentClient(sock string) *agentClient {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	return &agentClient{hc: &http.Client{Transport: tr}}
}

func (c *agentClient) GPU(ctx context.Context, q api.GPUQuery) (api.GPUResponse, error) {
	v := url.Values{"since": {q.Since.Format(time.RFC3339Nano)}, "until": {q.Until.Format(time.RFC3339Nano)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+api.PathGPU+"?"+v.Encode(), nil)
	if err != nil {
		return api.GPUResponse{}, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return api.GPUResponse{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return api.GPUResponse{}, fmt.Errorf("agent: %s", resp.Status)
	}
	var r api.GPUResponse
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// serveAgent serves s's windows on a unix socket, giving every caller what
// a caller of uid may see. stop closes the listener and the open
// connections.
func serveAgent(t *testing.T, s *gpusampler.Sampler, uid int) (sock string, stop func()) {
	sock = filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(api.PathGPU, func(w http.ResponseWriter, r *http.Request) {
		var since, until time.Time
		for _, p := range []struct {
			name string
			to   *time.Time
		}{{"since", &since}, {"until", &until}} {
			v, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get(p.name))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			*p.to = v
		}
		json.NewEncoder(w).Encode(s.Window(since, until, func(_, u int) bool { return u == uid }))
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	stop = func() { srv.Close() }
	t.Cleanup(stop)
	return sock, stop
}

// standInBin is a directory holding an nvidia-smi that prints a captured
// 2×RTX 3090 table and apps, appending each call to <dir>/calls.
func standInBin(t *testing.T, apps string) (dir string) {
	dir = t.TempDir()
	look := func(n string) string {
		p, err := exec.LookPath(n)
		if err != nil {
			testenv.Skip(t, "%s not installed: %v", n, err)
		}
		return p
	}
	appsFile := filepath.Join(dir, "apps.csv")
	os.WriteFile(appsFile, []byte(apps), 0o644)
	table := testcorpus.File(t, "7-gpu-tool-output/nvidia-smi-default-table-driver580-2x3090-under-load-PARTIAL.txt")
	script := fmt.Sprintf("#!%s\necho \"$*\" >> %q\ncase \"$1\" in\n--query-compute-apps=*) %s %q ;;\n--query-gpu=*) %s -n +4 %q ;;\n-q) %s -n +4 %q ;;\n*) exit 2 ;;\nesac\n",
		look("sh"), filepath.Join(dir, "calls"), look("cat"), appsFile, look("tail"), table, look("tail"), table)
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func calls(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "calls"))
	return strings.Count(string(b), "\n")
}

type tree []evidence.Process

func (t tree) Processes() []evidence.Process { return t }

// gpuJSON is the part of gpu.json these tests read.
type gpuJSON struct {
	Source    string                 `json:"source"`
	Samples   []collectors.GPUSample `json:"samples"`
	Snapshot  *collectors.GPUSample  `json:"snapshot"`
	Processes []collectors.GPUProcess
	Withheld  int    `json:"withheld"`
	AgentNote string `json:"agent_note"`
	Tools     []string
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// A run whose node agent answers spawns no nvidia-smi: its gpu.json is the
// agent's samples of the run's window, with only the GPU its process used
// and only its process. When the agent is gone at collection, the run takes
// a final sample of its own and says why.
func TestGPUFromAgent(t *testing.T) {
	child := exec.Command("/bin/sleep", "300")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	apps := fmt.Sprintf("%d, 00000000:05:00.0, 20000\n%d, 00000000:0B:00.0, 300\n", child.Process.Pid, gone.Process.Pid)
	agentBin, runBin := standInBin(t, apps), standInBin(t, apps)
	noAMD := filepath.Join("testdata", "sys", "no-amd")

	// The agent finds its nvidia-smi first; the run finds only its own.
	t.Setenv("PATH", agentBin)
	aenv := collectors.NewEnv()
	aenv.SysRoot = noAMD
	sampler := gpusampler.New(gpusampler.Config{Interval: 20 * time.Millisecond, Env: aenv})
	actx, acancel := context.WithCancel(context.Background())
	adone := make(chan struct{})
	go func() { sampler.Run(actx); close(adone) }()
	t.Cleanup(func() { acancel(); <-adone })
	waitUntil(t, "the agent's first sample", func() bool { return sampler.Stats().Samples > 0 })
	t.Setenv("PATH", runBin)
	sock, stopAgent := serveAgent(t, sampler, os.Getuid())
	client := newAgentClient(sock)

	run := func(t *testing.T, beforeCollect func()) gpuJSON {
		cs, err := collectors.Select([]string{"gpu"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		collectors.SetGPUAgent(cs[0].Collector, client)
		env := collectors.NewEnv()
		env.SysRoot = noAMD
		env.SampleInterval = 10 * time.Millisecond
		env.Start = time.Now()
		env.RootPid = child.Process.Pid
		env.Tree = tree{{Pid: int32(child.Process.Pid), Name: "sleep"}}
		stop := collectors.StartWatchers(context.Background(), env, cs)
		waitUntil(t, "three agent samples in the run", func() bool {
			return len(sampler.Window(env.Start, time.Time{}, nil).Samples) >= 3
		})
		stop(time.Second)
		beforeCollect()
		out := t.TempDir()
		st := collectors.Run(context.Background(), env, cs, out, 10*time.Second, nil)
		if len(st) != 1 || st[0].Status != "ok" {
			t.Fatalf("status %+v", st)
		}
		b, err := os.ReadFile(filepath.Join(out, "gpu.json"))
		if err != nil {
			t.Fatal(err)
		}
		var f gpuJSON
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		for _, s := range f.Samples {
			if s.Time.Before(env.Start) {
				t.Errorf("sample at %s, before the run's start %s", s.Time, env.Start)
			}
		}
		return f
	}

	t.Run("agent answers", func(t *testing.T) {
		before := calls(agentBin)
		f := run(t, func() {})
		if n := calls(runBin); n != 0 {
			t.Fatalf("the run spawned nvidia-smi %d times with an agent answering", n)
		}
		if calls(agentBin) <= before {
			t.Error("the agent's nvidia-smi was not called during the run")
		}
		if f.Source != "agent" || len(f.Samples) < 3 || f.Withheld != 2 || f.AgentNote != "" || len(f.Tools) != 1 {
			t.Fatalf("source %q, %d samples, withheld %d, note %q, tools %v", f.Source, len(f.Samples), f.Withheld, f.AgentNote, f.Tools)
		}
		for _, s := range f.Samples {
			if len(s.GPUs) != 1 || s.GPUs[0].BusID != "0000:05:00.0" || *s.GPUs[0].UsedBytes != 22284<<20 {
				t.Fatalf("sample GPUs %+v: want only the run's GPU", s.GPUs)
			}
		}
		if f.Snapshot == nil || !f.Snapshot.Time.Equal(f.Samples[len(f.Samples)-1].Time) {
			t.Errorf("snapshot %+v: want the last sample", f.Snapshot)
		}
		if len(f.Processes) != 1 || f.Processes[0].Pid != child.Process.Pid || !f.Processes[0].InTree || *f.Processes[0].MaxUsedBytes != 20000<<20 {
			t.Errorf("processes %+v", f.Processes)
		}
	})

	t.Run("agent gone at collection", func(t *testing.T) {
		f := run(t, stopAgent)
		if calls(runBin) == 0 {
			t.Fatal("no final sample of the run's own")
		}
		if f.Source != "" || !strings.Contains(f.AgentNote, "did not answer at collection") || f.Snapshot == nil || len(f.Snapshot.GPUs) != 2 {
			t.Errorf("source %q, note %q, snapshot %+v", f.Source, f.AgentNote, f.Snapshot)
		}
		if _, err := client.GPU(context.Background(), api.GPUQuery{}); err == nil || errors.Is(err, context.Canceled) {
			t.Errorf("the stopped agent answered: %v", err)
		}
	})
}
