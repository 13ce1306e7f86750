// Package kmsgsource is the node agent's one reader of /dev/kmsg: it
// follows the kernel's ring into the journal, resuming after the journal's
// cursor so that a restart neither loses nor repeats a record the ring
// still holds, and writes down as a gap entry, with its size, every run of
// records it never read.
package kmsgsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/internal/kmsg"
	"github.com/kcrash/kcrash/internal/wake"
)

// Gap reasons (journal.GapInfo.Why).
const (
	WhyOverwritten = "overwritten"
	WhyAgentDown   = "agent down"
)

// Source follows the ring into Journal. Set the exported fields, then Run.
type Source struct {
	Path    string // /dev/kmsg
	Journal *journal.Journal
	// BootID says which boot the ring belongs to (ReadBootID); a field so
	// that tests can fake a reboot.
	BootID func() (string, error)
	// Annotate, if set, fills a record's Subject as it arrives (the agent
	// sets access.Annotate); prev is the record before it, nil for the
	// first one read.
	Annotate func(prev, e *journal.Entry)
	// Observe, if set, sees every entry appended, gaps included (metrics).
	Observe func(*journal.Entry)
	Logger  *slog.Logger
	// SyncEvery (5 s) bounds what a power loss costs of records already
	// read below KERN_ERR: the ring itself is lost with the power, so a
	// tighter bound buys little, and each fsync, with the burst of the
	// runtime's monitor thread it wakes, was a third of what following a
	// chatty ring cost.
	SyncEvery time.Duration
	// UrgentSyncEvery (1 s) is SyncEvery for a pass that read a record at
	// KERN_ERR or worse: a GPU fault, an Xid, the OOM killer, a panic's
	// first lines are the evidence, and are durable this soon (as journald
	// syncs at once after a record of CRIT or worse).
	UrgentSyncEvery time.Duration
	// Batch is how long a pass that read records lets the next ones gather
	// before reading again while the ring floods (kmsg.Pacer: 0 is
	// kmsg.DefaultBatch, 1 s; negative never). Below kmsg.FloodRate every record is read at once,
	// so that the processes it names are looked up while they live (a
	// crash's lines come a few at a time); a query's WaitCaughtUp ends the
	// wait at once; a process a record names in a flood is looked up at
	// most this much later.
	Batch time.Duration

	// Tests replace these: a device that returns one record per read as
	// /dev/kmsg does, the printk clock's zero, the pause before reopening;
	// synced, when set, is called after each sync of records.
	open       func(path string) (device, error)
	bootTime   func() time.Time
	retryPause time.Duration
	synced     func()

	mu        sync.Mutex
	err       string
	malformed int64
	// caughtUp: every record the ring held at this time is journaled;
	// caught is closed (and replaced) each time it moves.
	caughtUp time.Time
	caught   chan struct{}
	// kick ends the follower's wait for a read pass.
	kick context.CancelFunc
}

// WaitCaughtUp waits until every record the kernel printed up to t is in
// the journal, or ctx ends; it says whether that happened.
func (s *Source) WaitCaughtUp(ctx context.Context, t time.Time) bool {
	for {
		s.mu.Lock()
		if !s.caughtUp.Before(t) {
			s.mu.Unlock()
			return true
		}
		if s.caught == nil {
			s.caught = make(chan struct{})
		}
		ch := s.caught
		if s.kick != nil {
			s.kick() // a quiet ring: read it once now
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

func (s *Source) setCaughtUp(t time.Time) {
	s.mu.Lock()
	s.caughtUp = t
	if s.caught != nil {
		close(s.caught)
		s.caught = nil
	}
	s.mu.Unlock()
}

// device is what Source needs of /dev/kmsg (ringFD).
type device interface {
	Read(p []byte) (int, error)
	// Wait sleeps until a record may be read, ctx ends or d passes.
	Wait(ctx context.Context, d time.Duration) error
	Close() error
}

// ringFD is /dev/kmsg as a raw descriptor that Wait polls: outside Go's
// poller, where each record arriving would wake the process even while the
// source lets records gather (Batch). Its waker lives as long as the
// context it watches: a pipe and a goroutine for each wait were dear when
// every record ends one.
type ringFD struct {
	kmsg.FD
	ctx context.Context
	wk  *wake.Waker
}

func (f *ringFD) Wait(ctx context.Context, d time.Duration) error {
	if f.wk == nil || f.ctx != ctx {
		if f.wk != nil {
			f.wk.Close()
		}
		wk, err := wake.New(ctx)
		if err != nil {
			f.wk = nil
			return err
		}
		f.ctx, f.wk = ctx, wk
	}
	return f.FD.Wait(f.wk, d)
}

func (f *ringFD) Close() error {
	if f.wk != nil {
		f.wk.Close()
	}
	return f.FD.Close()
}

// idleWait is how long a quiet source sleeps in poll(2): records and the
// end of Run wake it, so this only bounds a sleep nothing else ends.
const idleWait = 24 * time.Hour

// ReadBootID reads the running kernel's boot id.
func ReadBootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", errors.New("/proc/sys/kernel/random/boot_id is empty")
	}
	return id, nil
}

// Err says why the source cannot follow the ring now ("" while it does),
// for api.JournalStats.ReadingErr.
func (s *Source) Err() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Malformed is how many records the kernel handed out that did not parse.
func (s *Source) Malformed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.malformed
}

