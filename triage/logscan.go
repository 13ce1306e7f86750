package triage

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Limits that keep a scan's memory bounded whatever the input: a server's
// output can be gigabytes, a tqdm bar can run for hours without a newline, and
// a crash loop can print the same error a million times.
const (
	lsMaxSegment  = 64 << 10 // longest line fragment looked at; the rest is skipped
	lsKeepHead    = 150      // earliest findings kept
	lsKeepTail    = 150      // latest findings kept
	lsMaxStreams  = 256      // demultiplexed streams tracked at once
	lsMaxText     = 400      // evidence text kept per finding
	lsMergeWindow = 3        // lines within which same-kind findings of a stream merge
	lsMaxOpen     = 64       // findings held back for merging at once
	lsMaxKeptLine = 1 << 10  // bytes of a line kept in parser state (context, frames)
)

// Scanner finds crash evidence in program output. The built-in signatures
// come from configs/signatures.yaml; extra (user) signatures are tried first
// and replace a built-in of the same name. A Scanner is safe for concurrent use.
type Scanner struct {
	sigs []*Signature
}

// NewScanner returns a scanner using the built-in signatures plus extra, which
// should come from LoadSignatures; a signature built by hand is compiled here.
func NewScanner(extra []Signature) (*Scanner, error) {
	sc := &Scanner{}
	override := map[string]bool{}
	for i := range extra {
		s := extra[i]
		if s.re == nil {
			if err := s.compile(); err != nil {
				return nil, err
			}
		}
		override[s.Name] = true
		sc.sigs = append(sc.sigs, &s)
	}
	for _, s := range BuiltinSignatures() {
		if !override[s.Name] {
			s := s
			sc.sigs = append(sc.sigs, &s)
		}
	}
	return sc, nil
}

var (
	lsDefaultMu      sync.RWMutex
	lsDefaultScanner *Scanner
)

// SetExtraSignatures makes ScanLog use extra signatures (from a user's config)
// besides the built-in ones.
func SetExtraSignatures(extra []Signature) error {
	sc, err := NewScanner(extra)
	if err != nil {
		return err
	}
	lsDefaultMu.Lock()
	lsDefaultScanner = sc
	lsDefaultMu.Unlock()
	return nil
}

func lsCurrentScanner() *Scanner {
	lsDefaultMu.RLock()
	sc := lsDefaultScanner
	lsDefaultMu.RUnlock()
	if sc != nil {
		return sc
	}
	sc, err := NewScanner(nil)
	if err != nil {
		panic(err) // built-ins are compiled by then; see BuiltinSignatures
	}
	lsDefaultMu.Lock()
	if lsDefaultScanner == nil {
		lsDefaultScanner = sc
	}
	sc = lsDefaultScanner
	lsDefaultMu.Unlock()
	return sc
}

// ScanLog scans program output with the built-in signatures and those set by
// SetExtraSignatures. See Scanner.Scan.
func ScanLog(r io.Reader, file string) ([]evidence.Finding, error) {
	return lsCurrentScanner().Scan(r, file)
}

// Scan reads r to the end and returns its findings in line order, each with
// Source "log", File file and a 1-based Line. Memory stays bounded: beyond
// lsKeepHead+lsKeepTail findings the middle ones are dropped, and the first
// finding kept after the gap carries details.dropped_before. The error is the
// reader's; findings found before it are returned too.
func (sc *Scanner) Scan(r io.Reader, file string) ([]evidence.Finding, error) {
	return sc.scan(r, file, nil)
}

func (sc *Scanner) scan(r io.Reader, file string, generic *genericState) ([]evidence.Finding, error) {
	st := &scanState{sc: sc, file: file, streams: map[string]*streamState{}, bg: lsBigramPool.Get().(*lsBigrams), generic: generic}
	defer lsBigramPool.Put(st.bg)
	bs := bufio.NewScanner(r)
	bs.Buffer(make([]byte, 0, 64<<10), lsMaxSegment+1)
	bs.Split(lsSplitSegments)
	line := 1
	skipping := false // inside the unread rest of an over-long fragment
	var err error
	for bs.Scan() {
		tok := bs.Bytes()
		n := len(tok)
		var delim byte
		if n > 0 && (tok[n-1] == '\n' || tok[n-1] == '\r') {
			delim = tok[n-1]
			tok = tok[:n-1]
		}
		if !skipping {
			st.segment(tok, line, delim == '\n' || delim == 0)
		}
		skipping = delim == 0 && n >= lsMaxSegment
		if delim == '\n' {
			line++
		}
	}
	err = bs.Err()
	st.finish()
	out := st.out.result()
	if generic != nil {
		out = append(out, generic.findings()...)
		lsSortByLine(out)
	}
	st.names.stamp(out)
	return out, err
}

