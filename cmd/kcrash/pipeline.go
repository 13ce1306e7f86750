package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/internal/redact"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/report"
	"github.com/kcrash/kcrash/supervisor"
	"github.com/kcrash/kcrash/triage"
)

// pipeline turns a finished (or hung, or snapshotted) run into a bundle:
// collectors, triage, summary, manifest, atomic write.
type pipeline struct {
	s        *streams
	o        *runOptions
	cfg      *userConfig
	env      *collectors.Env
	chosen   []collectors.Named
	args     []string
	cwd      string
	job      *bundle.Job
	resolved *configs.Resolved
	profiles []string
	// stoppedBy: the user stopped the run (see userStop); "" otherwise.
	stoppedBy string

	// private: root writes a bundle of another user's job or process; it is
	// never world-readable (see privateout.go).
	private bool

	// afterCollect runs once the final bundle's collectors are done (frees the ring).
	afterCollect func()

	mu       sync.Mutex
	notes    []string
	hung     bool
	hangPath string
	hangSize int64
}

// hangBundle says whether a hang was declared, and the bundle written for it.
func (p *pipeline) hangBundle() (string, int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hangPath, p.hangSize, p.hung
}

func (p *pipeline) note(format string, a ...any) {
	p.mu.Lock()
	p.notes = append(p.notes, fmt.Sprintf(format, a...))
	p.mu.Unlock()
}

// exitInfo is what the bundle says about how the child ended.
type exitInfo struct {
	code       *int
	signal     string
	coreDumped bool
	reason     string
	end        time.Time
	stoppedBy  string // the run was stopped by the user: how
}

func exitOf(r *supervisor.Result) exitInfo {
	e := exitInfo{end: r.End, coreDumped: r.CoreDumped}
	if r.Signal != 0 {
		e.signal = signalName(r.Signal)
	} else {
		c := r.Code
		e.code = &c
	}
	return e
}

func (p *pipeline) write(res *supervisor.Result, hang bool) (string, int64) {
	ex := exitOf(res)
	ex.stoppedBy = p.stoppedBy
	if hang {
		ex.reason = "kcrash declared a hang and stopped the child"
	}
	path, size, err := p.bundle(ex, hang, "run")
	if err != nil {
		fmt.Fprintf(p.s.Err, "kcrash: no bundle written: %v\n", err)
		return "", 0
	}
	return path, size
}

// snapshot writes a bundle of the live run: on --snapshot-signal, or when a
// hang is declared (then the child is stopped afterwards, unless --hang-action bundle-only).
func (p *pipeline) snapshot(why string, child *supervisor.Child) {
	ex := exitInfo{end: time.Now(), reason: "the child was still running (" + why + ")"}
	path, size, err := p.bundle(ex, why == "hang", why)
	if why == "hang" {
		p.mu.Lock()
		p.hung, p.hangPath, p.hangSize = true, path, size
		p.mu.Unlock()
	}
	switch {
	case err != nil:
		fmt.Fprintf(p.s.Err, "kcrash: %s: no bundle written: %v\n", why, err)
	case why == "hang":
		fmt.Fprintf(p.s.Err, "kcrash: %s looks hung (no %s for %s); bundle %s (%s)\n", p.args[0], p.hangWhat(), p.o.hangTimeout, displayPath(path), human.Bytes(size))
	default:
		fmt.Fprintf(p.s.Err, "kcrash: snapshot of the live run: bundle %s (%s)\n", displayPath(path), human.Bytes(size))
	}
	if why == "hang" && child != nil && p.o.hangAction == "stop" {
		if p.o.killAfter <= 0 {
			p.o.killAfter = 10 * time.Second
		}
		child.StopWithGrace(syscall.SIGTERM, p.o.killAfter)
	}
}

func (p *pipeline) hangWhat() string {
	if p.o.healthURL != "" {
		return "health answer from " + p.o.healthURL
	}
	return "output"
}

// bundleMu serialises bundle writing within one kcrash: a snapshot and the
// final bundle must not interleave their collectors.
var bundleMu sync.Mutex

