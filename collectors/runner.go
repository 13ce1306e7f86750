package collectors

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// First are the collectors whose evidence matters most and comes fastest:
// the child's last output, the kernel-API log's tail, kernel messages. They
// start first so that their files are on disk before the slow ones (GPU
// tools, stacks, software) run, should kcrash be killed while it collects.
var First = []string{"output", "kernel-api", "kmsg"}

// firstHeadStart is the most the other collectors wait for First to finish.
const firstHeadStart = 2 * time.Second

// Run runs every collector, each under timeout, writing into dir: First's
// in parallel, then the rest in parallel once those are done (or after a
// short head start), all within the same timeout counted from the start.
// It returns when all have finished or timed out; a collector that ignores
// its context is abandoned, its status "timeout", and its goroutine left to
// finish on its own. Statuses come back in the order of cs; done, when set,
// is called with each as it is known.
func Run(ctx context.Context, env *Env, cs []Named, dir string, timeout time.Duration, done func(bundle.CollectorStatus)) []bundle.CollectorStatus {
	st := make([]bundle.CollectorStatus, len(cs))
	// One deadline for all: those started after the head start have less.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var first, rest sync.WaitGroup
	start := func(wg *sync.WaitGroup, i int, c Named) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st[i] = runOne(ctx, env, c, dir, timeout)
			if done != nil {
				done(st[i])
			}
		}()
	}
	for i, c := range cs {
		if slices.Contains(First, c.Name) {
			start(&first, i, c)
		}
	}
	firstDone := make(chan struct{})
	go func() { first.Wait(); close(firstDone) }()
	select {
	case <-firstDone:
	case <-time.After(min(firstHeadStart, timeout/4)):
	}
	for i, c := range cs {
		if !slices.Contains(First, c.Name) {
			start(&rest, i, c)
		}
	}
	first.Wait()
	rest.Wait()
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