// lsSplitSegments splits on '\n' and '\r' alike, keeping the delimiter, so that
// every redraw of a progress bar is looked at on its own while line numbers
// still count only newlines. An over-long fragment comes back in pieces of
// lsMaxSegment bytes without a delimiter.
func lsSplitSegments(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if len(data) >= lsMaxSegment {
		return len(data), data[:lsMaxSegment], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// ---- per-line processing ------------------------------------------------------

type scanState struct {
	sc      *Scanner
	file    string
	out     findingBuf
	streams map[string]*streamState
	open    []*openFinding // findings that a nearby line may still add to
	lastSig string         // the signature the last matched line matched
	clock   int            // order of stream use, to evict the stalest
	bg      *lsBigrams
	// criPartial holds, per CRI stream (stdout, stderr), the text of partial
	// (P) records waiting for the final (F) record that ends the line.
	criPartial map[string]string
	names      logNames // the framework and vendor the lines name
	stall      stallState
	generic    *genericState // the generic fallback's cues, when asked for (verdict_fallback.go)
}

// lsBigramPool recycles the 256 KiB pair tables: small scans (an exception
// line from the kernel-API log, a fuzz input) are frequent.
var lsBigramPool = sync.Pool{New: func() any { return new(lsBigrams) }}

// streamState is what the multi-line parsers remember about one demultiplexed
// stream (one `(Name pid=N)` process, one `[rankN]` rank...).
type streamState struct {
	key      string
	lastUsed int
	prev     string // previous non-blank content, context for a traceback header
	prevNo   int
	// The previous line as the hard-wrap join needs it: its raw text, whether
	// it looked cut by a terminal's width, and whether it matched on its own.
	prevRaw     string
	prevWrapped bool
	prevMatched bool
	tb          tracebackState
	fh          *faultHandlerState
	nf          nativeFramesState
	gd          goDumpState
	ls          liveStacksState
	pf          pyFramesState // logscan_families17.go
}

// openFinding is a finding not yet committed: a following line of the same
// stream may merge into it (an error code on the next line, more threads of
// the same assert).
type openFinding struct {
	f        evidence.Finding
	stream   string
	mergeKey string
	sig      string
	until    int // the last line that may still merge
}

// lineInfo is one cleaned line fragment with what its prefixes told.
type lineInfo struct {
	no      int
	raw     string // ANSI-free fragment, prefixes included: the evidence text
	content string // after the known prefixes
	stream  string
	labels  prefixLabels
	newline bool // a complete line, not a \r redraw
	// wrapPrev: the previous line of the stream when this one may be the rest
	// of it, hard-wrapped by a terminal (lsWrapContinues); "" otherwise.
	wrapPrev string
}

func (st *scanState) segment(b []byte, no int, newline bool) {
	if len(b) == 0 && !newline {
		return
	}
	raw, ok := st.joinCRIPartial(lsCleanControl(b))
	if !ok {
		return // a partial record: its rest comes in a later one
	}
	st.segmentLine(raw, no, newline)
}

func (st *scanState) segmentLine(raw string, no int, newline bool) {
	content, labels := lsStripPrefixes(lsStripMarkdown(raw))
	content = lsUnglue(content)
	li := &lineInfo{no: no, raw: raw, content: content, stream: labels.stream(), labels: labels, newline: newline}
	st.commitDue(no)
	ss := st.stream(li.stream)
	blank := strings.TrimSpace(content) == ""
	matched := false
	var joined *lineInfo
	if !blank && newline && ss.prevWrapped && ss.prevNo == no-1 && lsWrapContinues(content) {
		li.wrapPrev = ss.prev
	}
	if !blank {
		matched = st.matchSignatures(li)
		st.names.note(li.content, st.bg) // the pair table is li.content's
		st.noteStall(li)
		st.noteNativeFrame(ss, li)
		st.noteGoDump(ss, li)
		st.noteLiveStacks(ss, li)
		st.notePyFrames(ss, li)
		if !matched {
			st.noteGGMLAbort(li)
		}
		if st.generic != nil {
			st.generic.note(st, li)
		}
		if !matched && newline && ss.prevWrapped && !ss.prevMatched && ss.prevNo == no-1 && lsWrapContinues(content) {
			// A terminal (or a paste of one) hard-wrapped a long line mid-word:
			// try the two halves as the one line they were.
			joined = &lineInfo{no: ss.prevNo, raw: ss.prevRaw + content, content: ss.prev + content,
				stream: li.stream, labels: li.labels, newline: true}
			matched = st.matchSignatures(joined)
			st.noteStallJoined(joined, li)
		}
	}
	inTraceback := ss.tb.active || ss.fh != nil
	if joined != nil && ss.fh == nil && !strings.Contains(content, fatalPyLit) && strings.Contains(joined.content, fatalPyLit) {
		st.structured(ss, joined) // a faulthandler header cut in two
	} else {
		st.structured(ss, li)
	}
	if !blank && !matched && !inTraceback && !ss.tb.active && ss.fh == nil {
		st.exceptionLine(ss, li)
	}
	if !blank {
		ss.prev, ss.prevNo = lsClip(content, lsMaxKeptLine), no
		ss.prevRaw = lsClip(raw, lsMaxKeptLine)
		ss.prevWrapped = newline && len(raw) <= lsMaxKeptLine && utf8.RuneCountInString(raw) >= lsWrapMinWidth
		// A line that only the generic RuntimeError signature matched may
		// still be the first half of a wrapped line whose rest names the
		// error (a CUDA error's text cut at the terminal's width).
		ss.prevMatched = matched && st.lastSig != genericExceptionSig
	}
}

// lsWrapMinWidth is the narrowest terminal whose hard wraps are joined back:
// a line at least this wide, cut without a trailing space, may continue on the
// next line.
const lsWrapMinWidth = 80

// lsWrapContinues: the line may be the rest of a hard-wrapped one: it starts
// in a word (the wrap cut it) or with the one space the wrap fell before, not
// with an indent of its own.
func lsWrapContinues(content string) bool {
	if lsWordByte(content[0]) {
		return true
	}
	return content[0] == ' ' && len(content) > 1 && content[1] != ' ' && content[1] != '\t'
}

// lsWordByte: a wrap that cut a word has a letter or digit on both sides.
func lsWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (st *scanState) stream(key string) *streamState {
	st.clock++
	ss := st.streams[key]
	if ss == nil {
		if len(st.streams) >= lsMaxStreams {
			st.evictStalest()
		}
		ss = &streamState{key: key}
		st.streams[key] = ss
	}
	ss.lastUsed = st.clock
	return ss
}

func (st *scanState) evictStalest() {
	var stalest *streamState
	for _, s := range st.streams {
		if stalest == nil || s.lastUsed < stalest.lastUsed {
			stalest = s
		}
	}
	if stalest != nil {
		st.finishStream(stalest)
		delete(st.streams, stalest.key)
	}
}

// genericExceptionSig is the built-in signature of a bare RuntimeError line,
// which says less than any other.
const genericExceptionSig = "runtime-error-line"

func (st *scanState) matchSignatures(li *lineInfo) bool {
	st.lastSig = ""
	st.bg.reset(li.content)
	for _, s := range st.sc.sigs {
		if !s.mayMatch(li.content, st.bg) {
			continue
		}
		m := s.re.FindStringSubmatchIndex(li.content)
		if m == nil {
			continue
		}
		f := st.newFinding(li, s.Kind, m[0])
		f.Details.SetText(detail.Signature, s.Name)
		if s.Symptom {
			f.Details.SetBool(detail.Symptom, true)
		}
		for k, v := range s.Details {
			lsSetDetail(&f, k, v)
		}
		lsAddGroups(&f, s.re, li.content, m)
		for _, x := range s.extract {
			if xm := x.FindStringSubmatchIndex(li.content); xm != nil {
				lsAddGroups(&f, x, li.content, xm)
			}
		}
		if s.Name == recoverySig {
			st.closeOpen(li, "kind:"+string(evidence.GPUOOM))
		}
		st.add(&openFinding{f: f, stream: li.stream, mergeKey: "kind:" + string(s.Kind), sig: s.Name, until: li.no + lsMergeWindow})
		st.lastSig = s.Name
		return true // the first signature that matches a line wins
	}
	return false
}

func (st *scanState) newFinding(li *lineInfo, kind evidence.Kind, at int) evidence.Finding {
	f := evidence.Finding{
		Kind:    kind,
		Source:  evidence.SourceLog,
		File:    st.file,
		Line:    li.no,
		Text:    lsEvidenceText(li.raw, li.content, at),
		Details: map[string]any{},
	}
	li.labels.apply(&f)
	return f
}

// add merges f into an open finding of the same stream and merge key, or opens it.
func (st *scanState) add(of *openFinding) {
	for _, o := range st.open {
		if o.stream != of.stream || o.mergeKey != of.mergeKey || of.f.Line > o.until {
			continue
		}
		// The same signature on a different line is a separate event (two ranks
		// sharing a stream); a different signature of the same kind is the same
		// error told twice (message, then error code).
		if o.sig == of.sig && o.sig != "" && o.f.Text != of.f.Text {
			continue
		}
		lsMergeDetails(&o.f, &of.f)
		o.until = of.f.Line + lsMergeWindow
		return
	}
	st.keepOpen(of)
}

func lsMergeDetails(into, from *evidence.Finding) {
	if from.Text == into.Text || from.Details.Text(detail.Signature) == into.Details.Text(detail.Signature) {
		n, _ := into.Details["repeats"].(int64)
		into.Details["repeats"] = n + 1
	}
	// The event is a cause when any of its lines tells it as one: a symptom's
	// line merged in (the watchdog's "Some NCCL operations have failed" after
	// its own timeout line) does not demote it.
	if !from.Details.Bool(detail.Symptom) {
		delete(into.Details, string(detail.Symptom))
	}
	for k, v := range from.Details {
		if _, ok := into.Details[k]; !ok && k != string(detail.Symptom) {
			into.Details[k] = v
		}
	}
	if into.Pid == 0 {
		into.Pid = from.Pid
	}
	if into.GPU == "" {
		into.GPU = from.GPU
	}
	if into.Address == "" {
		into.Address = from.Address
	}
	if into.Time == nil {
		into.Time = from.Time
	}
}

// closeOpen ends the merging of li's stream's open findings of mergeKey: a
// failure after the program's retry line is the retry failing, a new
// finding, not a repeat of the one it retried after.
func (st *scanState) closeOpen(li *lineInfo, mergeKey string) {
	for _, o := range st.open {
		if o.stream == li.stream && o.mergeKey == mergeKey && o.until >= li.no {
			o.until = li.no - 1
		}
	}
}

// keepOpen holds a finding back for the lines that may add to it. A line of
// progress-bar redraws can match thousands of times without a newline, so
// the oldest are committed once lsMaxOpen wait.
func (st *scanState) keepOpen(of *openFinding) {
	if len(st.open) >= lsMaxOpen {
		st.out.push(st.open[0].f)
		st.open = st.open[1:]
	}
	st.open = append(st.open, of)
}

// findOpen returns the open finding of stream at line, if any (the signature
// finding of a traceback's exception line).
func (st *scanState) findOpen(stream string, line int) *openFinding {
	for _, o := range st.open {
		if o.stream == stream && o.f.Line == line {
			return o
		}
	}
	return nil
}

func (st *scanState) commitDue(line int) {
	kept := st.open[:0]
	for _, o := range st.open {
		if o.until < line {
			st.out.push(o.f)
		} else {
			kept = append(kept, o)
		}
	}
	st.open = kept
}

func (st *scanState) finish() {
	keys := make([]string, 0, len(st.streams))
	for k := range st.streams {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		st.finishStream(st.streams[k])
	}
	st.finishStall()
	st.commitDue(math.MaxInt)
}

func (st *scanState) finishStream(ss *streamState) {
	st.finishTraceback(ss, true)
	st.finishFaultHandler(ss)
	st.finishNativeFrames(ss)
	st.finishGoDump(ss)
	st.finishLiveStacks(ss)
	st.finishPyFrames(ss)
}

// ---- bounded result -------------------------------------------------------------

type findingBuf struct {
	head    []evidence.Finding
	tail    []evidence.Finding // ring once full
	next    int
	dropped int
}

func (b *findingBuf) push(f evidence.Finding) {
	if len(b.head) < lsKeepHead {
		b.head = append(b.head, f)
		return
	}
	if len(b.tail) < lsKeepTail {
		b.tail = append(b.tail, f)
		return
	}
	b.tail[b.next] = f
	b.next = (b.next + 1) % lsKeepTail
	b.dropped++
}

func (b *findingBuf) result() []evidence.Finding {
	tail := append(append([]evidence.Finding(nil), b.tail[b.next:]...), b.tail[:b.next]...)
	if b.dropped > 0 && len(tail) > 0 {
		tail[0].Details["dropped_before"] = int64(b.dropped)
	}
	out := append(append([]evidence.Finding(nil), b.head...), tail...)
	lsSortByLine(out)
	return out
}

func lsSortByLine(fs []evidence.Finding) {
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Line < fs[j].Line })
}

