// Package capture is kcrash's capture pipeline: what happens between
// "something is being watched" and "a bundle is on disk". A Session holds
// what one capture knows (the collectors' environment, the chosen
// collectors, the command, the job) and writes bundles from it:
//
//  1. collect: every chosen collector under its deadline, into a stage;
//  2. triage: the collectors' findings, the output, the kernel-API logs;
//  3. write: summary.md, manifest, report.html, redacted, under the budget,
//     published privately when root writes another user's evidence.
//
// Its callers are `kcrash run` (Session, Snapshot, Write), `attach --pid`
// (AttachPid), `attach --slurm-job` (AttachSlurm), `collect` (Session) and
// the Slurm epilog (Epilog). Nothing here parses flags; what it prints goes
// to the injected streams' Err.
package capture

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kcrash/kcrash/agent/api"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/redact"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/report"
	"github.com/kcrash/kcrash/supervisor"
	"github.com/kcrash/kcrash/triage"
)

// Config is where and how a session writes its bundles.
type Config struct {
	Out              string        // bundle directory
	CollectorTimeout time.Duration // deadline of each collector
	Budget           int64         // compressed size budget of a bundle
	// Secrets are K=V pairs redacted wherever they show up, besides the
	// environment's (the config file's upload credentials).
	Secrets []string
	// Private: root writes a bundle of another user's job or process; it is
	// never world-readable (see private.go).
	Private bool
	// Version is kcrash's, for the manifest.
	Version string
}

// Hang is what a run does when it is declared hung.
type Hang struct {
	Timeout   time.Duration
	HealthURL string
	// HealthInterval is the period between two probes of HealthURL (1 s
	// when 0): every probe is a line in the server's access log.
	HealthInterval time.Duration
	Action         string        // "stop" or "bundle-only"
	KillAfter      time.Duration // grace between SIGTERM and SIGKILL on "stop"
}

// Session is one capture: what the bundles of it are made from.
type Session struct {
	IO     *iostreams.IOStreams
	Config Config
	Env    *collectors.Env
	Chosen []collectors.Named
	Args   []string
	Cwd    string
	Job    *bundle.Job
	// Resolved is the child's environment and what kcrash set in it; nil is
	// an empty one.
	Resolved *configs.Resolved
	// Profiles and Level are what `kcrash run` set (none for attach and collect).
	Profiles []string
	Level    int
	Hang     Hang
	// StoppedBy: the user stopped the run (see cmd/kcrash's userStop); ""
	// otherwise. Set before Write.
	StoppedBy string

	// AfterCollect runs once the final bundle's collectors are done (frees the ring).
	AfterCollect func()

	mu       sync.Mutex
	verdict  triage.Verdict // of the last bundle written
	hangLine string         // the line that named the hang's bundle
	notes    []string
	hung     bool
	hangPath string
	hangSize int64
}

// Exit is what the bundle says about how the child ended.
type Exit struct {
	Code       *int
	Signal     string
	CoreDumped bool
	Reason     string
	End        time.Time
	StoppedBy  string // the run was stopped by the user: how
}

// ExitOf is the Exit of a supervised child.
func ExitOf(r *supervisor.Result) Exit {
	e := Exit{End: r.End, CoreDumped: r.CoreDumped}
	if r.Signal != 0 {
		e.Signal = SignalName(r.Signal)
	} else {
		c := r.Code
		e.Code = &c
	}
	return e
}

// KmsgMargin is how far before the start kernel messages are kept: a fault
// logged while the command was still starting up belongs to it.
const KmsgMargin = 5 * time.Second

// Note adds a line to the manifest's notes of every later bundle.
func (p *Session) Note(format string, a ...any) {
	p.mu.Lock()
	p.notes = append(p.notes, fmt.Sprintf(format, a...))
	p.mu.Unlock()
}

// LastVerdict is the verdict of the last bundle written (zero before any).
func (p *Session) LastVerdict() triage.Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.verdict
}

// HangLine is the line that named the hang's bundle ("" without a hang).
func (p *Session) HangLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hangLine
}

// HangBundle says whether a hang was declared, and the bundle written for it.
func (p *Session) HangBundle() (string, int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hangPath, p.hangSize, p.hung
}