func (s *Source) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.err = ""
	} else {
		s.err = err.Error()
	}
}

// position is where the source stands in the ring.
type position struct {
	boot     string
	bootTime time.Time
	have     bool   // last is set: a record of this boot is in the journal
	last     uint64 // its seq
	// resumed: nothing read yet since Run started after a cursor of this
	// boot, so a jump before the first new record is the agent's downtime.
	resumed bool
	prev    *journal.Entry
	// ents are the entries add fills, in turn: one is prev, the other the
	// record being added, so that following the ring allocates no Entry
	// for each record.
	ents     [2]journal.Entry
	next     int
	dirty    bool // appended since the last sync
	urgent   bool // one of them is at KERN_ERR or worse
	lastSync time.Time
}

// Defaults of Source's sync bounds.
const (
	DefaultSyncEvery       = 5 * time.Second
	DefaultUrgentSyncEvery = time.Second
)

// urgentLevel is KERN_ERR: a record this severe or more is synced within
// UrgentSyncEvery.
const urgentLevel = 3

// syncEvery is how long what pos holds unsynced may stay so.
func (s *Source) syncEvery(pos *position) time.Duration {
	if pos.urgent {
		return min(s.UrgentSyncEvery, s.SyncEvery)
	}
	return s.SyncEvery
}