// ---- cleaning and prefixes ---------------------------------------------------------

var lsSizeRe = regexp.MustCompile(`^([\d.]+) ?([KMGTP]?i?B)$`)

func lsAddGroups(f *evidence.Finding, re *regexp.Regexp, s string, m []int) {
	for i, name := range re.SubexpNames() {
		if name == "" || m[2*i] < 0 {
			continue
		}
		if _, done := f.Details[name]; done {
			continue // a repeated name: the first alternative that matched wins
		}
		lsSetDetail(f, name, s[m[2*i]:m[2*i+1]])
	}
}

// lsSetDetail stores one named value, typed so that JSON consumers compare
// numbers as numbers, and fills the finding's own fields for pid, gpu,
// address and xid.
func lsSetDetail(f *evidence.Finding, name, v string) {
	v = lsClip(strings.TrimSpace(v), 512)
	switch name {
	case "pid":
		if n, err := strconv.Atoi(v); err == nil {
			f.Pid = n
			return
		}
	case "xid":
		if n, err := strconv.Atoi(v); err == nil {
			f.Xid = n
			return
		}
	case "gpu":
		f.GPU = v
		return
	case "address":
		f.Address = v
		return
	case "signal":
		v = lsSignalName(v)
	}
	if lsIsDigits(v) && len(v) <= 18 {
		n, _ := strconv.ParseInt(v, 10, 64)
		f.Details[name] = n
		return
	}
	f.Details[name] = v
	if b, ok := lsParseSize(v); ok {
		f.Details[name+"_bytes"] = b
	}
}

func lsIsDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// lsParseSize reads "1.71 GiB" or "20.00 MiB" as bytes. PyTorch prints binary
// units; the decimal ones are accepted as what they say.
func lsParseSize(s string) (int64, bool) {
	m := lsSizeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	x, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	mult := map[string]float64{
		"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50,
	}[m[2]]
	if mult == 0 {
		return 0, false
	}
	return int64(math.Round(x * mult)), true
}

var lsSignalWords = map[string]string{
	"segmentation fault": "SIGSEGV", "aborted": "SIGABRT", "abort": "SIGABRT",
	"bus error": "SIGBUS", "floating point exception": "SIGFPE", "floating-point exception": "SIGFPE",
	"illegal instruction": "SIGILL", "killed": "SIGKILL", "terminated": "SIGTERM",
}

func lsSignalName(v string) string {
	if s, ok := lsSignalWords[strings.ToLower(v)]; ok {
		return s
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 && n < 32 {
		return signalByNumber(n) // torchelastic's "Received 1 death signal"
	}
	return v
}

func lsSetDetailAny(f *evidence.Finding, k string, v any) {
	if _, ok := f.Details[k]; !ok {
		f.Details[k] = v
	}
}
