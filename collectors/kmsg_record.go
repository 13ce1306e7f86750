package collectors

import (
	"fmt"
	"time"

	"github.com/kcrash/kcrash/internal/kmsg"
)

type kmsgRecord = kmsg.Record

// kmsgEntry is one line of kmsg.log: a record (with how many identical
// records followed it), or a gap in the sequence numbers.
type kmsgEntry struct {
	rec      kmsgRecord
	count    int           // identical consecutive records folded into this one, ≥ 1
	lastMono time.Duration // the last repeat's time
	gap      *kmsgGap
}

// kmsgGap is a run of sequence numbers the reader never saw: the kernel
// overwrote them before they were read.
type kmsgGap struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

func (g kmsgGap) String() string {
	return fmt.Sprintf("lost %d records (seq %d..%d)", g.To-g.From+1, g.From, g.To)
}

// Bounds of the kmsg buffer: a kernel flood during a long run must not grow
// kcrash's memory without limit; the oldest records go first and are counted.
const (
	kmsgMaxRecords = 20000
	kmsgMaxBytes   = 8 << 20
	kmsgMaxGaps    = 1000
	kmsgEntryCost  = 64 // per-entry overhead counted against kmsgMaxBytes
)

// kmsgBuffer keeps the records of the run window, bounded, in sequence
// order. Two readers may feed it (the watcher, and the collector's final
// drain on a fresh descriptor): sequence numbers make that idempotent.
type kmsgBuffer struct {
	maxRecords, maxBytes int
	windowMono           time.Duration // records stamped before this are not the run's
	hasWindow            bool

	entries []kmsgEntry // live from head
	head    int
	bytes   int
	records int // live record entries

	// filtered: the records come through a reader that leaves some out
	// (the node agent), so a jump in sequence numbers is no loss; real
	// gaps are added by addGap.
	filtered bool

	haveSeq   bool
	lastSeq   uint64
	ringStart *kmsgRecord // the first record ever read: where the ring began
	inWindow  bool        // a record of the window has been seen

	dropped    int // records evicted by the bound, repeats included
	older      int // records before the window, skipped
	malformed  int
	gaps       []kmsgGap
	lost       uint64 // records lost in gaps, past kmsgMaxGaps included
	moreGaps   int    // gaps not kept in gaps
	totalCount int    // records of the window, repeats included
}

func newKmsgBuffer() *kmsgBuffer {
	return &kmsgBuffer{maxRecords: kmsgMaxRecords, maxBytes: kmsgMaxBytes}
}

func (b *kmsgBuffer) setWindow(mono time.Duration) {
	b.windowMono, b.hasWindow = mono, true
}

func (b *kmsgBuffer) before(mono time.Duration) bool { return b.hasWindow && mono < b.windowMono }

func (b *kmsgBuffer) add(r kmsgRecord) {
	if b.haveSeq && r.Seq <= b.lastSeq {
		return // already read through the other descriptor
	}
	if !b.haveSeq {
		first := r
		b.ringStart = &first
	}
	if b.haveSeq && r.Seq > b.lastSeq+1 && !b.before(r.Mono) && !b.filtered {
		// The record after the gap is in the window, so the lost ones may
		// have been too. A gap wholly before the window loses nothing.
		b.addGap(kmsgGap{From: b.lastSeq + 1, To: r.Seq - 1})
	}
	b.haveSeq, b.lastSeq = true, r.Seq
	if b.before(r.Mono) {
		b.older++
		return
	}
	b.inWindow = true
	b.totalCount++
	if n := len(b.entries); n > b.head {
		last := &b.entries[n-1]
		if last.gap == nil && last.rec.Text == r.Text && last.rec.Level == r.Level && last.rec.Facility == r.Facility {
			last.count++
			last.lastMono = r.Mono
			return
		}
	}
	b.push(kmsgEntry{rec: r, count: 1, lastMono: r.Mono})
}

func (b *kmsgBuffer) addGap(g kmsgGap) {
	b.lost += g.To - g.From + 1
	if len(b.gaps) < kmsgMaxGaps {
		b.gaps = append(b.gaps, g)
	} else {
		b.moreGaps++
	}
	b.push(kmsgEntry{gap: &g})
}

func (b *kmsgBuffer) push(e kmsgEntry) {
	b.entries = append(b.entries, e)
	b.bytes += e.cost()
	if e.gap == nil {
		b.records++
	}
	for b.head < len(b.entries)-1 && (b.records > b.maxRecords || b.bytes > b.maxBytes) {
		old := &b.entries[b.head]
		b.bytes -= old.cost()
		if old.gap == nil {
			b.records--
			b.dropped += old.count
		}
		*old = kmsgEntry{}
		b.head++
	}
	if b.head > 1024 && b.head > len(b.entries)/2 {
		n := copy(b.entries, b.entries[b.head:])
		clear(b.entries[n:])
		b.entries, b.head = b.entries[:n], 0
	}
}

func (e *kmsgEntry) cost() int {
	if e.gap != nil {
		return kmsgEntryCost
	}
	return kmsgEntryCost + len(e.rec.Text) + len(e.rec.Dict)
}

func (b *kmsgBuffer) live() []kmsgEntry { return b.entries[b.head:] }
