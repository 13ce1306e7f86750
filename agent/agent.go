// Package agent wires the node agent together (docs/agent.md): the journal
// and its cursor first, then the sources that feed it (the one /dev/kmsg
// reader, the one GPU sampler, the process tracker), then the listener
// that answers clients; on the way out each stops in reverse order.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kcrash/kcrash/agent/access"
	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/gpusampler"
	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/agent/kmsgsource"
	"github.com/kcrash/kcrash/agent/metrics"
	"github.com/kcrash/kcrash/agent/server"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/internal/kmsg"
)

// Config is the agent's settings; zero fields take the defaults.
type Config struct {
	Socket      string // api.DefaultSocket
	State       string // DefaultState: the journal and its cursor
	TextfileDir string // node_exporter's textfile directory; "" writes no metrics
	Kmsg        string // "/dev/kmsg"
	Journal     journal.Limits
	// GPUInterval is the GPU sampler's period (gpusampler.DefaultInterval
	// when 0); negative turns the sampler off.
	GPUInterval time.Duration
	// ProcRoot, SysRoot and DevRoot are the host's roots ("" for the real ones).
	ProcRoot, SysRoot, DevRoot string
	Version                    string
	Logger                     *slog.Logger
	// Ready is called once the agent answers on its socket (systemd's
	// READY=1); nil: nothing.
	Ready func()
}

// DefaultState is where the agent keeps its journal.
const DefaultState = "/var/lib/kcrash"

// pruneEvery is how often the journal drops what is past its age.
const pruneEvery = 10 * time.Minute

// Run runs the agent until ctx is done, or returns at once with an error
// when it cannot start: the state directory cannot be used, the kernel's
// ring cannot be read, or another agent holds the socket.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	log := cfg.Logger

	// 1. the journal and its cursor
	j, err := journal.Open(cfg.State, cfg.Journal)
	if err != nil {
		return fmt.Errorf("journal in %s: %w", cfg.State, err)
	}
	defer j.Close()
	bootID, err := kmsgsource.ReadBootID()
	if err != nil {
		return fmt.Errorf("boot id: %w", err)
	}

	// 2. the sources
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	goRun := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}

	tracker := &access.Tracker{ProcRoot: cfg.ProcRoot}
	tracker.Scan() // the processes alive now, before the first record needs them
	goRun(func() { tracker.Run(ctx) })
	ann := &access.Annotator{Tracker: tracker, ProcRoot: cfg.ProcRoot, SysRoot: cfg.SysRoot, DevRoot: cfg.DevRoot}

	src := &kmsgsource.Source{Path: cfg.Kmsg, Journal: j, Annotate: ann.Annotate, Logger: log}
	view := &journalView{Journal: j, src: src}

	var gpu *gpusampler.Sampler
	var gpuStats func() api.GPUStats
	if cfg.GPUInterval >= 0 {
		env := collectors.NewEnv()
		env.ProcRoot, env.SysRoot, env.DevRoot = cfg.ProcRoot, cfg.SysRoot, cfg.DevRoot
		env.Logger = log
		gpu = gpusampler.New(gpusampler.Config{Interval: cfg.GPUInterval, Env: env})
		gpuStats = gpu.Stats
	}
	m := metrics.New(metrics.Config{Journal: view.Stats, GPU: gpuStats, Logger: log})
	src.Observe = m.Observe

	// The ring is opened before anything answers: an agent that cannot
	// read it must say so at start, not serve empty answers.
	if err := kmsg.Probe(cfg.Kmsg); err != nil {
		return fmt.Errorf("%w (the agent runs as root, or with CAP_SYSLOG)", err)
	}
	srcErr := make(chan error, 1)
	goRun(func() { srcErr <- src.Run(ctx) })
	if gpu != nil {
		goRun(func() { gpu.Run(ctx) })
	}
	if cfg.TextfileDir != "" {
		goRun(func() { m.Run(ctx, cfg.TextfileDir, 2*time.Second) })
	}
	goRun(func() {
		t := time.NewTicker(pruneEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				j.Prune(now)
			}
		}
	})

	// 3. the listener
	ln, fromSystemd := server.SystemdListener()
	if !fromSystemd {
		if ln, err = server.Listen(cfg.Socket); err != nil {
			return err
		}
	}
	defer removeSocket(ln, fromSystemd)
	srv := &server.Server{Journal: view, Crashes: m.Crash, Tracker: tracker, ProcRoot: cfg.ProcRoot, SysRoot: cfg.SysRoot,
		BootID: bootID, BootTime: kmsg.BootTime(), Version: cfg.Version, Log: log, Fresh: src.WaitCaughtUp}
	if gpu != nil {
		srv.GPU = gpu
	}
	serveErr := make(chan error, 1)
	goRun(func() { serveErr <- srv.Serve(ctx, ln) })
	log.Info("kcrash agent: listening", "socket", ln.Addr().String(), "state", cfg.State, "journal_records", view.Stats().Records)
	if cfg.Ready != nil {
		cfg.Ready()
	}

	select {
	case <-ctx.Done():
		return nil
	case err := <-srcErr:
		if err == nil || ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("reading %s: %w", cfg.Kmsg, err)
	case err := <-serveErr:
		if err == nil || ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("serving %s: %w", cfg.Socket, err)
	}
}

func (c *Config) defaults() {
	if c.Socket == "" {
		c.Socket = api.DefaultSocket
	}
	if c.State == "" {
		c.State = DefaultState
	}
	if c.Kmsg == "" {
		c.Kmsg = filepath.Join(orDefault(c.DevRoot, "/dev"), "kmsg")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// journalView is the journal as the server and the metrics see it: its
// stats say whether the ring is being followed.
type journalView struct {
	*journal.Journal
	src *kmsgsource.Source
}

func (v *journalView) Stats() api.JournalStats {
	st := v.Journal.Stats()
	st.ReadingErr = v.src.Err()
	return st
}

// removeSocket removes the socket file the agent made; systemd's stays
// systemd's.
func removeSocket(ln net.Listener, fromSystemd bool) {
	if fromSystemd {
		return
	}
	if a, ok := ln.Addr().(*net.UnixAddr); ok && a.Name != "" {
		if err := os.Remove(a.Name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return
		}
	}
}
