// Package server is the node agent's unix-socket HTTP server: the listener
// (a live agent's socket is never taken over, systemd's is used when
// passed), a table of routes with the access each needs, and one
// middleware that enforces it. Who the caller is comes from the socket
// (access.FromConn), never from the request.
package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/kcrash/kcrash/agent/access"
	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
)

// Journal is what the server needs of the kernel-message journal.
type Journal interface {
	// ScanNewest calls fn with the entries of [since, until] newest
	// first, gap entries included, until fn returns false; e and rec
	// are good only until fn returns. rec is the record's JSON (as
	// api.Record.AppendJSON writes it), or "" to encode e.Rec instead.
	// With subjects false, e.Subject may be left empty. skip, when not
	// nil, may be asked first about a line naming someone (its boot id
	// and its subject's JSON): true drops it unseen by fn. sp, when not
	// nil, says where rec holds e.Rec's fields (api.RecordSpans).
	ScanNewest(ctx context.Context, since, until time.Time, subjects bool, skip func(boot, subject string) bool, fn func(e *journal.Entry, rec string, sp *api.RecordSpans) bool) error
	Stats() api.JournalStats
}

// GPU is what the server needs of the GPU sampler.
type GPU interface {
	// Window returns the samples of [since, until] reduced to the GPUs and
	// processes allow accepts.
	Window(since, until time.Time, allow func(pid, uid int) bool) api.GPUResponse
	Stats() api.GPUStats
}

// Limits of one answer and of the server.
const (
	DefaultMaxRecords = 20_000
	DefaultMaxBytes   = 8 << 20
	DefaultMaxConns   = 64
	maxCrashBody      = 4 << 10
	maxHeaderBytes    = 8 << 10
	// freshWait bounds how long a query waits for the journal to catch up
	// with the ring (a burst, the agent's first reading of a full ring).
	freshWait = 3 * time.Second
)

// Server answers the agent's API.
type Server struct {
	Journal  Journal
	GPU      GPU                   // nil: no sampler; GPU answers say so
	Crashes  func(api.CrashNotice) // nil: crash notices are accepted and dropped
	Tracker  *access.Tracker       // the process tracker for the descendant rule; may be nil
	ProcRoot string                // "" is /proc
	SysRoot  string                // "" is /sys: the peers' cgroup v1 device rules
	BootID   string                // the current boot: records of other boots are not answered
	BootTime time.Time             // wall time of this boot's printk zero
	Version  string                // the agent's version, in Info
	Log      *slog.Logger          // nil: no log
	// Fresh, when set, waits until the journal holds every record the
	// kernel printed up to t (kmsgsource.Source.WaitCaughtUp), or ctx ends;
	// false when it did not get there.
	Fresh func(ctx context.Context, t time.Time) bool

	crashMu  sync.Mutex
	crashLog []api.CrashRecord // the last notices, oldest first

	// judgeEachLine turns off judging lines by their subject before their
	// records are read (and caching that per subject): tests compare the
	// two.
	judgeEachLine bool

	MaxRecords int // 0: DefaultMaxRecords
	MaxBytes   int // 0: DefaultMaxBytes
	MaxConns   int // 0: DefaultMaxConns
}

// Need is the access a route requires.
type Need int

const (
	// Anyone may call the route; it shows nothing of anyone else.
	Anyone Need = iota
	// Filtered routes answer every caller, with what access.Visible lets it see.
	Filtered
	// Root routes answer root only.
	Root
)

func (n Need) String() string {
	switch n {
	case Anyone:
		return "anyone"
	case Filtered:
		return "filtered"
	case Root:
		return "root"
	}
	return fmt.Sprintf("need(%d)", int(n))
}

type route struct {
	method, path string
	need         Need
	handle       func(s *Server, w http.ResponseWriter, r *http.Request, p access.Peer)
}

