// Package journal is the node agent's on-disk record of kernel messages:
// append-only segment files of one JSON Entry a line, bounded by bytes and
// by age, with a persisted Cursor that says where reading /dev/kmsg stopped.
package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/kcrash/kcrash/agent/api"
)

// Limits bound the journal. Zero fields take the defaults.
type Limits struct {
	MaxBytes     int64         // 256 MiB: past it the oldest segments go
	MaxAge       time.Duration // 7 days: a segment whose newest entry is older goes
	SegmentBytes int64         // 4 MiB: a new segment file past it
}

const (
	DefaultMaxBytes     = 256 << 20
	DefaultMaxAge       = 7 * 24 * time.Hour
	DefaultSegmentBytes = 4 << 20
)

// Cursor is the position of the newest record in the journal: the boot it
// belongs to and its /dev/kmsg sequence number.
type Cursor struct {
	BootID string `json:"boot_id"`
	Seq    uint64 `json:"seq"`
}

// Journal is safe for concurrent use: one writer (the kmsg source) appends
// while the server's handlers query.
type Journal struct {
	root, dir string
	lim       Limits

	mu        sync.Mutex
	segs      []*segment // oldest first; the last one is written while cur is set
	cur       *os.File   // the segment being written, opened at the first Append
	w         *bufio.Writer
	line      []byte    // the line being appended, reused
	cursor    Cursor    // newest record appended
	persisted Cursor    // what cursor.json holds
	cursorAt  time.Time // when cursor.json was last written
	corrupt   int64
	closed    bool
	err       error // a failed write: the journal takes no more
}

// Open opens (or creates) the journal in dir: dir/journal/ holds the
// segments, dir/cursor.json the cursor.
func Open(dir string, lim Limits) (*Journal, error) {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultMaxBytes
	}
	if lim.MaxAge <= 0 {
		lim.MaxAge = DefaultMaxAge
	}
	if lim.SegmentBytes <= 0 {
		lim.SegmentBytes = DefaultSegmentBytes
	}
	// A segment is the unit retention drops: keep a few within the cap.
	lim.SegmentBytes = max(min(lim.SegmentBytes, lim.MaxBytes/4), 1)
	j := &Journal{root: dir, dir: filepath.Join(dir, "journal"), lim: lim}
	// Kernel messages name other users' processes: root's alone.
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, err
	}
	var nums []uint64
	for _, de := range ents {
		if n, ok := segmentNum(de.Name()); ok && de.Type().IsRegular() {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	for _, n := range nums {
		s, corrupt, err := scanSegment(j.dir, n)
		if err != nil {
			return nil, err
		}
		j.corrupt += int64(corrupt)
		if s.size == 0 {
			os.Remove(s.path)
			continue
		}
		j.segs = append(j.segs, s)
	}
	os.Remove(filepath.Join(dir, "cursor.json.tmp"))
	if b, err := os.ReadFile(filepath.Join(dir, "cursor.json")); err == nil {
		// A damaged cursor (it is renamed into place whole, so only by
		// hand) is as good as none: the segments say where reading stopped.
		_ = json.Unmarshal(b, &j.persisted)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	j.cursor = j.persisted
	// cursor.json lags the segments by up to one sync: records written
	// after it that survived (the agent killed, not the power) are in the
	// journal already, and resuming from cursor.json would repeat them.
	for _, s := range slices.Backward(j.segs) {
		if s.last != (Cursor{}) {
			j.cursor = s.last
			if f, err := os.Open(s.path); err == nil {
				err = f.Sync()
				f.Close()
				if err != nil {
					return nil, err
				}
			}
			break
		}
	}
	if j.cursor != j.persisted {
		if err := j.writeCursor(j.cursor); err != nil {
			return nil, err
		}
	}
	j.prune(time.Now())
	return j, nil
}

// Append adds entries in order. They are buffered: Sync makes them durable.
func (j *Journal) Append(es ...Entry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("journal: closed")
	}
	if j.err != nil {
		return j.err
	}
	for i := range es {
		e := es[i]
		e.Wall = e.Wall.UTC()
		var err error
		if j.line, err = appendLine(j.line[:0], &e); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		if j.cur == nil || j.full(int64(len(j.line))) {
			if err := j.roll(); err != nil {
				j.err = err
				return err
			}
		}
		if _, err := j.w.Write(j.line); err != nil {
			j.err = fmt.Errorf("journal: %w", err)
			return j.err
		}
		j.segs[len(j.segs)-1].note(&e, len(j.line))
		if e.Gap == nil {
			j.cursor = Cursor{BootID: e.Boot, Seq: e.Rec.Seq}
		}
	}
	return nil
}

// full says whether a line of n bytes would take the segment being
// written past its size (a line longer than a segment gets one of its own).
func (j *Journal) full(n int64) bool {
	s := j.segs[len(j.segs)-1]
	return s.size > 0 && s.size+n > j.lim.SegmentBytes
}

// roll starts a new segment. The one it leaves is made durable first, so
// that a cursor persisted later never points past what is on disk.
func (j *Journal) roll() error {
	if j.cur != nil {
		if err := j.syncFile(); err != nil {
			return err
		}
		if err := j.cur.Close(); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		j.cur = nil
	}
	num := uint64(1)
	if len(j.segs) > 0 {
		num = j.segs[len(j.segs)-1].num + 1
	}
	path := filepath.Join(j.dir, segmentName(num))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := syncDir(j.dir); err != nil {
		f.Close()
		return err
	}
	j.cur = f
	if j.w == nil {
		j.w = bufio.NewWriterSize(f, 64<<10)
	} else {
		j.w.Reset(f)
	}
	j.segs = append(j.segs, &segment{num: num, path: path, trusted: true})
	j.prune(time.Now())
	return nil
}

func (j *Journal) syncFile() error {
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := j.cur.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// cursorEvery bounds how often SyncRecords rewrites cursor.json. A restart
// resumes from the newest record of the segments, which Sync makes durable
// every time; cursor.json only stands in when they hold none, so it may lag.
// Rewriting it on every sync (three fsyncs, five times a second under a
// flood) was most of what an agent following a busy ring cost.
const cursorEvery = 10 * time.Second

// Sync makes what was appended durable, then persists the cursor.
func (j *Journal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sync(true)
}

// SyncRecords makes what was appended durable, and persists the cursor
// only when cursor.json is older than cursorEvery: what a writer calls
// every few hundred milliseconds while records arrive.
func (j *Journal) SyncRecords() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sync(false)
}

func (j *Journal) sync(force bool) error {
	if j.err != nil {
		return j.err
	}
	if j.cur != nil {
		if err := j.syncFile(); err != nil {
			j.err = err
			return err
		}
	}
	if j.cursor != j.persisted && (force || time.Since(j.cursorAt) >= cursorEvery) {
		return j.writeCursor(j.cursor)
	}
	return nil
}

// writeCursor replaces cursor.json whole: a crash leaves the old or the
// new one, never half of one.
func (j *Journal) writeCursor(c Cursor) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tmp := filepath.Join(j.root, "cursor.json.tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("journal: cursor: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(j.root, "cursor.json"))
	}
	if err == nil {
		err = syncDir(j.root)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("journal: cursor: %w", err)
	}
	j.persisted, j.cursorAt = c, time.Now()
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// Cursor is the position of the newest record appended: where a reader of
// /dev/kmsg resumes. At Open it is the newest record the segments hold
// (cursor.json where they hold none).
func (j *Journal) Cursor() Cursor {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cursor
}

