// Package metrics writes the node agent's numbers for Prometheus as a
// node_exporter textfile: one file, kcrash.prom, replaced atomically. It
// counts crashes by verdict and GPU kernel events by GPU and kind, and
// shows the agent's health (its journal, its GPU sampler). Every label
// has a bounded set of values, so a node cannot grow the series without
// limit.
package metrics

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/textfile"
	"github.com/kcrash/kcrash/kernlog"
)

// FileName is the file written into the textfile directory.
const FileName = "kcrash.prom"

// Bounds on label values.
const (
	// DefaultMaxGPUs is how many distinct GPUs get their own label value;
	// later ones count under gpu="other". Eight to a node is the rule; 64
	// leaves room for partitions and a node whose PCI addresses change.
	DefaultMaxGPUs = 64
	// maxEventSeries caps kcrash_kernel_events_total whatever the Xid
	// numbers: past it, events count under gpu="other", kind="other".
	maxEventSeries = 512
	// sameReport is how close two records of one GPU and kind must be to be
	// one report: a report's lines arrive within milliseconds.
	sameReport = time.Second
	// maxLastSeen bounds the memory of recent reports; forgetting them
	// only risks counting a report's later line again.
	maxLastSeen = 4096
)

// Kinds of kernel events (the kind label); Xids are "xid_<N>".
const (
	KindPageFault   = "page_fault"
	KindRingTimeout = "ring_timeout"
	KindGPUReset    = "gpu_reset"
	KindRAS         = "ras"
	KindFellOffBus  = "fell_off_bus"
	KindOOMKill     = "oom_kill"
	KindOther       = "other"
)

// Label values for a record that names no GPU, and for one past the caps.
const (
	GPUNone    = "none"
	GPUUnknown = "unknown"
	GPUOther   = "other"
	// VerdictOther counts a crash notice whose verdict is no known kind.
	VerdictOther = "other"
)

// Config says where the health numbers come from. A nil source leaves its
// series out.
type Config struct {
	Journal func() api.JournalStats
	GPU     func() api.GPUStats
	MaxGPUs int          // DefaultMaxGPUs when 0
	Logger  *slog.Logger // write failures; nil: discarded
}

// Metrics counts what the agent saw. Its methods are safe for concurrent use.
type Metrics struct {
	cfg Config

	mu       sync.Mutex
	crashes  map[string]uint64
	events   map[eventKey]uint64
	gpus     map[string]bool
	lastSeen map[eventKey]time.Time // last counted record of a GPU (as named) and kind

	writeMu   sync.Mutex
	lastBytes []byte
	lastWrite time.Time
	lastErr   error
}

type eventKey struct{ gpu, kind string }

// New returns Metrics with every verdict's counter at zero, so that rate()
// sees the first crash of a kind.
func New(cfg Config) *Metrics {
	if cfg.MaxGPUs <= 0 {
		cfg.MaxGPUs = DefaultMaxGPUs
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{cfg: cfg, crashes: map[string]uint64{VerdictOther: 0}, events: map[eventKey]uint64{},
		gpus: map[string]bool{}, lastSeen: map[eventKey]time.Time{}}
	for _, k := range evidence.Kinds {
		m.crashes[string(k)] = 0
	}
	return m
}

// Crash counts one crash bundle by its verdict kind.
func (m *Metrics) Crash(n api.CrashNotice) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := n.Verdict
	if _, known := m.crashes[v]; !known {
		v = VerdictOther
	}
	m.crashes[v]++
}

