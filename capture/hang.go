package capture

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/kcrash/kcrash/supervisor"
)

// watchHang calls onHang once when the child has printed nothing for
// --hang-timeout, or, with --health-url, when the health endpoint has not
// answered 2xx for that long (servers are quiet when idle, so silence alone
// would be a false alarm for them).
func watchHang(ctx context.Context, child *supervisor.Child, o Hang, onHang func()) {
	period := o.Timeout / 10
	period = min(max(period, 100*time.Millisecond), 5*time.Second)
	if o.HealthURL != "" {
		period = o.HealthInterval
		if period <= 0 {
			period = time.Second
		}
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	lastHealthy := time.Now()
	client := &http.Client{Timeout: min(o.Timeout, 10*time.Second)}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var quiet time.Duration
		if o.HealthURL != "" {
			if healthy(ctx, client, o.HealthURL) {
				lastHealthy = time.Now()
			}
			quiet = time.Since(lastHealthy)
		} else {
			quiet = time.Since(child.LastOutput())
		}
		if quiet >= o.Timeout {
			onHang()
			return
		}
	}
}

func healthy(ctx context.Context, c *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// stopWatch waits, after a scheduler's or a container runtime's SIGTERM,
// for the child to end within the grace; one still running then is hung in
// its shutdown (an NCCL teardown, a stuck worker join), and its stacks are
// worth a bundle before the SIGKILL that follows.
type stopWatch struct {
	mu    sync.Mutex
	armed chan string // receives who sent the SIGTERM, once
}

func (s *stopWatch) arm(who string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.armed == nil {
		s.armed = make(chan string, 1)
	}
	select {
	case s.armed <- who:
	default: // a second SIGTERM keeps the first one's clock
	}
}

func (s *stopWatch) start(ctx context.Context, child *supervisor.Child, grace time.Duration, onHung func(who string, grace time.Duration)) {
	if grace <= 0 {
		return
	}
	s.mu.Lock()
	if s.armed == nil {
		s.armed = make(chan string, 1)
	}
	armed := s.armed
	s.mu.Unlock()
	go func() {
		var who string
		select {
		case <-ctx.Done():
			return
		case <-child.Exited():
			return
		case who = <-armed:
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-child.Exited():
		case <-t.C:
			onHung(who, grace)
		}
	}()
}