// Write writes the bundle of a finished run; a failure is reported and
// gives "".
func (p *Session) Write(res *supervisor.Result, hang bool) (string, int64) {
	ex := ExitOf(res)
	ex.StoppedBy = p.StoppedBy
	if hang {
		ex.Reason = "kcrash declared a hang and stopped the child"
	}
	path, size, err := p.Bundle(ex, hang, "run")
	if err != nil {
		fmt.Fprintf(p.IO.Err, "kcrash: no bundle written: %v\n", err)
		return "", 0
	}
	return path, size
}

// Snapshot writes a bundle of the live run: on --snapshot-signal, or when a
// hang is declared (then the child is stopped afterwards, unless --hang-action bundle-only).
func (p *Session) Snapshot(why string, child *supervisor.Child) {
	reason := "a snapshot of the live run (" + why + ")"
	if why == "hang" {
		reason = fmt.Sprintf("hung: no %s for %s", p.hangWhat(), p.Hang.Timeout)
	}
	ex := Exit{End: time.Now(), Reason: reason}
	path, size, err := p.Bundle(ex, why == "hang", why)
	if why == "hang" {
		p.mu.Lock()
		p.hung, p.hangPath, p.hangSize = true, path, size
		p.mu.Unlock()
	}
	switch {
	case err != nil:
		fmt.Fprintf(p.IO.Err, "kcrash: %s: no bundle written: %v\n", why, err)
	case why == "hang":
		line := fmt.Sprintf("kcrash: %s looks hung (no %s for %s); bundle %s (%s)", p.Args[0], p.hangWhat(), p.Hang.Timeout, DisplayPath(path), human.Bytes(size))
		p.mu.Lock()
		p.hangLine = line
		p.mu.Unlock()
		fmt.Fprintln(p.IO.Err, line)
	default:
		fmt.Fprintf(p.IO.Err, "kcrash: snapshot of the live run: bundle %s (%s)\n", DisplayPath(path), human.Bytes(size))
	}
	if why == "hang" && child != nil && p.Hang.Action == "stop" {
		grace := p.Hang.KillAfter
		if grace <= 0 {
			grace = 10 * time.Second
		}
		child.StopWithGrace(syscall.SIGTERM, grace)
	}
}

// StopHang bundles a child still running grace after who's SIGTERM: hung
// in its shutdown. The scheduler's SIGKILL comes next, so the stacks are
// taken now; the child is left to it.
func (p *Session) StopHang(who string, grace time.Duration) {
	ex := Exit{End: time.Now(), Reason: fmt.Sprintf("hung in shutdown: still running %s after %s's SIGTERM", grace, who)}
	path, size, err := p.Bundle(ex, true, "hang")
	p.mu.Lock()
	p.hung, p.hangPath, p.hangSize = true, path, size
	p.mu.Unlock()
	if err != nil {
		fmt.Fprintf(p.IO.Err, "kcrash: hung in shutdown: no bundle written: %v\n", err)
		return
	}
	line := fmt.Sprintf("kcrash: %s still running %s after %s's SIGTERM: hung in shutdown; bundle %s (%s)",
		filepath.Base(p.Args[0]), grace, who, DisplayPath(path), human.Bytes(size))
	p.mu.Lock()
	p.hangLine = line
	p.mu.Unlock()
	fmt.Fprintln(p.IO.Err, line)
}

func (p *Session) hangWhat() string {
	if p.Hang.HealthURL != "" {
		return "health answer from " + p.Hang.HealthURL
	}
	return "output"
}

// bundleMu serialises bundle writing within one kcrash: a snapshot and the
// final bundle must not interleave their collectors.
var bundleMu sync.Mutex

