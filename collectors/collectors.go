// Package collectors gathers a run's evidence. Each source is one file holding
// one Collector, registered by name; Run runs the chosen ones in parallel,
// each under a deadline, and records ok/error/timeout/skipped for the
// manifest. A collector that fails or hangs never blocks the bundle.
package collectors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/procfs"
)

// Collector is one evidence source. Collect writes its files into out and
// returns nil, an error, or one wrapping ErrSkipped when its source is absent
// on this host. It must return soon after ctx is done.
type Collector interface {
	Collect(ctx context.Context, env *Env, out *Output) error
}

// Watcher is implemented by collectors that sample while the run is live
// (kernel messages, GPU memory, the process tree). Watch returns when ctx is done;
// Collect is called after it has returned.
type Watcher interface {
	Watch(ctx context.Context, env *Env)
}

// Checker is implemented by collectors whose source may be missing, or
// poorer, on a host: `kcrash doctor` asks each registered collector, so a new
// one answers for itself. A collector without it needs nothing from the host.
type Checker interface {
	// Available says whether Collect can work with env's roots, and why.
	Available(env *Env) (Availability, string)
}

// Availability is a collector's outlook on a host.
type Availability string

const (
	Works       Availability = "yes"
	WorksPartly Availability = "partly" // it falls back to a poorer source
	Unavailable Availability = "no"
)

// Check is one collector's answer to doctor.
type Check struct {
	Collector string       `json:"collector"`
	Works     Availability `json:"works"`
	Why       string       `json:"why"`
}

// ErrSkipped marks a source that is absent here: not a failure.
var ErrSkipped = errors.New("skipped")

// Skip returns an error wrapping ErrSkipped with the reason.
func Skip(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrSkipped, fmt.Sprintf(format, a...))
}

// Tree is the supervised process tree as the tracker saw it, descendants that
// already exited included.
type Tree interface {
	Processes() []evidence.Process
}

// Env is what a collector may know about the run. Paths are roots so tests
// can point them at fixture trees.
type Env struct {
	Start   time.Time // run start
	RootPid int       // the child (0 for `kcrash collect`)
	Tree    Tree      // nil when nothing is supervised
	Since   time.Time // start of the kernel-message window (Start minus a margin)

	// Output writes the child's output ring contents (nil when none).
	Output func(io.Writer) (int64, error)
	// KernelAPILogs lists glob patterns of kernel-API log files of the run.
	KernelAPILogs []string
	// ReadAs, when set, is the identity whose rights read the files whose
	// paths the watched job chose (its kernel-API logs), with OpenAs's rules:
	// root attached to another user's process reads them as that user.
	ReadAs *Identity
	// How the child ended, filled in before Collect when it is known; nil
	// and "" when there is none (`kcrash collect`) or it could not be learnt.
	ExitCode   *int
	ExitSignal string
	CoreDumped bool
	WorkDir    string // the run's work directory (kernel-API logs, scratch)
	Cwd        string // the child's working directory (core files)
	// PyStacksDir is the marker's value in the child's environment when kcrash
	// run gave it the Python-stacks hook (see pystacks.go); "" otherwise.
	PyStacksDir string

	ProcRoot string // "/proc"
	SysRoot  string // "/sys"
	DevRoot  string // "/dev"
	FSRoot   string // "/": installed files (the software collector); "" is "/"

	// Agent is the node agent's client when one answers (kcrash agent):
	// the kmsg collector asks it when /dev/kmsg cannot be read, the GPU
	// collector takes its samples instead of running the smi tools. nil
	// when no agent runs.
	Agent *api.Client

	SampleInterval time.Duration // base period for watchers (GPU defaults to 2×)
	Logger         *slog.Logger

	hostOnce sync.Once
	host     bundle.Host

	mu       sync.Mutex
	findings []evidence.Finding
	unseen   []evidence.Unseen
	// kapiPlace: where each kernel-API log's tail is in kernel-api.log
	kapiPlace map[string]KernelAPIPlace
	skipTool  map[string]bool
}

// NewEnv returns an Env with the real host roots, and the node agent's
// client for its socket ($KCRASH_AGENT_SOCKET, else the default): asked only
// where the host's own sources cannot be read, or for GPU samples.
func NewEnv() *Env {
	return &Env{ProcRoot: "/proc", SysRoot: "/sys", DevRoot: "/dev", FSRoot: "/", SampleInterval: time.Second,
		Logger: slog.New(slog.DiscardHandler), Agent: api.New(api.SocketPath())}
}

// Host is the manifest's host block, read once per run: the host collector,
// the manifest and Slurm's on-node check all need it.
func (e *Env) Host(ctx context.Context) bundle.Host {
	e.hostOnce.Do(func() { e.host = HostInfo(ctx) })
	h := e.host
	h.GPUs = append([]string{}, e.host.GPUs...)
	return h
}

// AddFinding records evidence for triage.
func (e *Env) AddFinding(f ...evidence.Finding) {
	e.mu.Lock()
	e.findings = append(e.findings, f...)
	e.mu.Unlock()
}

// AddUnseen records a source a collector could not read.
func (e *Env) AddUnseen(u evidence.Unseen) {
	e.mu.Lock()
	e.unseen = append(e.unseen, u)
	e.mu.Unlock()
}

// Unseen returns the sources collectors could not read.
func (e *Env) Unseen() []evidence.Unseen {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]evidence.Unseen(nil), e.unseen...)
}

// Findings returns everything collectors found.
func (e *Env) Findings() []evidence.Finding {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]evidence.Finding(nil), e.findings...)
}

// MarkStuck notes that an external tool hung; later samples skip it (a hung
// nvidia-smi is evidence of a wedged driver, and asking again only piles up
// processes in D state).
func (e *Env) MarkStuck(tool string) {
	e.mu.Lock()
	if e.skipTool == nil {
		e.skipTool = map[string]bool{}
	}
	e.skipTool[tool] = true
	e.mu.Unlock()
}

// Stuck reports whether tool hung earlier in this run.
func (e *Env) Stuck(tool string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.skipTool[tool]
}

// ProcFS reads processes under ProcRoot.
func (e *Env) ProcFS() procfs.FS { return procfs.FS{Root: e.ProcRoot} }

// Proc joins path elements under ProcRoot.
func (e *Env) Proc(p ...string) string { return filepath.Join(append([]string{e.ProcRoot}, p...)...) }

// Sys joins path elements under SysRoot.
func (e *Env) Sys(p ...string) string { return filepath.Join(append([]string{e.SysRoot}, p...)...) }

// Output is where one collector writes into the bundle being staged.
type Output struct {
	dir    string
	mu     sync.Mutex
	files  []string
	source string
}

// SetSource records where the collector's evidence came from, for the
// manifest's collector status.
func (o *Output) SetSource(s string) {
	o.mu.Lock()
	o.source = s
	o.mu.Unlock()
}

// Source is what SetSource recorded.
func (o *Output) Source() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.source
}

// NewOutput returns an Output writing into dir.
func NewOutput(dir string) *Output { return &Output{dir: dir} }

// WriteFile writes one file of the bundle, by its name inside the bundle
// ("gpu.json", "raw/nvidia-smi.txt").
func (o *Output) WriteFile(name string, data []byte) error {
	p, err := o.path(name)
	if err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// Create opens one file of the bundle for writing.
func (o *Output) Create(name string) (*os.File, error) {
	p, err := o.path(name)
	if err != nil {
		return nil, err
	}
	return os.Create(p)
}

func (o *Output) path(name string) (string, error) {
	clean := filepath.Clean(name)
	if filepath.IsAbs(clean) || strings.HasPrefix(clean, "..") {
		return "", fmt.Errorf("bundle file name %q escapes the bundle", name)
	}
	p := filepath.Join(o.dir, clean)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	o.mu.Lock()
	o.files = append(o.files, filepath.ToSlash(clean))
	o.mu.Unlock()
	return p, nil
}

// Files lists what was written, in order.
func (o *Output) Files() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string{}, o.files...)
}

// Info describes a registered collector.
type Info struct {
	Name        string
	Description string
	Default     bool // on unless skipped
}

type entry struct {
	Info
	factory func() Collector
}

var registry = map[string]entry{}

// Register adds a collector factory; called from init in each collector's file.
func Register(info Info, factory func() Collector) {
	if _, dup := registry[info.Name]; dup {
		panic("collector registered twice: " + info.Name)
	}
	registry[info.Name] = entry{Info: info, factory: factory}
}

// All lists every registered collector, sorted by name.
func All() []Info {
	var out []Info
	for _, e := range registry {
		out = append(out, e.Info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Named is a collector instance with its name.
type Named struct {
	Name string
	Collector
}

// Select instantiates collectors: only (when non-empty) restricts the set to
// those names, default-off ones included; skip removes names. Unknown names
// are an error naming them.
func Select(only, skip []string) ([]Named, error) {
	want := map[string]bool{}
	for _, n := range only {
		if _, ok := registry[n]; !ok {
			return nil, fmt.Errorf("unknown collector %q (see `kcrash collectors`)", n)
		}
		want[n] = true
	}
	for _, n := range skip {
		if _, ok := registry[n]; !ok {
			return nil, fmt.Errorf("unknown collector %q (see `kcrash collectors`)", n)
		}
	}
	var out []Named
	for _, info := range All() {
		if len(only) > 0 && !want[info.Name] || len(only) == 0 && !info.Default {
			continue
		}
		skipped := false
		for _, s := range skip {
			skipped = skipped || s == info.Name
		}
		if !skipped {
			out = append(out, Named{Name: info.Name, Collector: registry[info.Name].factory()})
		}
	}
	return out, nil
}

// CheckAll asks every registered collector, in name order, whether it can
// work with env's roots.
func CheckAll(env *Env) []Check {
	var out []Check
	for _, info := range All() {
		c := Check{Collector: info.Name, Works: Works, Why: "needs nothing from the host"}
		if ch, ok := registry[info.Name].factory().(Checker); ok {
			c.Works, c.Why = ch.Available(env)
		}
		out = append(out, c)
	}
	return out
}

// readTrimmed returns a small file's contents without surrounding space, ""
// when it cannot be read.
func readTrimmed(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}
