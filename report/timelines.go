package report

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/kcrash/kcrash/evidence"
)

// What the page keeps of a timeline, whatever the bundle holds: the
// collectors write far less, a crafted or very long run's bundle may not.
const (
	maxSpans        = 1024 // in-tree processes of gpu.json drawn on the VRAM lanes
	maxToolErrors   = 100
	maxKeptProcs    = 2000 // processes.json: the root, the abnormal ends, the largest
	maxKmsgFindings = 2000 // raw/kmsg-findings.json findings with a time
	maxEvents       = 5000 // markers from the triage and the kernel findings together
	maxLaneKeys     = 4096 // distinct GPUs counted beyond those drawn
	maxTextKept     = 4096 // bytes of one name, command line or finding text
)

// streamed are the JSON files read as streams into their reduced form.
var streamed = map[string]bool{"gpu.json": true, "memory.json": true, "processes.json": true, "raw/kmsg-findings.json": true}

// timelines is what Load keeps of the streamed files.
type timelines struct {
	gpu   *gpuRead
	mem   *memRead
	procs *procRead
	kmsg  *kmsgRead
}

// parse reads one streamed file into in.
func (in *Input) parse(name string, r io.Reader) {
	switch name {
	case "gpu.json":
		in.tl.gpu = readGPUStream(r)
	case "memory.json":
		in.tl.mem = readMemStream(r)
	case "processes.json":
		in.tl.procs = readProcStream(r)
	case "raw/kmsg-findings.json":
		in.tl.kmsg = readKmsgStream(r)
	}
}

// parseKept reads the streamed files an input holds as bytes (one built in
// memory: the tests, the fuzzer) into their reduced form.
func (in *Input) parseKept() {
	for name := range streamed {
		if b, ok := in.files[name]; ok {
			in.parse(name, bytes.NewReader(b))
		}
	}
}

type gpuLaneRead struct {
	label string
	used  decimator
	total float64
}

type gpuSpan struct {
	gpu string
	sp  span
}

type gpuRead struct {
	err       error
	samples   int
	lanes     map[string]*gpuLaneRead
	order     []string
	busOf     map[string]string // index and bus id → lane key
	extra     map[string]bool   // lanes beyond maxLanes, counted up to maxLaneKeys
	spans     []gpuSpan
	spansLeft int
	toolErrs  []string
	errsLeft  int
}