// Bundle collects, triages and writes one bundle; mode is the manifest's
// ("run", "hang", "snapshot", "attach", "collect").
func (p *Session) Bundle(ex Exit, hang bool, mode string) (string, int64, error) {
	bundleMu.Lock()
	defer bundleMu.Unlock()
	resolved := p.Resolved
	if resolved == nil {
		resolved = &configs.Resolved{Set: map[string]string{}, Kept: map[string]string{}}
	}
	env := p.Env
	env.ExitCode, env.ExitSignal, env.CoreDumped = ex.Code, ex.Signal, ex.CoreDumped
	host := env.Host(context.Background())
	name := bundle.Name(time.Now(), host.Hostname, os.Getpid(), rankOf(p.Job))
	r := redact.New(append(os.Environ(), resolved.Env...))
	for _, kv := range p.Config.Secrets {
		r.Add(kv)
	}
	menv := bundle.Env{Profiles: p.Profiles, Set: r.Env(resolved.Set), Kept: r.Env(resolved.Kept), User: r.Env(userVars(resolved))}
	w := bundle.Writer{Name: name, Mode: mode, Command: p.Args, Cwd: p.Cwd, KcrashVersion: p.Config.Version,
		StartTime: env.Start.UTC(), EndTime: ex.End.UTC(), Exit: manifestExit(ex), Hang: hang, Job: p.Job,
		HostInfo: host, Env: &menv}
	for _, c := range p.Chosen {
		w.Collectors = append(w.Collectors, c.Name)
	}
	p.mu.Lock()
	w.Notes = append(w.Notes, p.notes...)
	p.mu.Unlock()
	prints := r.Prints()
	w.Secrets = &prints
	// Staged next to the final place: a full or unwritable $TMPDIR must not
	// cost the bundle, and the final link stays on one filesystem. The
	// stage records who writes it first: a kcrash killed while it collects
	// leaves what it staged to the next one (bundle.Recover).
	stage, err := bundle.NewStageFor(p.Config.Out, w)
	if err != nil {
		return "", 0, fmt.Errorf("staging directory: %v", err)
	}
	defer stage.Remove()

	// 1. collect: the fast, telling collectors first (collectors.First)
	statuses := collectors.Run(context.Background(), env, p.Chosen, stage.Dir, p.Config.CollectorTimeout,
		func(st bundle.CollectorStatus) { stage.Done(st) })
	if mode == "run" && p.AfterCollect != nil {
		p.AfterCollect()
	}

	// 2. triage
	var run *triage.RunSetup
	// kcrash run (its end, a hang, a snapshot), not attach or collect
	if (mode == "run" || mode == "hang" || mode == "snapshot") && len(p.Profiles) > 0 {
		run = runSetup(p.Profiles, p.Level)
		// After a hang's bundle kcrash stops the run (or the scheduler
		// does, after its SIGTERM): nothing of it is left to look at live.
		run.HangStops = hang && (p.Hang.Action != "bundle-only" || strings.HasPrefix(ex.Reason, "hung in shutdown"))
	}
	tri := analyze(env, stage.Dir, ex, hang, p.Args, run, resolved.Env)
	p.mu.Lock()
	p.verdict = tri.verdict
	p.mu.Unlock()

	// 3. write
	host.GPUs = gpuNames(stage.Dir)
	m := &bundle.Manifest{
		SchemaVersion: bundle.SchemaVersion, KcrashVersion: p.Config.Version, Mode: mode,
		Command: p.Args, Cwd: p.Cwd, StartTime: env.Start.UTC(), EndTime: ex.End.UTC(),
		Exit: manifestExit(ex), Host: host, Job: p.Job, Collectors: statuses, Truncated: []string{},
	}
	m.Env = menv
	m.Triage = tri.json
	m.Signature = &tri.signature
	p.mu.Lock()
	m.Notes = append(m.Notes, p.notes...)
	p.mu.Unlock()
	meta := summaryMeta{name: name, args: p.Args, ex: ex, start: env.Start, outputFile: filepath.Join(stage.Dir, "output.log")}
	if p.Job != nil && p.Job.Scheduler == "slurm" && run == nil && mode != "run" {
		meta.slurmJob = p.Job.JobID
	}
	summary := tri.summary(meta)
	// summary.md quotes the child's output: escape sequences (C1 included)
	// are written visibly, so that reading it never drives a terminal.
	summary = visible.String(summary)
	if err := os.WriteFile(stage.Dir+"/summary.md", []byte(summary), 0o644); err != nil {
		return "", 0, err
	}
	path, size, err := p.write(stage, m, r)
	if err == nil && mode != "snapshot" {
		tellAgent(env, tri.verdict, path)
	}
	return path, size, err
}

// manifestExit is ex as the manifest has it.
func manifestExit(ex Exit) bundle.Exit {
	e := bundle.Exit{Code: ex.Code, CoreDumped: ex.CoreDumped, Reason: ex.Reason}
	if ex.Signal != "" {
		sig := ex.Signal
		e.Signal = &sig
	}
	return e
}