// Observe counts e when kernlog reads it as GPU or memory trouble. Only the
// kernel's own records count (facility 0): /dev/kmsg gives every record a
// user-space process writes another facility, so no writer, the tests'
// marked records included, can move these counters. Gap entries are the
// journal's numbers, not events.
func (m *Metrics) Observe(e *journal.Entry) {
	if e == nil || e.Gap != nil || e.Rec.Facility != 0 || e.Rec.Text == "" {
		return
	}
	text := strings.TrimSpace(e.Rec.Text)
	if strings.HasPrefix(text, "oom_reaper:") {
		return // it follows every OOM kill, seconds later: not another kill
	}
	// A record's later lines (an escaped newline in /dev/kmsg) are
	// indented under the first, as dmesg prints them and kernlog joins
	// them (NVIDIA's "fallen off the bus" spans three).
	parts := strings.Split(text, "\n")
	lines := make([]kernlog.Line, len(parts))
	for i, p := range parts {
		lines[i] = kernlog.Line{N: i + 1, Text: p, Raw: p}
		if i > 0 {
			lines[i].Raw = " " + p
		}
	}
	fs := kernlog.Parse(lines)
	if len(fs) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range fs {
		kind := eventKind(f)
		if kind == "" {
			continue
		}
		// one report is told by the GPU it names, before any cap folds
		// GPUs together
		seen := eventKey{strings.ToLower(f.GPU), kind}
		if last, ok := m.lastSeen[seen]; ok && !e.Wall.Before(last) && e.Wall.Sub(last) < sameReport {
			continue
		}
		if len(m.lastSeen) >= maxLastSeen {
			clear(m.lastSeen)
		}
		m.lastSeen[seen] = e.Wall
		k := eventKey{m.gpuLabel(f, kind), kind}
		if _, ok := m.events[k]; !ok && len(m.events) >= maxEventSeries {
			k = eventKey{GPUOther, KindOther}
		}
		m.events[k]++
	}
}

// eventKind maps a finding to the kind label; "" leaves it uncounted.
func eventKind(f evidence.Finding) string {
	switch ev, _ := f.Details["event"].(string); ev {
	case "vm_fault", "memory_access_fault":
		return KindPageFault
	case "xid":
		if f.Xid > 0 && f.Xid < 1000 {
			return "xid_" + strconv.Itoa(f.Xid)
		}
		return KindOther
	case "ring_timeout":
		return KindRingTimeout
	case "gpu_reset":
		return KindGPUReset
	case "ras_error":
		return KindRAS
	case "fallen_off_bus":
		return KindFellOffBus
	case "oom_kill":
		return KindOOMKill
	case "oom_invoked":
		return "" // the start of a report whose kill line counts it
	}
	if f.Kind == evidence.NativeCrash {
		return "" // a user-space segfault or trap: no GPU or memory trouble
	}
	if f.Details.Text(detail.Vendor) != "" {
		return KindOther
	}
	return ""
}

func (m *Metrics) gpuLabel(f evidence.Finding, kind string) string {
	g := strings.ToLower(strings.TrimSpace(f.GPU))
	switch {
	case g == "" && kind == KindOOMKill:
		return GPUNone
	case g == "":
		return GPUUnknown
	case m.gpus[g]:
		return g
	case len(m.gpus) >= m.cfg.MaxGPUs:
		return GPUOther
	}
	m.gpus[g] = true
	return g
}

// Render returns kcrash.prom's text (textfile.Render's order and escapes).
func (m *Metrics) Render() []byte {
	var ss []textfile.Sample
	m.mu.Lock()
	for v, n := range m.crashes {
		ss = append(ss, textfile.Sample{Name: nameCrashes, Labels: textfile.Labels("verdict", v), Value: float64(n)})
	}
	for k, n := range m.events {
		ss = append(ss, textfile.Sample{Name: nameEvents, Labels: textfile.Labels("gpu", k.gpu, "kind", k.kind), Value: float64(n)})
	}
	m.mu.Unlock()
	if m.cfg.Journal != nil {
		j := m.cfg.Journal()
		reading := 1.0
		if j.ReadingErr != "" {
			reading = 0
		}
		ss = append(ss, textfile.Sample{Name: nameJournalBytes, Value: float64(j.Bytes)}, textfile.Sample{Name: nameJournalRecords, Value: float64(j.Records)},
			textfile.Sample{Name: nameJournalGaps, Value: float64(j.Gaps)}, textfile.Sample{Name: nameLost, Value: float64(j.Lost)}, textfile.Sample{Name: nameReading, Value: reading})
		if !j.Newest.IsZero() {
			ss = append(ss, textfile.Sample{Name: nameLastRecord, Value: unixSeconds(j.Newest)})
		}
	}
	if m.cfg.GPU != nil {
		g := m.cfg.GPU()
		ss = append(ss, textfile.Sample{Name: nameGPUSamples, Value: float64(g.Samples)})
		if !g.LastSample.IsZero() {
			ss = append(ss, textfile.Sample{Name: nameLastGPUSample, Value: unixSeconds(g.LastSample)})
		}
	}
	return textfile.Render(ss, families)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }
