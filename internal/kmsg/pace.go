package kmsg

import (
	"time"

	"golang.org/x/sys/unix"
)

// FloodRate is the records a second above which a follower of the ring
// reads it in batches: 10,000 records a minute is 167 a second; a GPU
// crash prints tens of lines, read one pass each while the faulting
// process still lives.
const FloodRate = 100

// DefaultBatch is how long a pass lets the next records gather while the
// ring floods: the ring is then read once a second, not once a record.
const DefaultBatch = time.Second

// freshRecord: a record printed less than this before it was read arrived
// while the reader was following the ring; an older one is backlog (what a
// start or a reopen finds in the ring), which is no flood.
const freshRecord = 2 * time.Second

// Pacer decides, after each pass over the ring, whether its reader sleeps
// in poll(2) until the next record (each record wakes it) or lets records
// gather for Batch before reading again. Each wakeup of the process, not
// the record, was most of what following a flood cost; but below
// FloodRate fresh records a second every record is read at once, so that
// whatever a reader looks up about a record's processes is looked up while
// they live. A record is never lost to a pause: the ring keeps it, and a
// jump in sequence numbers says what the ring overwrote.
type Pacer struct {
	Batch time.Duration // 0: DefaultBatch; negative: never batch

	start      time.Time
	this, last int // fresh records read in the current and the last second
	passMono   time.Duration
	fresh      int
}

// Begin starts a pass; Count is called with each record it reads.
func (p *Pacer) Begin() {
	p.passMono, p.fresh = MonoNow(), 0
}

// Count counts r, if it was printed lately.
func (p *Pacer) Count(r Record) {
	if p.passMono-r.Mono < freshRecord {
		p.fresh++
	}
}

// End ends a pass that began at t and says how long to let records gather
// before the next one (0: wait for the next record).
func (p *Pacer) End(t time.Time) time.Duration {
	switch d := t.Sub(p.start); {
	case d >= 2*time.Second:
		p.start, p.this, p.last = t, 0, 0
	case d >= time.Second:
		p.start, p.last, p.this = p.start.Add(time.Second), p.this, 0
	}
	p.this += p.fresh
	if p.fresh == 0 || (p.this < FloodRate && p.last < FloodRate) || p.Batch < 0 {
		return 0
	}
	if p.Batch == 0 {
		return DefaultBatch
	}
	return p.Batch
}

// UntilTick is how long from now to the next multiple of period in wall
// time (a whole period when now is on one). A batch's pause and the
// agent's other periodic work end on this grid, so that they wake the
// process once between them, not once each: on a quiet node, each wakeup
// costs more than the work it does.
func UntilTick(now time.Time, period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	return now.Truncate(period).Add(period).Sub(now)
}

// MonoNow is CLOCK_MONOTONIC, which the printk clock that stamps records
// follows within milliseconds.
func MonoNow() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