// tellAgent counts the crash in the node agent's metrics, when one runs:
// a second at most, and nothing said when there is none.
func tellAgent(env *collectors.Env, v triage.Verdict, path string) {
	if env.Agent == nil || v.Kind == "" {
		return
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = env.Agent.Crash(ctx, api.CrashNotice{Verdict: string(v.Kind), Bundle: path})
}

// write writes the staged bundle into Config.Out, privately when asked.
func (p *Session) write(stage *bundle.Stage, m *bundle.Manifest, r *redact.Redactor) (string, int64, error) {
	wo := bundle.WriteOptions{Out: p.Config.Out, Budget: p.Config.Budget, Redactor: r, Report: report.StagePage}
	var pt *privateTarget
	var err error
	if p.Config.Private {
		if pt, err = newPrivateTarget(p.Config.Out); err != nil {
			return "", 0, err
		}
		wo.Out, wo.Fallback = pt.stage, pt.fallback
	}
	res, err := stage.Write(m, wo)
	if pt != nil {
		if err != nil {
			pt.abandon()
			return "", 0, err
		}
		if res.Path, err = pt.publish(res.Path); err != nil {
			return "", 0, err
		}
		if pt.stage == pt.fallback && res.Fallback == nil {
			res.Fallback = fmt.Errorf("cannot make a private directory there")
		}
	}
	if err != nil {
		return "", 0, err
	}
	if res.Fallback != nil {
		fmt.Fprintf(p.IO.Err, "kcrash: cannot write into %s (%v); bundle written to %s instead\n", p.Config.Out, shortErr(res.Fallback), res.Path)
	}
	return res.Path, res.Size, nil
}

// shortErr is the reason of an open or mkdir error, without the path the
// message about it already names.
func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && (strings.HasPrefix(s, "open ") || strings.HasPrefix(s, "mkdir ")) {
		return s[i+2:]
	}
	return s
}

func rankOf(j *bundle.Job) string {
	if j == nil || j.Rank == nil {
		return ""
	}
	return strconv.Itoa(*j.Rank)
}

// userVars is the child's environment less what kcrash set.
func userVars(r *configs.Resolved) map[string]string {
	out := map[string]string{}
	for _, kv := range r.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, set := r.Set[k]; !set {
			out[k] = v
		}
	}
	return out
}

// gpuNames reads the GPU collector's snapshot for the manifest's host.gpus.
func gpuNames(dir string) []string {
	names := []string{}
	for _, x := range gpuSnapshot(dir) {
		names = append(names, strings.TrimSpace(fmt.Sprintf("%v %s %s", x.Index, x.Name, x.BusID)))
	}
	return names
}

// gpuModels are the product names in gpu.json's snapshot, for triage's
// GPU-specific next steps.
func gpuModels(dir string) []string {
	var out []string
	for _, x := range gpuSnapshot(dir) {
		if x.Name != "" && !slices.Contains(out, x.Name) {
			out = append(out, x.Name)
		}
	}
	return out
}

// gpuArches are the distinct archs (sm_90, gfx942) gpu.json's snapshot
// names, for an arch mismatch's next steps.
func gpuArches(dir string) string {
	var out []string
	for _, x := range gpuSnapshot(dir) {
		if x.Arch != "" && !slices.Contains(out, x.Arch) {
			out = append(out, x.Arch)
		}
	}
	return strings.Join(out, ", ")
}

type gpuSnapshotEntry struct {
	Index any    `json:"index"`
	Name  string `json:"name"`
	BusID string `json:"bus_id"`
	Arch  string `json:"arch"`
}

func gpuSnapshot(dir string) []gpuSnapshotEntry {
	b, err := os.ReadFile(dir + "/gpu.json")
	if err != nil {
		return nil
	}
	var g struct {
		Snapshot struct {
			GPUs []gpuSnapshotEntry `json:"gpus"`
		} `json:"snapshot"`
	}
	if json.Unmarshal(b, &g) != nil {
		return nil
	}
	return g.Snapshot.GPUs
}

// DisplayPath is p relative to the working directory when it is below it.
func DisplayPath(p string) string {
	// From / a relative path (tmp/kcrash-0/…) reads as a path of its own.
	if wd, err := os.Getwd(); err == nil && wd != "/" {
		if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return p
}
