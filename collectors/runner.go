package collectors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kcrash/kcrash/bundle"
)

// StartWatchers starts every collector that watches during the run. The
// returned stop function cancels them and waits, at most grace, for them to
// return.
func StartWatchers(ctx context.Context, env *Env, cs []Named) (stop func(grace time.Duration)) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range cs {
		w, ok := c.Collector.(Watcher)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					env.Logger.Error("watcher panicked", "collector", c.Name, "panic", r)
				}
			}()
			w.Watch(ctx, env)
		}()
	}
	return func(grace time.Duration) {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
		}
	}
}

// Run runs every collector in parallel, each under timeout, writing into dir.
// It returns when all have finished or timed out; a collector that ignores
// its context is abandoned, its status "timeout", and its goroutine left to
// finish on its own. Statuses come back in the order of cs.
func Run(ctx context.Context, env *Env, cs []Named, dir string, timeout time.Duration) []bundle.CollectorStatus {
	st := make([]bundle.CollectorStatus, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st[i] = runOne(ctx, env, c, dir, timeout)
		}()
	}
	wg.Wait()
	return st
}

// timedOut is a collector's own report that its tools all timed out: it
// returned in time, with what it had, but got no answer (SPEC §4: its
// status is timeout, never ok).
type timedOut struct{ msg string }

func (e *timedOut) Error() string { return e.msg }
func (e *timedOut) Unwrap() error { return context.DeadlineExceeded }

// TimedOut is what a collector returns when every tool it called timed out.
func TimedOut(format string, a ...any) error { return &timedOut{fmt.Sprintf(format, a...)} }

func runOne(ctx context.Context, env *Env, c Named, dir string, timeout time.Duration) bundle.CollectorStatus {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := NewOutput(dir)
	begin := time.Now()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("panic: %v", r)
			}
		}()
		done <- c.Collect(ctx, env, out)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Give a collector that honours ctx a moment to return its own error.
		select {
		case err = <-done:
		case <-time.After(100 * time.Millisecond):
			err = ctx.Err()
		}
	}
	s := bundle.CollectorStatus{Name: c.Name, DurationMS: time.Since(begin).Milliseconds(), Files: out.Files(), Status: bundle.StatusOK, Source: out.Source()}
	if s.Files == nil {
		s.Files = []string{}
	}
	var to *timedOut
	switch {
	case err == nil:
	case errors.As(err, &to):
		s.Status, s.Error = bundle.StatusTimeout, to.Error()
	case errors.Is(err, ErrSkipped):
		s.Status, s.Error = bundle.StatusSkipped, strings.TrimPrefix(err.Error(), ErrSkipped.Error()+": ")
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		s.Status, s.Error = bundle.StatusTimeout, fmt.Sprintf("no result within %s", timeout)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			s.Error += ": " + err.Error()
		}
	default:
		s.Status, s.Error = bundle.StatusError, err.Error()
	}
	return s
}