// routes is every route the agent answers, with what it needs.
var routes = []route{
	{http.MethodGet, api.PathInfo, Anyone, (*Server).info},
	{http.MethodGet, api.PathKmsg, Filtered, (*Server).kmsg},
	{http.MethodGet, api.PathGPU, Filtered, (*Server).gpu},
	{http.MethodPost, api.PathCrash, Anyone, (*Server).crash},
	{http.MethodGet, api.PathCrashes, Root, (*Server).crashes},
}

type peerKey struct{}

// peerConn carries the peer read at accept.
type peerConn struct {
	net.Conn
	peer access.Peer
}

// Serve answers on ln until ctx ends, then shuts down, letting answers in
// progress finish for a few seconds. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if pc, ok := c.(*peerConn); ok {
				return context.WithValue(ctx, peerKey{}, pc.peer)
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(s.logger().Handler(), slog.LevelDebug),
	}
	pl := &peerListener{Listener: ln, procRoot: s.ProcRoot, sysRoot: s.SysRoot, log: s.logger()}
	pl.slots = make(chan struct{}, s.maxConns())
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			hs.Shutdown(sctx)
		case <-done:
		}
	}()
	err := hs.Serve(pl)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Handler is the routes behind the middleware; every request must carry
// the peer in its context (Serve puts it there).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routes {
		mux.Handle(rt.path, s.guard(rt))
	}
	return mux
}

// guard is the one middleware: the peer from the connection, rechecked
// against pid reuse, the method, and the route's need.
func (s *Server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := r.Context().Value(peerKey{}).(access.Peer)
		if !ok {
			writeError(w, http.StatusForbidden, "the connection's peer is unknown")
			return
		}
		if r.Method != rt.method {
			w.Header().Set("Allow", rt.method)
			writeError(w, http.StatusMethodNotAllowed, rt.path+" takes "+rt.method)
			return
		}
		p = p.Recheck(s.ProcRoot)
		if rt.need == Root && !p.Root() {
			writeError(w, http.StatusForbidden, rt.path+" is for root")
			return
		}
		rt.handle(s, w, r, p)
	})
}

func (s *Server) info(w http.ResponseWriter, r *http.Request, p access.Peer) {
	in := api.Info{
		AgentVersion: s.Version,
		BootID:       s.BootID,
		Caller: api.Caller{UID: p.UID, GID: p.GID, PID: p.PID, Cgroup: p.Cgroup, Job: p.Job, Root: p.Root(),
			Sees: sees(p)},
	}
	if s.Journal != nil {
		in.Journal = s.Journal.Stats()
	}
	if s.GPU != nil {
		in.GPU = s.GPU.Stats()
	}
	writeJSON(w, in)
}

// sees says in one sentence what a caller is given.
func sees(p access.Peer) string {
	if p.Root() {
		return "every kernel record and every GPU sample (root)"
	}
	s := fmt.Sprintf("kernel records naming processes of uid %d", p.UID)
	if p.Job != "" {
		s += ", of Slurm job " + p.Job
	}
	if p.PID != 0 {
		s += fmt.Sprintf(", or descending from pid %d", p.PID)
	}
	gpus := "; records of GPUs those processes held"
	if p.Devices.Cgroup != "" {
		gpus += " or that cgroup " + p.Devices.Cgroup + "'s device rules give"
	}
	return s + gpus + "; kernel records naming no process; never another user's"
}

// window reads since= and until= (RFC 3339); until defaults to now.
func window(r *http.Request) (since, until time.Time, err error) {
	q := r.URL.Query()
	if v := q.Get("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return since, until, fmt.Errorf("since: %v", err)
		}
	}
	until = time.Now()
	if v := q.Get("until"); v != "" {
		if until, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return since, until, fmt.Errorf("until: %v", err)
		}
	}
	if until.Before(since) {
		return since, until, fmt.Errorf("until %s is before since %s", until.Format(time.RFC3339Nano), since.Format(time.RFC3339Nano))
	}
	return since, until, nil
}

// recordSize is what a record costs an answer, near enough: its text and
// dictionary and the JSON around them.
func recordSize(rec api.Record) int { return len(rec.Text) + len(rec.Dict) + 96 }

