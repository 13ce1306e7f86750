// Package source reads bundles for the fleet: a bundle file, a directory of
// them (searched recursively), a tarball of bundles or an s3://bucket/prefix
// (s3.go), each turned into an
// index.Summary. A store, when given, makes the walk incremental: a file
// seen before with the same size and modification time is not opened.
package source

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/crashsig"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/internal/s3client"
	"github.com/kcrash/kcrash/software"
	"github.com/kcrash/kcrash/triage"
)

// Stats says what a walk did.
type Stats struct {
	Read       int      // bundles opened and summarised
	Skipped    int      // files already in the store, not opened
	Recomputed int      // bundles whose signature was computed again (none stored, or another version)
	Errors     []string // files that could not be read: said, never fatal
}

// Walk summarises every bundle under the sources and calls Put with each
// file's bundles. Seen, when not nil, reports a file already read at its
// stamp, which is then skipped; Mark records a file after its bundles were
// put. Files are read by Workers goroutines (GOMAXPROCS when 0); Seen, Put
// and Mark are only ever called from the goroutine that called Run.
type Walk struct {
	Seen    func(path string, st index.Stamp) bool
	Mark    func(path string, st index.Stamp) error
	Put     func(s []index.Summary) error
	Workers int
	// Recompute computes every signature again from the bundle's triage,
	// even one stored at this kcrash's version (--recompute: the table
	// changed without a version bump).
	Recompute bool
}

// job is one file to read; named: given on the command line, where a file
// that is not a bundle is an error rather than a note.
type job struct {
	path  string
	stamp index.Stamp
	named bool
	s3    *s3Object // nil: a local file
}

type result struct {
	job
	sums []index.Summary
	st   Stats
	err  error
}

