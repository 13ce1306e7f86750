package main

import (
	"context"
	"sync"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/capture"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/supervisor"
)

// pipeline is how runRun (run.go) reaches the capture.Session it fills
// field by field; it goes once run.go builds the session itself.
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

	// afterCollect runs once the final bundle's collectors are done (frees the ring).
	afterCollect func()

	once sync.Once
	sess *capture.Session
}

func (p *pipeline) session() *capture.Session {
	p.once.Do(func() {
		p.sess = &capture.Session{IO: ios(p.s), Config: captureConfig(p.cfg, p.o.out, p.o.collectorTimeout, p.o.budget),
			Env: p.env, Chosen: p.chosen, Args: p.args, Cwd: p.cwd, Job: p.job, Resolved: p.resolved,
			Profiles: p.profiles, Level: p.o.level, AfterCollect: p.afterCollect,
			Hang: capture.Hang{Timeout: p.o.hangTimeout, HealthURL: p.o.healthURL, Action: p.o.hangAction, KillAfter: p.o.killAfter}}
	})
	return p.sess
}

func (p *pipeline) hangBundle() (string, int64, bool) { return p.session().HangBundle() }
func (p *pipeline) note(format string, a ...any)      { p.session().Note(format, a...) }
func (p *pipeline) write(res *supervisor.Result, hang bool) (string, int64) {
	s := p.session()
	s.StoppedBy = p.stoppedBy
	return s.Write(res, hang)
}
func (p *pipeline) snapshot(why string, child *supervisor.Child) { p.session().Snapshot(why, child) }

func (p *pipeline) uploadBundle(ctx context.Context, path string) {
	uploadBundle(ctx, p.s, p.cfg, p.o.upload, path)
}

// ios is the command's streams as the capture package takes them.
func ios(s *streams) *iostreams.IOStreams {
	return &iostreams.IOStreams{In: s.In, Out: s.Out, Err: s.Err}
}

// captureConfig is where and how the bundles of a command go; the config
// file's upload credentials are secrets wherever they show up.
func captureConfig(cfg *userConfig, out string, collectorTimeout time.Duration, budget byteSize) capture.Config {
	c := capture.Config{Out: out, CollectorTimeout: collectorTimeout, Budget: int64(budget), Version: version}
	if cfg != nil {
		for k, v := range cfg.Credentials {
			c.Secrets = append(c.Secrets, k+"="+v)
		}
	}
	return c
}
