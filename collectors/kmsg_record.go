package collectors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
)

// kmsgRecord is one record of /dev/kmsg (Documentation/ABI/testing/dev-kmsg):
// "prio,seq,usec,flags[,...];text\n[ KEY=VALUE\n]...".
type kmsgRecord struct {
	Seq      uint64
	Mono     time.Duration // since boot, on the kernel's printk clock
	Level    uint8         // syslog severity, 0 emerg .. 7 debug
	Facility uint8         // 0 kern; 1 user for anything written to /dev/kmsg from user space
	Text     string        // unescaped, except control characters other than tab and newline
	Dict     string        // the record's KEY=VALUE lines (SUBSYSTEM=pci, DEVICE=+pci:...), newline-separated
}

var errKmsgMalformed = errors.New("malformed /dev/kmsg record")

// parseKmsgRecord parses one record as read(2) returns it. It is on the hot
// path of a kernel flood, so it walks the bytes once and allocates only the
// strings it keeps.
func parseKmsgRecord(b []byte) (kmsgRecord, error) {
	var r kmsgRecord
	i := 0
	field := func() (uint64, bool) {
		start, v := i, uint64(0)
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			v = v*10 + uint64(b[i]-'0')
			i++
		}
		return v, i > start && i < len(b)
	}
	prio, ok := field()
	if !ok || b[i] != ',' {
		return r, errKmsgMalformed
	}
	i++
	seq, ok := field()
	if !ok || b[i] != ',' {
		return r, errKmsgMalformed
	}
	i++
	usec, ok := field()
	if !ok || (b[i] != ',' && b[i] != ';') {
		return r, errKmsgMalformed
	}
	// Flags and any fields later kernels add (caller id) are not needed.
	for i < len(b) && b[i] != ';' {
		i++
	}
	if i == len(b) {
		return r, errKmsgMalformed
	}
	i++
	r.Seq, r.Mono = seq, time.Duration(usec)*time.Microsecond
	r.Level, r.Facility = uint8(prio&7), uint8(prio>>3)

	body := b[i:]
	text := body
	var dict []byte
	for j, c := range body {
		if c == '\n' {
			text, dict = body[:j], body[j+1:]
			break
		}
	}
	r.Text = unescapeKmsg(text)
	if len(dict) > 0 {
		r.Dict = kmsgDict(dict)
	}
	return r, nil
}

// unescapeKmsg undoes the kernel's \xNN escaping of bytes outside printable
// ASCII (UTF-8 text, tabs in amdgpu's fault dumps, newlines of multi-line
// messages) but keeps other control characters escaped, so that kmsg.log
// holds no terminal escape sequences.
func unescapeKmsg(b []byte) string {
	j := bytes.IndexByte(b, '\\')
	if j < 0 {
		return string(b)
	}
	// A Builder hands its buffer over as the string: one allocation.
	var out strings.Builder
	out.Grow(len(b))
	out.Write(b[:j])
	for k := j; k < len(b); k++ {
		c := b[k]
		if c == '\\' && k+3 < len(b) && b[k+1] == 'x' {
			if hi, ok1 := kmsgUnhex(b[k+2]); ok1 {
				if lo, ok2 := kmsgUnhex(b[k+3]); ok2 {
					v := hi<<4 | lo
					if v >= ' ' && v != 0x7f || v == '\t' || v == '\n' {
						out.WriteByte(v)
						k += 3
						continue
					}
				}
			}
		}
		out.WriteByte(c)
	}
	return out.String()
}

func kmsgUnhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// kmsgDict turns " KEY=VALUE\n KEY=VALUE\n" into "KEY=VALUE\nKEY=VALUE".
func kmsgDict(b []byte) string {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		line := b
		rest := []byte(nil)
		for j, c := range b {
			if c == '\n' {
				line, rest = b[:j], b[j+1:]
				break
			}
		}
		b = rest
		if len(line) > 0 && line[0] == ' ' {
			line = line[1:]
		}
		if len(line) == 0 {
			continue
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out = append(out, line...)
	}
	return string(out)
}

// Level and facility names as `dmesg -x` spells them.
var kmsgLevels = [8]string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}

var kmsgFacilities = [...]string{"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news",
	"uucp", "cron", "authpriv", "ftp", "12", "13", "14", "15",
	"local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"}

func kmsgFacility(f uint8) string {
	if int(f) < len(kmsgFacilities) {
		return kmsgFacilities[f]
	}
	return fmt.Sprint(f)
}

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
	if b.haveSeq && r.Seq > b.lastSeq+1 && !b.before(r.Mono) {
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

// kmsgReadBuf fits the largest record the kernel hands out (text plus
// dictionary, CONSOLE_EXT_LOG_MAX); a smaller buffer makes read fail with EINVAL.
const kmsgReadBuf = 8192

// readKmsg reads records from src until src is caught up (EAGAIN on a
// non-blocking descriptor: nil), ends (io.EOF, which the ring never
// does: something else is mounted in its place), ctx is done, or a read
// fails otherwise. Each read returns one record. EPIPE means the kernel overwrote
// the record the reader stood on; the next read returns the oldest record
// still there, and the jump in sequence numbers tells how many were lost, so
// reading goes on (euank/go-kmsg-parser v2 compares the wrapped error with
// ==, misses it and stops: node-problem-detector's dead kernel monitor).
// add is called with each record.
func readKmsg(ctx context.Context, src io.Reader, buf []byte, add func(kmsgRecord), malformed func()) error {
	for n := 0; ; n++ {
		if n&255 == 255 && ctx.Err() != nil {
			return ctx.Err()
		}
		m, err := src.Read(buf)
		if m > 0 {
			if r, perr := parseKmsgRecord(buf[:m]); perr == nil {
				add(r)
			} else {
				malformed()
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EINTR):
		case errors.Is(err, syscall.EAGAIN):
			return nil
		default:
			return err
		}
	}
}