// Run walks the sources. A source that does not exist is an error; a file
// in it that is not a bundle is noted in Stats.Errors and skipped.
func (w Walk) Run(ctx context.Context, sources []string) (Stats, error) {
	var st Stats
	jobs, err := w.list(ctx, sources, &st)
	if err != nil {
		return st, err
	}
	workers := w.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	todo := make(chan job)
	done := make(chan result)
	var wg sync.WaitGroup
	for range min(workers, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range todo {
				r := result{job: j}
				if j.s3 != nil {
					r.sums, r.err = readS3(ctx, j, &r.st, w.Recompute)
				} else {
					r.sums, r.err = readFile(ctx, j.path, &r.st, w.Recompute)
				}
				done <- r
			}
		}()
	}
	go func() {
		defer close(todo)
		for _, j := range jobs {
			select {
			case todo <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(done) }()
	var first error
	for r := range done {
		if first != nil {
			continue // draining after a failure
		}
		st.Read += r.st.Read
		st.Recomputed += r.st.Recomputed
		st.Errors = append(st.Errors, r.st.Errors...)
		if err := w.take(r, &st); err != nil {
			first = err
			cancel()
		}
	}
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return st, first
}

// take puts one file's bundles and marks it read.
func (w Walk) take(r result, st *Stats) error {
	if r.err != nil {
		if r.named {
			return r.err
		}
		st.Errors = append(st.Errors, r.err.Error())
		return nil
	}
	if len(r.sums) > 0 {
		if err := w.Put(r.sums); err != nil {
			return err
		}
	}
	if w.Mark != nil {
		return w.Mark(r.path, r.stamp)
	}
	return nil
}

// list finds the files to read, leaving out those Seen reports.
func (w Walk) list(ctx context.Context, sources []string, st *Stats) ([]job, error) {
	var jobs []job
	add := func(p string, fi os.FileInfo, named bool) {
		stamp := index.Stamp{Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
		if w.Seen != nil && w.Seen(p, stamp) {
			st.Skipped++
			return
		}
		jobs = append(jobs, job{path: p, stamp: stamp, named: named})
	}
	for _, src := range sources {
		if s3client.IsURL(src) {
			js, err := w.listS3(ctx, src, st)
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, js...)
			continue
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			add(src, fi, true)
			continue
		}
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				st.Errors = append(st.Errors, err.Error())
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if d.IsDir() || !candidate(d.Name()) || !d.Type().IsRegular() {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				st.Errors = append(st.Errors, err.Error())
				return nil
			}
			add(p, fi, false)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// candidate: bundles are .tar.gz; tarballs of bundles .tar, .tgz or .tar.gz.
func candidate(name string) bool {
	return strings.HasSuffix(name, ".tar.gz") || strings.HasSuffix(name, ".tgz") || strings.HasSuffix(name, ".tar")
}

// readFile summarises a bundle, or every bundle of a tarball of bundles,
// reading the file once.
func readFile(ctx context.Context, p string, st *Stats, force bool) ([]index.Summary, error) {
	var out []index.Summary
	b, err := bundle.OpenOrArchive(p, func(name string, r io.Reader) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name = p + "//" + name
		b, err := bundle.ReadFunc(r, name, nil)
		if err != nil {
			st.Errors = append(st.Errors, err.Error())
			return nil
		}
		s := summarize(b, force)
		s.Path = name
		count(st, s)
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if b != nil {
		s := summarize(b, force)
		s.Path = p
		count(st, s)
		return []index.Summary{s}, nil
	}
	return out, nil
}

func count(st *Stats, s index.Summary) {
	st.Read++
	if s.Recomputed {
		st.Recomputed++
	}
}

// Summarize is a bundle's summary: its stored signature when it is of this
// kcrash's version, else one computed again from its triage.
func Summarize(b *bundle.Bundle) index.Summary { return summarize(b, false) }

// summarize is Summarize that, with force, computes the signature again
// whatever its stored version.
func summarize(b *bundle.Bundle, force bool) index.Summary {
	m := &b.Manifest
	s := index.Summary{ID: b.Dir, Path: b.Path, Time: m.EndTime, Host: m.Host.Hostname, Stack: map[string]string{}}
	if s.Time.IsZero() {
		s.Time = m.StartTime
	}
	if m.Job != nil {
		s.Job = m.Job.JobID
		if m.Job.StepID != "" {
			s.Job += "." + m.Job.StepID
		}
		if m.Job.Rank != nil {
			s.Rank = strconv.Itoa(*m.Job.Rank)
		}
	}
	var res triage.Result
	if len(m.Triage) > 0 {
		_ = json.Unmarshal(m.Triage, &res) // a damaged triage reads as unknown
	}
	s.Verdict = string(res.Verdict.Kind)
	sig := m.Signature
	if sig == nil || sig.Version != crashsig.Version || force {
		signal := ""
		if m.Exit.Signal != nil {
			signal = *m.Exit.Signal
		}
		if sig != nil && sig.Fine != "" {
			s.Previous = []string{index.SigKey(sig.Version, sig.Fine)}
		}
		sig2 := crashsig.Compute(crashsig.FromTriage(res, signal))
		sig, s.Recomputed = &sig2, true
	}
	s.SigVersion, s.Fine, s.Coarse, s.Title, s.SigClass = sig.Version, sig.Fine, sig.Coarse, sig.Title, sig.Class
	s.GPUs = gpusOf(b, res.Findings, m)
	s.Stack = stackOf(b, m)
	return s
}

// gpusOf names the devices the verdict's records point at: the NVIDIA UUID
// when the kernel printed it, else the bus id on this host; the name and
// serial from the bundle's smi data where it has them.
func gpusOf(b *bundle.Bundle, findings []evidence.Finding, m *bundle.Manifest) []index.GPU {
	names, serials := smiNames(b)
	seen := map[string]bool{}
	var out []index.GPU
	for _, f := range findings {
		role := f.Details.Text(detail.VerdictRole)
		if role != triage.RoleRootCause && role != triage.RoleExplained {
			continue
		}
		g := index.GPU{UUID: f.Details.Text("gpu_uuid"), BusID: busID(f.GPU)}
		if g.UUID == "" && g.BusID == "" {
			continue
		}
		g.Name, g.Serial = names[g.BusID], serials[g.BusID]
		switch {
		case g.UUID != "":
			g.ID = g.UUID
		case g.Serial != "":
			g.ID = "serial:" + g.Serial
		default:
			g.ID = m.Host.Hostname + "/" + g.BusID
		}
		if !seen[g.ID] {
			seen[g.ID] = true
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		// Nothing named the device (a Python-level CUDA error): the rank's GPU
		// stands for it, so that spread over GPUs can still be counted.
		id := m.Host.Hostname + "/"
		switch {
		case m.Job != nil && m.Job.LocalRank != nil:
			id += "local-rank-" + strconv.Itoa(*m.Job.LocalRank)
		case m.Job != nil && m.Job.Rank != nil:
			id += "rank-" + strconv.Itoa(*m.Job.Rank)
		default:
			id += "gpu-unknown"
		}
		out = append(out, index.GPU{ID: id, Guessed: true})
	}
	return out
}

// busID spells a PCI address domain:bus:device.function, lower case:
// NVIDIA prints 0000:0A:00 without the function.
func busID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return ""
	}
	if strings.Count(s, ":") == 1 {
		s = "0000:" + s
	}
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// smiNames maps bus id → GPU name (gpu.json's snapshot) and → serial
// (nvidia-smi -q in raw/, when the bundle has it).
func smiNames(b *bundle.Bundle) (names, serials map[string]string) {
	names, serials = map[string]string{}, map[string]string{}
	if data, ok := b.File("gpu.json"); ok {
		var g struct {
			Snapshot *struct {
				GPUs []struct {
					BusID string `json:"bus_id"`
					Name  string `json:"name"`
				} `json:"gpus"`
			} `json:"snapshot"`
		}
		if json.Unmarshal(data, &g) == nil && g.Snapshot != nil {
			for _, x := range g.Snapshot.GPUs {
				if x.BusID != "" {
					names[busID(x.BusID)] = x.Name
				}
			}
		}
	}
	for _, name := range b.Names() {
		if !strings.HasPrefix(name, "raw/nvidia-smi") {
			continue
		}
		data, _ := b.File(name)
		parseSerials(data, serials)
	}
	return names, serials
}

// parseSerials reads `nvidia-smi -q`: a "GPU 00000000:0A:00.0" header, then
// "Serial Number : 1652...".
func parseSerials(data []byte, into map[string]string) {
	cur := ""
	for _, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "GPU ") && strings.Count(t, ":") == 2 && !strings.Contains(t, " : ") {
			cur = busID(strings.TrimPrefix(strings.TrimPrefix(t, "GPU "), "0000"))
			continue
		}
		if k, v, ok := strings.Cut(t, ":"); ok && cur != "" && strings.TrimSpace(k) == "Serial Number" {
			if v = strings.TrimSpace(v); v != "" && v != "N/A" {
				into[cur] = v
			}
		}
	}
}

// stackOf is the software the run had: the GPU-serving Python packages
// (software.json), driver and runtime versions, and the kernel.
func stackOf(b *bundle.Bundle, m *bundle.Manifest) map[string]string {
	out := map[string]string{}
	if m.Host.Kernel != "" {
		out["kernel"] = m.Host.Kernel
	}
	data, ok := b.File("software.json")
	if !ok {
		return out
	}
	var rep software.Report
	if json.Unmarshal(data, &rep) != nil {
		return out
	}
	if len(rep.Python) > 0 {
		for _, p := range rep.Python[0].Packages {
			if p.GPU || p.Editable != nil {
				out[software.Normalize(p.Name)] = p.Version
			}
		}
	}
	for k, v := range map[string]string{"nvidia-driver": rep.Runtime.NVIDIADriver, "cuda": rep.Runtime.CUDA,
		"rocm": rep.Runtime.ROCm, "amdgpu": rep.Runtime.AMDGPU} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// indexBatch is how many files' bundles go into one transaction.
const indexBatch = 512

// Update reads into store the source files it does not hold at their
// current size and time, a batch of files per transaction.
func Update(ctx context.Context, store index.Store, sources []string) (Stats, error) {
	known, err := store.Sources(ctx)
	if err != nil {
		return Stats{}, err
	}
	var sums []index.Summary
	var read []index.Source
	flush := func() error {
		if len(sums) == 0 && len(read) == 0 {
			return nil
		}
		err := store.Put(ctx, sums, read)
		sums, read = sums[:0], read[:0]
		return err
	}
	w := Walk{
		Seen: func(p string, st index.Stamp) bool { old, ok := known[absPath(p)]; return ok && old == st },
		Put:  func(s []index.Summary) error { sums = append(sums, s...); return nil },
		Mark: func(p string, st index.Stamp) error {
			read = append(read, index.Source{Path: absPath(p), Stamp: st})
			if len(read) >= indexBatch {
				return flush()
			}
			return nil
		},
	}
	st, err := w.Run(ctx, sources)
	if err != nil {
		return st, err
	}
	return st, flush()
}

// absPath keys the index by absolute path, so that runs from another
// directory find the same files. An s3:// URL is absolute already.
func absPath(p string) string {
	if s3client.IsURL(p) {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