// Prune drops the oldest segments while the journal is over its byte cap
// or their newest entry is older than the age cap. The segment being
// written stays.
func (j *Journal) Prune(now time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.prune(now)
}

func (j *Journal) prune(now time.Time) {
	var total int64
	for _, s := range j.segs {
		total += s.size
	}
	cutoff := wallNanos(now.Add(-j.lim.MaxAge))
	drop := 0
	for _, s := range j.segs {
		if j.cur != nil && s == j.segs[len(j.segs)-1] {
			break
		}
		old := len(s.blocks) > 0 && s.maxWall() < cutoff
		if total <= j.lim.MaxBytes && !old {
			break
		}
		// A failed remove keeps the segment: dropping it from the index
		// alone would leave a file nobody accounts for.
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			break
		}
		total -= s.size
		drop++
	}
	j.segs = slices.Delete(j.segs, 0, drop)
}

// Stats describes the journal for /v1/info and the metrics. ReadingErr is
// the source's to fill.
func (j *Journal) Stats() api.JournalStats {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := api.JournalStats{MaxBytes: j.lim.MaxBytes, MaxAge: api.Duration(j.lim.MaxAge)}
	oldest, newest := int64(0), int64(0)
	for _, s := range j.segs {
		st.Records += s.records
		st.Gaps += s.gaps
		st.Lost += s.lost
		st.Bytes += s.size
		if len(s.blocks) == 0 {
			continue
		}
		if lo := s.minWall(); oldest == 0 || lo < oldest {
			oldest = lo
		}
		newest = max(newest, s.maxWall())
	}
	if oldest != 0 {
		st.Oldest, st.Newest = time.Unix(0, oldest).UTC(), time.Unix(0, newest).UTC()
	}
	return st
}

// Corrupt is how many lines Open found unreadable (torn by a crash) and
// skipped.
func (j *Journal) Corrupt() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.corrupt
}

// Close syncs and closes the journal.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	err := j.sync(true)
	j.closed = true
	if j.cur != nil {
		if cerr := j.cur.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("journal: %w", cerr)
		}
		j.cur = nil
	}
	return err
}
