package kmsg

import (
	"testing"
	"time"
)

// The pacer batches only while fresh records arrive at FloodRate a second
// or more: a crash's burst and a start's backlog are read at once.
func TestPacer(t *testing.T) {
	t0 := time.Now()
	pass := func(p *Pacer, at time.Duration, fresh, old int) time.Duration {
		p.Begin()
		for range fresh {
			p.Count(Record{Mono: p.passMono - time.Millisecond})
		}
		for range old {
			p.Count(Record{Mono: p.passMono - time.Minute})
		}
		return p.End(t0.Add(at))
	}
	var p Pacer
	if d := pass(&p, 0, 0, 5000); d != 0 {
		t.Errorf("a start's backlog of 5000 old records: batch %v, want none", d)
	}
	if d := pass(&p, 10*time.Millisecond, 40, 0); d != 0 {
		t.Errorf("a crash's 40 lines: batch %v, want none", d)
	}
	for i := range 60 {
		pass(&p, time.Duration(20+i)*time.Millisecond, 1, 0)
	}
	if d := pass(&p, 90*time.Millisecond, 1, 0); d != DefaultBatch {
		t.Errorf("over %d fresh records in a second: batch %v, want %v", FloodRate, d, DefaultBatch)
	}
	// The next second still remembers the flood; a quiet pass never waits.
	if d := pass(&p, 1500*time.Millisecond, 1, 0); d != DefaultBatch {
		t.Errorf("the second after a flood: batch %v, want %v", d, DefaultBatch)
	}
	if d := pass(&p, 1600*time.Millisecond, 0, 0); d != 0 {
		t.Errorf("a pass that read nothing: batch %v", d)
	}
	if d := pass(&p, 5*time.Second, 1, 0); d != 0 {
		t.Errorf("one record after a quiet spell: batch %v, want none", d)
	}
	never := Pacer{Batch: -1}
	if d := pass(&never, 0, 500, 0); d != 0 {
		t.Errorf("Batch -1: batch %v", d)
	}
}