type gpuProcess struct {
	Pid          int       `json:"pid"`
	Name         string    `json:"name"`
	GPU          string    `json:"gpu"`
	UsedBytes    *uint64   `json:"used_bytes"`
	MaxUsedBytes *uint64   `json:"max_used_bytes"`
	InTree       bool      `json:"in_tree"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
}

func readGPUStream(r io.Reader) *gpuRead {
	d := &gpuRead{lanes: map[string]*gpuLaneRead{}, busOf: map[string]string{}, extra: map[string]bool{}}
	s := newStream(r)
	d.err = readErr(s.Object(func(key string) error {
		switch key {
		case "samples":
			return s.Array(func() error {
				var smp gpuSample
				if err := s.Decode(&smp); err != nil {
					return err
				}
				d.add(&smp)
				return nil
			})
		case "snapshot":
			var smp *gpuSample
			if err := s.Decode(&smp); err != nil {
				return err
			}
			if smp != nil {
				d.add(smp)
			}
			return nil
		case "processes":
			return s.Array(func() error {
				var p gpuProcess
				if err := s.Decode(&p); err != nil {
					return err
				}
				if !p.InTree || p.UsedBytes == nil {
					return nil
				}
				if len(d.spans) == maxSpans {
					d.spansLeft++
					return nil
				}
				sp := span{from: p.FirstSeen, to: p.LastSeen, v: float64(*p.UsedBytes), label: clipText(fmt.Sprintf("pid %d %s", p.Pid, p.Name), maxTextKept)}
				sp.peak = sp.v
				if p.MaxUsedBytes != nil {
					sp.peak = max(sp.peak, float64(*p.MaxUsedBytes))
				}
				d.spans = append(d.spans, gpuSpan{clipText(p.GPU, 256), sp})
				return nil
			})
		case "tool_errors":
			return s.Array(func() error {
				var e struct {
					Tool  string `json:"tool"`
					Error string `json:"error"`
					Count int    `json:"count"`
				}
				if err := s.Decode(&e); err != nil {
					return err
				}
				if len(d.toolErrs) == maxToolErrors {
					d.errsLeft++
					return nil
				}
				d.toolErrs = append(d.toolErrs, clipText(fmt.Sprintf("%s: %s (%d times)", e.Tool, e.Error, e.Count), maxTextKept))
				return nil
			})
		}
		return s.Skip()
	}))
	return d
}

func (d *gpuRead) add(s *gpuSample) {
	d.samples++
	for _, g := range s.GPUs {
		key := fmt.Sprintf("%d/%s/%s", g.Index, g.BusID, g.MIG)
		l := d.lanes[key]
		if l == nil {
			if len(d.order) == maxLanes {
				if len(d.extra) < maxLaneKeys {
					d.extra[key] = true
				}
				continue
			}
			label := fmt.Sprintf("GPU %d", g.Index)
			if g.MIG != "" {
				label += " " + g.MIG
			}
			l = &gpuLaneRead{label: clipText(label, 256)}
			d.lanes[key] = l
			d.order = append(d.order, key)
			d.busOf[strings.ToLower(g.BusID)] = key
			d.busOf[fmt.Sprint(g.Index)] = key
		}
		total := 0.0
		if g.TotalBytes != nil {
			total = float64(*g.TotalBytes)
			l.total = max(l.total, total)
		}
		limit := max(minGroups, min(lineGroups, allGroups/len(d.order)))
		switch {
		case g.UsedBytes != nil:
			l.used.add(point{s.Time, float64(*g.UsedBytes)}, limit)
		case g.UsedPercent != nil && total > 0:
			l.used.add(point{s.Time, *g.UsedPercent / 100 * total}, limit)
		}
	}
}

type memRead struct {
	err           error
	samples       int
	used, rss, cg decimator
	hostTotal     float64
	cgroup        *memCgroup
}

type memCgroup struct {
	Path                string  `json:"path"`
	EffectiveLimitBytes *uint64 `json:"effective_limit_bytes"`
	EffectiveLimitPath  string  `json:"effective_limit_path"`
	End                 *struct {
		LimitBytes *uint64 `json:"limit_bytes"`
	} `json:"end"`
	OOMKillDelta *uint64 `json:"oom_kill_delta"`
}

func readMemStream(r io.Reader) *memRead {
	d := &memRead{}
	s := newStream(r)
	add := func(smp *memSample) {
		d.samples++
		if tot, ok := smp.Meminfo["MemTotal"]; ok {
			d.hostTotal = max(d.hostTotal, float64(tot))
			if av, ok := smp.Meminfo["MemAvailable"]; ok && av <= tot {
				d.used.add(point{smp.Time, float64(tot - av)}, lineGroups)
			}
		}
		if smp.TreeProcs > 0 || smp.TreeRSSBytes > 0 {
			d.rss.add(point{smp.Time, float64(smp.TreeRSSBytes)}, lineGroups)
		}
		if smp.CgroupUsageBytes != nil {
			d.cg.add(point{smp.Time, float64(*smp.CgroupUsageBytes)}, lineGroups)
		}
	}
	d.err = readErr(s.Object(func(key string) error {
		switch key {
		case "samples":
			return s.Array(func() error {
				var smp memSample
				if err := s.Decode(&smp); err != nil {
					return err
				}
				add(&smp)
				return nil
			})
		case "snapshot":
			var smp *memSample
			if err := s.Decode(&smp); err != nil {
				return err
			}
			if smp != nil {
				add(smp)
			}
			return nil
		case "cgroup":
			return s.Decode(&d.cgroup)
		}
		return s.Skip()
	}))
	return d
}

// keptProc is a process of processes.json as kept: its order in the file
// and what ranks it for keeping.
type keptProc struct {
	seq      int
	p        evidence.Process
	abnormal bool
}

type procRead struct {
	err     error
	rootPid int
	total   int
	kept    []keptProc
}

func readProcStream(r io.Reader) *procRead {
	d := &procRead{}
	s := newStream(r)
	d.err = readErr(s.Object(func(key string) error {
		switch key {
		case "root_pid":
			return s.Decode(&d.rootPid)
		case "processes":
			return s.Array(func() error {
				var p evidence.Process
				if err := s.Decode(&p); err != nil {
					return err
				}
				p.Name = clipText(p.Name, 256)
				cmd := clipText(strings.Join(p.Cmdline, " "), 1024) // the table shows 300
				p.Cmdline = nil
				if cmd != "" {
					p.Cmdline = []string{cmd}
				}
				p.ExitSignal = clipText(p.ExitSignal, 256)
				abnormal := p.ExitSignal != "" || p.CoreDumped || p.ExitCode != nil && *p.ExitCode != 0
				d.kept = append(d.kept, keptProc{seq: d.total, p: p, abnormal: abnormal})
				d.total++
				if len(d.kept) >= 2*maxKeptProcs {
					d.prune()
				}
				return nil
			})
		}
		return s.Skip()
	}))
	d.prune()
	return d
}

// prune keeps the maxKeptProcs that matter most: the run's root, those
// that ended abnormally, then the largest by RSS; in their file order.
func (d *procRead) prune() {
	if len(d.kept) <= maxKeptProcs {
		return
	}
	rank := func(k *keptProc) int {
		switch {
		case int(k.p.Pid) == d.rootPid:
			return 0
		case k.abnormal:
			return 1
		}
		return 2
	}
	sort.SliceStable(d.kept, func(i, j int) bool {
		a, b := &d.kept[i], &d.kept[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		return a.p.RSSBytes > b.p.RSSBytes
	})
	d.kept = d.kept[:maxKeptProcs]
	sort.SliceStable(d.kept, func(i, j int) bool { return d.kept[i].seq < d.kept[j].seq })
}

type kmsgRead struct {
	err      error
	findings []evidence.Finding
	left     int
}

func readKmsgStream(r io.Reader) *kmsgRead {
	d := &kmsgRead{}
	s := newStream(r)
	d.err = readErr(s.Object(func(key string) error {
		if key != "findings" {
			return s.Skip()
		}
		return s.Array(func() error {
			var f evidence.Finding
			if err := s.Decode(&f); err != nil {
				return err
			}
			if f.Time == nil {
				return nil
			}
			if len(d.findings) == maxKmsgFindings {
				d.left++
				return nil
			}
			f.Text = clipText(f.Text, maxTextKept)
			f.File, f.Source, f.Attribution = clipText(f.File, 256), clipText(f.Source, 256), clipText(f.Attribution, 256)
			f.Details = nil
			d.findings = append(d.findings, f)
			return nil
		})
	}))
	return d
}