// Run follows the ring until ctx is done, then syncs the journal. It
// returns an error when the ring cannot be opened at all, or is not a ring
// (a read returns EOF); other read errors are reported by Err while it
// reopens after a pause.
func (s *Source) Run(ctx context.Context) error {
	if s.Path == "" {
		s.Path = "/dev/kmsg"
	}
	if s.BootID == nil {
		s.BootID = ReadBootID
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.SyncEvery <= 0 {
		s.SyncEvery = DefaultSyncEvery
	}
	if s.UrgentSyncEvery <= 0 {
		s.UrgentSyncEvery = DefaultUrgentSyncEvery
	}
	if s.open == nil {
		s.open = func(path string) (device, error) {
			fd, err := kmsg.Open(path)
			return &ringFD{FD: fd}, err
		}
	}
	if s.bootTime == nil {
		s.bootTime = kmsg.BootTime
	}
	if s.retryPause <= 0 {
		s.retryPause = time.Second
	}
	boot, err := s.BootID()
	if err != nil {
		return fmt.Errorf("kmsgsource: boot id: %w", err)
	}
	pos := &position{boot: boot, bootTime: s.bootTime(), lastSync: time.Now()}
	// A cursor of another boot belongs to a ring that is gone: this one is
	// read from its start, and nothing of it was lost by the agent.
	if c := s.Journal.Cursor(); c.BootID == boot {
		pos.have, pos.last, pos.resumed = true, c.Seq, true
	}
	defer func() {
		if err := s.Journal.Sync(); err != nil {
			s.Logger.Error("kmsgsource: journal sync", "err", err)
		}
	}()
	buf := make([]byte, kmsg.ReadBuf)
	for opened := false; ; {
		dev, err := s.open(s.Path)
		if err == nil {
			opened = true
			err = s.follow(ctx, dev, buf, pos)
			dev.Close()
		} else if !opened {
			s.setErr(err)
			return fmt.Errorf("kmsgsource: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, io.EOF) {
			// Polling a file that is not the ring would spin.
			err = fmt.Errorf("%s: end of file: not the kernel's message ring", s.Path)
			s.setErr(err)
			return fmt.Errorf("kmsgsource: %w", err)
		}
		// A new descriptor starts at the ring's oldest record; what was
		// read already is skipped by seq, so the reopen loses and repeats
		// nothing. The pause keeps a lasting error from spinning.
		s.setErr(err)
		s.Logger.Warn("kmsgsource: reading failed, reopening", "path", s.Path, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.retryPause):
		}
	}
}

func (s *Source) follow(ctx context.Context, dev device, buf []byte, pos *position) error {
	// The wait below also ends when a query needs the journal to be
	// current (WaitCaughtUp): a quiet ring gives no other reason to read.
	var kctx context.Context
	renew := func() {
		c, kick := context.WithCancel(ctx)
		s.mu.Lock()
		if s.kick != nil {
			s.kick()
		}
		s.kick, kctx = kick, c
		s.mu.Unlock()
	}
	renew()
	defer func() {
		s.mu.Lock()
		s.kick()
		s.kick = nil
		s.mu.Unlock()
	}()
	var appendErr error
	pace := kmsg.Pacer{Batch: s.Batch}
	add := func(r kmsg.Record) {
		pace.Count(r)
		if appendErr == nil {
			appendErr = s.add(pos, r)
		}
	}
	gather := time.NewTimer(time.Hour)
	gather.Stop()
	defer gather.Stop()
	malformed := func() {
		s.mu.Lock()
		s.malformed++
		s.mu.Unlock()
	}
	paced := false // this pass followed a batch's pause
	for {
		began := time.Now()
		pace.Begin()
		err := kmsg.Read(ctx, dev, buf, add, malformed)
		if appendErr != nil {
			return appendErr
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		// What the ring held when this read began is journaled (readers
		// flush the journal's buffer under its lock).
		s.setCaughtUp(began)
		if s.Err() != "" {
			s.setErr(nil) // caught up on a descriptor that works
		}
		// Caught up. Sleep until a record arrives or the run ends; a
		// timeout only while a sync is due.
		wait := idleWait
		if pos.dirty {
			// A pass on the batch grid ends a little after the last one
			// did: the sync due about now is done now, not in a wakeup
			// of its own a moment later.
			every := s.syncEvery(pos)
			due := every
			if paced {
				due -= every / 4
			}
			if since := time.Since(pos.lastSync); since >= due {
				if err := s.sync(pos); err != nil {
					return err
				}
			} else {
				wait = every - since
			}
		}
		batch := pace.End(began)
		paced = batch > 0
		if paced {
			// The ring floods: let the next records gather, then read
			// them in one pass.
			gather.Reset(min(kmsg.UntilTick(time.Now(), batch), wait))
			select {
			case <-gather.C:
			case <-kctx.Done():
				gather.Stop()
			}
		} else if err := dev.Wait(kctx, wait); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if kctx.Err() != nil {
			renew()
		}
	}
}

// add journals one record read from the ring, after a gap entry when
// records before it were never read.
func (s *Source) add(pos *position, r kmsg.Record) error {
	if pos.have && r.Seq <= pos.last {
		return nil // in the journal already: read before a restart or a reopen
	}
	e := &pos.ents[pos.next]
	*e = journal.Entry{
		Boot: pos.boot,
		Wall: pos.bootTime.Add(r.Mono),
		Rec: api.Record{Seq: r.Seq, Mono: r.Mono, Level: r.Level, Facility: r.Facility,
			Text: r.Text, Dict: r.Dict},
	}
	var gap *journal.Entry
	if pos.have && r.Seq > pos.last+1 {
		why := WhyOverwritten
		if pos.resumed {
			why = WhyAgentDown
		}
		gap = &journal.Entry{Boot: pos.boot, Wall: e.Wall,
			Gap: &journal.GapInfo{From: pos.last + 1, To: r.Seq - 1, Why: why}}
	}
	if s.Annotate != nil {
		s.Annotate(pos.prev, e)
	}
	var err error
	if gap != nil {
		err = s.Journal.Append(*gap, *e)
	} else {
		err = s.Journal.Append(*e)
	}
	if err != nil {
		return err
	}
	pos.have, pos.last, pos.resumed, pos.prev, pos.dirty = true, r.Seq, false, e, true
	if r.Level <= urgentLevel {
		pos.urgent = true
	}
	pos.next ^= 1
	if s.Observe != nil {
		if gap != nil {
			s.Observe(gap)
		}
		s.Observe(e)
	}
	if gap != nil {
		s.Logger.Warn("kmsgsource: records lost", "from", gap.Gap.From, "to", gap.Gap.To, "why", gap.Gap.Why)
	}
	// A flood that never lets the reader catch up still syncs on time.
	if time.Since(pos.lastSync) >= s.syncEvery(pos) {
		return s.sync(pos)
	}
	return nil
}

func (s *Source) sync(pos *position) error {
	if err := s.Journal.SyncRecords(); err != nil {
		return err
	}
	pos.dirty, pos.urgent, pos.lastSync = false, false, time.Now()
	if s.synced != nil {
		s.synced()
	}
	return nil
}
