package collectors

import (
	"testing"
	"time"
)

// waitFor polls cond every 10 ms until it holds, and fails the test when
// it still does not after d: for conditions no event announces (a sampler's
// next tick).
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
	}
}

// samples is how many samples the GPU sampler has taken so far.
func (c *gpuCollector) samples() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ring) + c.dropped
}

// samples is how many samples the memory sampler has taken so far.
func (c *memoryCollector) samples() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ring) + c.dropped
}

// waitSamples waits until the sampler has taken n more samples than it had.
func waitSamples(t testing.TB, what string, count func() int, n int) {
	t.Helper()
	from := count()
	waitFor(t, 10*time.Second, what, func() bool { return count() >= from+n })
}

// seen reports whether the kmsg watcher has read a record with this text.
func (k *kmsgCollector) seen(text string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range k.buf.live() {
		if e.rec.Text == text {
			return true
		}
	}
	return false
}