func (s *Server) kmsg(w http.ResponseWriter, r *http.Request, p access.Peer) {
	since, until, err := window(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if s.Journal == nil {
		writeError(w, http.StatusServiceUnavailable, "the agent has no journal")
		return
	}
	mark := r.URL.Query().Get("mark")
	compact := r.URL.Query().Get(api.FormParam) == api.FormCompact
	maxRecords, maxBytes := s.MaxRecords, s.MaxBytes
	if maxRecords <= 0 {
		maxRecords = DefaultMaxRecords
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	resp := api.KmsgResponse{BootID: s.BootID, BootTime: s.BootTime, Records: []api.Record{}}
	if s.Fresh != nil {
		// A run asks right after its child died: what the kernel printed
		// just before must be in the journal before the answer is cut.
		end := until
		if end.IsZero() || end.After(time.Now()) {
			end = time.Now()
		}
		ctx, cancel := context.WithTimeout(r.Context(), freshWait)
		if !s.Fresh(ctx, end) {
			resp.Notes = append(resp.Notes, fmt.Sprintf("the agent had not read the kernel's ring up to the window's end within %s: its last records may be missing", freshWait))
		}
		cancel()
	}
	// Newest first, so that a window holding more than one answer carries
	// (an hour of a flood) is read only as far back as the answer reaches.
	// The records answered are copied, newest first, into rb as their
	// JSON (the journal line's own text of the record, where it has it):
	// the journal reads its blocks into buffers it uses again.
	var (
		rb              recordBuf
		gaps            []api.Gap
		bytes, others   int
		truncated       bool
		truncatedBefore time.Time
	)
	defer rb.release()
	log := s.logger()
	debug := log.Enabled(r.Context(), slog.LevelDebug)
	lineage := access.Memo(s.Tracker)
	// Root is shown every record (access.Visible's rule 2), whoever it
	// names: its query does not read the lines' subjects.
	err = s.Journal.ScanNewest(r.Context(), since, until, !p.Root(), s.subjectJudge(p, lineage, &resp.Withheld), func(e *journal.Entry, rec string, spans *api.RecordSpans) bool {
		if s.BootID != "" && e.Boot != s.BootID {
			others++
			return true
		}
		if e.Gap != nil {
			gaps = append(gaps, api.Gap{From: e.Gap.From, To: e.Gap.To})
			return true
		}
		ok, why := access.Visible(p, e, mark, lineage)
		if !ok {
			resp.Withheld++
			if debug {
				log.Debug("withheld", "uid", p.UID, "pid", p.PID, "seq", e.Rec.Seq, "why", why)
			}
			return true
		}
		size := recordSize(e.Rec)
		if rb.len() >= maxRecords || (rb.len() > 0 && bytes+size > maxBytes) {
			truncated, truncatedBefore = true, e.Wall
			return false
		}
		if resp.BootTime.IsZero() && !e.Wall.IsZero() {
			resp.BootTime = e.Wall.Add(-e.Rec.Mono)
		}
		rb.add(rec, spans, &e.Rec, compact)
		bytes += size
		return true
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "reading the journal: "+err.Error())
		return
	}
	slices.Reverse(gaps)
	resp.Gaps = gaps
	log.Debug("kmsg answered", "uid", p.UID, "pid", p.PID, "since", since, "until", until, "records", rb.len(), "withheld", resp.Withheld)
	resp.JournalStart = s.Journal.Stats().Oldest
	if truncated {
		// What is older than the answer's oldest record was not read: the
		// counts (withheld, gaps, other boots) are of the part answered.
		resp.Notes = append(resp.Notes, fmt.Sprintf("the window holds more records than one answer carries (%d records, %d bytes): the answer holds the newest, and records at or before %s were left out (the counts are of the part answered); ask for a shorter window",
			maxRecords, maxBytes, truncatedBefore.UTC().Format(time.RFC3339Nano)))
	}
	if others > 0 {
		resp.Notes = append(resp.Notes, fmt.Sprintf("%d records of other boots in the window were left out", others))
	}
	if !truncated && !resp.JournalStart.IsZero() && since.Before(resp.JournalStart) {
		resp.Notes = append(resp.Notes, "the window starts before the journal's oldest record: older records are gone")
	}
	// By hand, streamed: the records' JSON as the journal holds it,
	// oldest first, between the answer's head and tail.
	w.Header().Set("Content-Type", "application/json")
	var head, tail []byte
	var ok bool
	if compact {
		head, tail, ok = resp.JSONAroundCompact(rb.len())
	} else {
		head, tail, ok = resp.JSONAround()
	}
	if !ok {
		// encoding/json writes this one, in the full form (which every
		// client reads): the records are made full again.
		recs := rb.strings()
		if compact {
			for i, c := range recs {
				r, _ := api.ParseCompact(c) // as rb.add wrote it
				recs[i] = string(r.AppendJSON(nil))
			}
		}
		body := resp.AppendJSONRaw(nil, recs)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+rb.size()+len(tail)))
	bw, _ := answerWriters.Get().(*bufio.Writer)
	if bw == nil {
		bw = bufio.NewWriterSize(w, 256<<10)
	}
	bw.Reset(w)
	bw.Write(head)
	rb.writeOldestFirst(bw)
	bw.Write(tail)
	bw.Flush()
	bw.Reset(nil) // the connection is not kept by the pool
	answerWriters.Put(bw)
}

// answerWriters are the answers' writers: a buffer of 256 KiB made for
// each query was a tenth of a flood hour's garbage.
var answerWriters sync.Pool

// maxJudgedSubjects bounds the subjects one query remembers its judgement
// of: a node's hour names a few hundred processes; a query that meets more
// judges the rest line by line.
const maxJudgedSubjects = 16 << 10

// subjectJudge is a user's query's first look at a line naming someone:
// when access.SubjectDenies withholds every record of its subject, the
// line is counted in *withheld and its record never read. The judgement
// is kept per subject (its JSON text) for the query: the peer and the
// query's lineage memo do not change within it, and a flood's lines name
// the same processes again and again. Nil for root, who is withheld
// nothing by subject.
func (s *Server) subjectJudge(p access.Peer, lineage access.Lineage, withheld *int) func(boot, subject string) bool {
	if p.Root() || s.judgeEachLine {
		return nil
	}
	log := s.logger()
	debug := log.Enabled(context.Background(), slog.LevelDebug)
	denies := map[string]bool{}
	// One subject read into again and the keys copied into shared chunks:
	// a flood hour's query judges thousands of subjects, each of which
	// was three allocations.
	var (
		sub  journal.Subject
		keys []byte
	)
	return func(boot, subject string) bool {
		if s.BootID != "" && boot != s.BootID {
			return false // counted with the other boots'
		}
		deny, ok := denies[subject]
		if !ok {
			if !journal.ParseSubject(subject, &sub) {
				return false
			}
			deny = access.SubjectDenies(p, &sub, lineage)
			if len(denies) < maxJudgedSubjects {
				if cap(keys)-len(keys) < len(subject) {
					keys = make([]byte, 0, max(32<<10, len(subject)))
				}
				at := len(keys)
				keys = append(keys, subject...)
				// The chunk's bytes up to len(keys) are never written again.
				denies[unsafe.String(unsafe.SliceData(keys[at:]), len(subject))] = deny
			}
		}
		if deny {
			*withheld++
			// Only when logged: its arguments cost a flood hour's query
			// thousands of allocations.
			if debug {
				log.Debug("withheld", "uid", p.UID, "pid", p.PID, "subject", subject, "why", "whom it names")
			}
		}
		return deny
	}
}

func (s *Server) gpu(w http.ResponseWriter, r *http.Request, p access.Peer) {
	since, until, err := window(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if s.GPU == nil {
		writeJSON(w, api.GPUResponse{Tools: []string{}, Samples: []api.GPUSample{}, Processes: []api.GPUProcess{},
			Errors: []string{"this agent samples no GPUs"}})
		return
	}
	writeJSON(w, s.GPU.Window(since, until, s.allowProcess(p)))
}

// allowProcess is the process rule of access.Visible for GPU samples: the
// caller's uid, Slurm job, cgroup subtree or descendants.
func (s *Server) allowProcess(p access.Peer) func(pid, uid int) bool {
	if p.Root() {
		return func(int, int) bool { return true }
	}
	lineage := access.Memo(s.Tracker)
	return func(pid, uid int) bool {
		if uid == p.UID {
			return true
		}
		e := journal.Entry{Subject: journal.Subject{Procs: []journal.Proc{{Pid: pid, UID: uid}}}}
		if s.Tracker != nil {
			if info, ok := s.Tracker.Lookup(pid); ok && info.UID == uid {
				e.Subject.Procs[0].Cgroup = info.Cgroup
			}
		}
		ok, _ := access.Visible(p, &e, "", lineage)
		return ok
	}
}

func (s *Server) crash(w http.ResponseWriter, r *http.Request, p access.Peer) {
	var n api.CrashNotice
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCrashBody))
	if err := dec.Decode(&n); err != nil {
		writeError(w, http.StatusBadRequest, "a crash notice: "+err.Error())
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "a crash notice: one JSON object only")
		return
	}
	if s.Crashes != nil {
		s.Crashes(n)
	}
	s.remember(api.CrashRecord{Time: time.Now().UTC(), UID: p.UID, Job: p.Job, Verdict: n.Verdict, Bundle: n.Bundle})
	s.logger().Debug("crash notice", "uid", p.UID, "pid", p.PID, "job", p.Job, "verdict", n.Verdict, "bundle", n.Bundle)
	writeJSON(w, struct{}{})
}

