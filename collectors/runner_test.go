package collectors

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
)

// timedCollector records when it ran; it works for d, or until ctx ends.
type timedCollector struct {
	d          time.Duration
	mu         sync.Mutex
	start, end time.Time
}

func (c *timedCollector) Collect(ctx context.Context, _ *Env, out *Output) error {
	c.mu.Lock()
	c.start = time.Now()
	c.mu.Unlock()
	var err error
	select {
	case <-time.After(c.d):
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.mu.Lock()
	c.end = time.Now()
	c.mu.Unlock()
	if werr := out.WriteFile("x-"+time.Now().Format("150405.000000000"), nil); err == nil {
		err = werr
	}
	return err
}

func (c *timedCollector) times() (time.Time, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start, c.end
}

// What matters most is on disk before the slow collectors start, and the
// whole stays within one timeout.
func TestRunFirstCollectorsFirst(t *testing.T) {
	output, kmsg := &timedCollector{d: 150 * time.Millisecond}, &timedCollector{d: 50 * time.Millisecond}
	gpu, software := &timedCollector{d: 10 * time.Millisecond}, &timedCollector{d: time.Hour}
	cs := []Named{{"gpu", gpu}, {"kmsg", kmsg}, {"output", output}, {"software", software}}
	var mu sync.Mutex
	var order []string
	begin := time.Now()
	st := Run(context.Background(), &Env{}, cs, t.TempDir(), 2*time.Second, func(s bundle.CollectorStatus) {
		mu.Lock()
		order = append(order, s.Name)
		mu.Unlock()
	})
	took := time.Since(begin)
	_, outEnd := output.times()
	_, kmsgEnd := kmsg.times()
	gpuStart, _ := gpu.times()
	if gpuStart.Before(outEnd) || gpuStart.Before(kmsgEnd) {
		t.Errorf("gpu started %s before output ended", outEnd.Sub(gpuStart))
	}
	if took > 2*time.Second+500*time.Millisecond {
		t.Errorf("took %s, over the 2s timeout", took)
	}
	if len(order) != 4 || order[0] != "kmsg" || order[1] != "output" || order[2] != "gpu" || order[3] != "software" {
		t.Errorf("done in order %v", order)
	}
	if st[0].Name != "gpu" || st[0].Status != bundle.StatusOK || st[3].Status != bundle.StatusTimeout {
		t.Errorf("statuses %+v", st)
	}
}

// A first collector that hangs holds the others back only for a head start.
func TestRunFirstHeadStartBounded(t *testing.T) {
	output, gpu := &timedCollector{d: time.Hour}, &timedCollector{d: 10 * time.Millisecond}
	begin := time.Now()
	st := Run(context.Background(), &Env{}, []Named{{"output", output}, {"gpu", gpu}}, t.TempDir(), 2*time.Second, nil)
	gpuStart, _ := gpu.times()
	if wait := gpuStart.Sub(begin); wait < 400*time.Millisecond || wait > time.Second {
		t.Errorf("gpu waited %s, want the head start (timeout/4)", wait)
	}
	if took := time.Since(begin); took > 2*time.Second+500*time.Millisecond {
		t.Errorf("took %s", took)
	}
	if st[0].Status != bundle.StatusTimeout || st[1].Status != bundle.StatusOK {
		t.Errorf("statuses %+v", st)
	}
}