func (p *pipeline) bundle(ex exitInfo, hang bool, mode string) (string, int64, error) {
	bundleMu.Lock()
	defer bundleMu.Unlock()
	env := p.env
	env.ExitCode, env.ExitSignal, env.CoreDumped = ex.code, ex.signal, ex.coreDumped
	host := env.Host(context.Background())
	name := bundle.Name(time.Now(), host.Hostname, os.Getpid(), rankOf(p.job))
	// Staged next to the final place: a full or unwritable $TMPDIR must not
	// cost the bundle, and the final link stays on one filesystem.
	stage, err := bundle.NewStage(p.o.out, name)
	if err != nil {
		return "", 0, fmt.Errorf("staging directory: %v", err)
	}
	defer stage.Remove()

	statuses := collectors.Run(context.Background(), env, p.chosen, stage.Dir, p.o.collectorTimeout)
	if mode == "run" && p.afterCollect != nil {
		p.afterCollect()
	}
	var run *triage.RunSetup
	if mode == "run" && len(p.profiles) > 0 { // kcrash run, not attach or collect
		run = runSetup(p.profiles, p.o.level)
	}
	tri := analyze(env, stage.Dir, ex, hang, p.args, run)
	host.GPUs = gpuNames(stage.Dir)
	m := &bundle.Manifest{
		SchemaVersion: bundle.SchemaVersion, KcrashVersion: version, Mode: mode,
		Command: p.args, Cwd: p.cwd, StartTime: env.Start.UTC(), EndTime: ex.end.UTC(),
		Exit: bundle.Exit{Code: ex.code, CoreDumped: ex.coreDumped, Reason: ex.reason},
		Host: host, Job: p.job, Collectors: statuses, Truncated: []string{},
	}
	if ex.signal != "" {
		sig := ex.signal
		m.Exit.Signal = &sig
	}
	r := redact.New(append(os.Environ(), p.resolved.Env...))
	if p.cfg != nil {
		// the config file's upload credentials are secrets wherever they show up
		for k, v := range p.cfg.Credentials {
			r.Add(k + "=" + v)
		}
	}
	m.Env = bundle.Env{Profiles: p.profiles, Set: r.Env(p.resolved.Set), Kept: r.Env(p.resolved.Kept), User: r.Env(userVars(p.resolved))}
	m.Triage = tri.json
	p.mu.Lock()
	m.Notes = append(m.Notes, p.notes...)
	p.mu.Unlock()
	summary := tri.summary(summaryMeta{name: name, args: p.args, ex: ex, start: env.Start, outputFile: filepath.Join(stage.Dir, "output.log")})
	// summary.md quotes the child's output: escape sequences (C1 included)
	// are written visibly, so that reading it never drives a terminal.
	summary = visible.String(summary)
	if err := os.WriteFile(stage.Dir+"/summary.md", []byte(summary), 0o644); err != nil {
		return "", 0, err
	}
	wo := bundle.WriteOptions{Out: p.o.out, Budget: int64(p.o.budget), Redactor: r, Report: report.StagePage}
	var pt *privateTarget
	if p.private {
		if pt, err = newPrivateTarget(p.o.out); err != nil {
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
		fmt.Fprintf(p.s.Err, "kcrash: cannot write into %s (%v); bundle written to %s instead\n", p.o.out, shortErr(res.Fallback), res.Path)
	}
	return res.Path, res.Size, nil
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.HasPrefix(s, "open ") || strings.HasPrefix(s, "mkdir ") {
		return s[i+2:]
	}
	return s
}

func rankOf(j *bundle.Job) string {
	if j == nil || j.Rank == nil {
		return ""
	}
	return fmt.Sprint(*j.Rank)
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
	b, err := os.ReadFile(dir + "/gpu.json")
	if err != nil {
		return names
	}
	var g struct {
		Snapshot struct {
			GPUs []struct {
				Index any    `json:"index"`
				Name  string `json:"name"`
				BusID string `json:"bus_id"`
			} `json:"gpus"`
		} `json:"snapshot"`
	}
	if json.Unmarshal(b, &g) != nil {
		return names
	}
	for _, x := range g.Snapshot.GPUs {
		names = append(names, strings.TrimSpace(fmt.Sprintf("%v %s %s", x.Index, x.Name, x.BusID)))
	}
	return names
}