// maxCrashRecords bounds the crash notices kept for epilogs: a node writes
// a few bundles a day; a client sending thousands only pushes its own out.
const maxCrashRecords = 1024

func (s *Server) remember(c api.CrashRecord) {
	s.crashMu.Lock()
	defer s.crashMu.Unlock()
	s.crashLog = append(s.crashLog, c)
	if n := len(s.crashLog) - maxCrashRecords; n > 0 {
		s.crashLog = append(s.crashLog[:0:0], s.crashLog[n:]...)
	}
}

// crashes answers an epilog: the notices of one Slurm job.
func (s *Server) crashes(w http.ResponseWriter, r *http.Request, _ access.Peer) {
	job := r.URL.Query().Get("job")
	if job == "" {
		writeError(w, http.StatusBadRequest, "job: a Slurm job id is needed")
		return
	}
	out := []api.CrashRecord{}
	s.crashMu.Lock()
	for _, c := range s.crashLog {
		if c.Job == job {
			out = append(out, c)
		}
	}
	s.crashMu.Unlock()
	writeJSON(w, out)
}

func (s *Server) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (s *Server) maxConns() int {
	if s.MaxConns > 0 {
		return s.MaxConns
	}
	return DefaultMaxConns
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		// The header is out: the client sees a truncated body and fails to decode it.
		return
	}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(api.Error{Error: msg})
}

// peerListener reads each connection's peer at accept, refuses one whose
// peer cannot be read, and holds at most cap(slots) connections at once:
// a further client waits in the kernel's backlog.
type peerListener struct {
	net.Listener
	procRoot string
	sysRoot  string
	log      *slog.Logger
	slots    chan struct{}
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		l.slots <- struct{}{}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		p, err := access.FromConn(c, l.procRoot, l.sysRoot)
		if err != nil {
			l.log.Warn("refused a connection", "err", err)
			c.Close()
			<-l.slots
			continue
		}
		return &peerConn{Conn: &slotConn{Conn: c, release: func() { <-l.slots }}, peer: p}, nil
	}
}

// slotConn gives its slot back once, when closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
