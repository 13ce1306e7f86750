// Package index defines what a fleet index stores about each bundle (a
// Summary: who, when, which GPUs and software, which signature) and the
// Store that keeps summaries between runs of `kcrash buckets`, so that only
// new bundles are read. It imports no bundle code and no database driver:
// backends live in sub-packages and are checked by storetest.
package index

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// GPU is one device a bundle's fault names.
type GPU struct {
	// ID is the identity counted by the class rules: the UUID, else the
	// serial, else host/bus id, else host/rank when nothing names the device.
	ID     string `json:"id"`
	UUID   string `json:"uuid,omitempty"`
	Serial string `json:"serial,omitempty"`
	BusID  string `json:"bus_id,omitempty"`
	Name   string `json:"name,omitempty"`
	// Guessed: no record named the device; ID stands for the rank's GPU.
	Guessed bool `json:"guessed,omitempty"`
}

// Summary is what the fleet needs of one bundle.
type Summary struct {
	ID   string    `json:"id"`   // the bundle's directory name
	Path string    `json:"path"` // where it was read; "ARCHIVE//ENTRY" inside a tarball
	Time time.Time `json:"time"` // when the run ended
	Host string    `json:"host"`
	Job  string    `json:"job,omitempty"`
	Rank string    `json:"rank,omitempty"`

	SigVersion int    `json:"sig_version"`
	Fine       string `json:"fine"`
	Coarse     string `json:"coarse"`
	Title      string `json:"title"`
	SigClass   string `json:"sig_class,omitempty"` // the signature's own class: hardware, software
	Verdict    string `json:"verdict"`
	// Recomputed: the manifest had no signature of this kcrash's version.
	Recomputed bool `json:"recomputed,omitempty"`
	// Previous are the signatures ("v<version>:<fine>") the bundle had
	// before, oldest first: its manifest's when kcrash computed it again,
	// and an index's when the bundle was read again after a version bump.
	// They map a bucket someone filed a ticket for to the bucket it is now.
	Previous []string `json:"previous,omitempty"`

	GPUs  []GPU             `json:"gpus"`
	Stack map[string]string `json:"stack"` // component → version: torch, sglang, NVIDIA driver, kernel...
}

// Stamp identifies one version of a source file: a file seen with the same
// size and modification time is not read again.
type Stamp struct {
	Size  int64 `json:"size"`
	MTime int64 `json:"mtime"` // unix nanoseconds
}

// Source is a file (a bundle, or a tarball of bundles) that was read.
type Source struct {
	Path  string
	Stamp Stamp
}

// Store keeps summaries between runs. One writer at a time; readers may
// run beside it where the backend allows.
type Store interface {
	// Sources returns every file read so far, by path.
	Sources(ctx context.Context) (map[string]Stamp, error)
	// Put adds or replaces summaries (by ID) and records the files they
	// came from, all or none: a file is never marked read without its bundles.
	Put(ctx context.Context, sums []Summary, read []Source) error
	// Summaries returns every summary whose Time is at or after since,
	// oldest first (ties by ID).
	Summaries(ctx context.Context, since time.Time) ([]Summary, error)
	// View is what a bucket report as of now needs, for the bundles from
	// from on (see View): it must equal ViewOf(every summary, now, from).
	View(ctx context.Context, now, from time.Time) (View, error)
	// OtherVersions returns every summary whose signature is not of the
	// given version, oldest first: after a version bump, what must be read
	// again.
	OtherVersions(ctx context.Context, version int) ([]Summary, error)
	// Count is how many summaries the store holds.
	Count(ctx context.Context) (int, error)
	Close() error
}

// Key names the summary's signature across versions: "v<version>:<fine>".
func (s *Summary) Key() string { return SigKey(s.SigVersion, s.Fine) }

// SigKey is "v<version>:<fine>".
func SigKey(version int, fine string) string { return "v" + strconv.Itoa(version) + ":" + fine }

// View is what a bucket report needs from an index, so that a report
// loads the summaries of its window and not every bundle ever indexed:
// older members of a bucket only give it a first seen, a total and a
// title, which the store aggregates where it keeps them.
type View struct {
	// Bundles: every summary the store holds, whatever its time.
	Bundles int `json:"bundles"`
	// Recent: the summaries with from <= Time <= now, oldest first (ties by
	// ID). Times here and in Signatures are in UTC.
	Recent []Summary `json:"recent"`
	// Signatures: for each (version, fine) signature with a Recent member,
	// its members up to now, ordered by version and fine.
	Signatures []SigStats `json:"signatures"`
	// Aliases: for each GPU ID of Recent that is "host/bus id" (no record
	// named the device), the name a bundle of any time gave the GPU at that
	// host and bus: its UUID or serial; the latest such bundle's (by Time,
	// then ID, then its last GPU) wins.
	Aliases map[string]string `json:"aliases"`
}

// SigStats is one signature's members up to the report's now.
type SigStats struct {
	Version int       `json:"version"`
	Fine    string    `json:"fine"`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
	Total   int       `json:"total"`
	// The latest member's (by Time; ties: the smallest ID) title, coarse
	// signature and signature class.
	Title    string `json:"title"`
	Coarse   string `json:"coarse"`
	SigClass string `json:"sig_class"`
	// Evidence: some member's verdict is neither "unknown" nor empty.
	Evidence bool `json:"evidence"`
}

// HasEvidence: the verdict found a cause (the grouping's "no evidence"
// rule, which View's stores evaluate where they keep the verdicts).
func HasEvidence(verdict string) bool { return verdict != "unknown" && verdict != "" }

// AliasKey is the key of a bundle's GPU in View.Aliases when the GPU has a
// name (a UUID or serial) and a bus id, and ok false otherwise.
func AliasKey(host string, g GPU) (key string, ok bool) {
	if g.BusID == "" || strings.HasPrefix(g.ID, host+"/") {
		return "", false
	}
	return host + "/" + g.BusID, true
}

// ViewOf is View computed from every summary: what the stores' View must
// return, and what a report without an index uses.
func ViewOf(all []Summary, now, from time.Time) View {
	sums := slices.Clone(all)
	SortSummaries(sums)
	v := View{Bundles: len(sums), Aliases: map[string]string{}}
	names := map[string]string{}
	for _, s := range sums {
		for _, g := range s.GPUs {
			if k, ok := AliasKey(s.Host, g); ok {
				names[k] = g.ID
			}
		}
	}
	type key struct {
		version int
		fine    string
	}
	recent := map[key]bool{}
	for _, s := range sums {
		if s.Time.Before(from) || s.Time.After(now) {
			continue
		}
		s.Time = s.Time.UTC() // as a store gives it back
		v.Recent = append(v.Recent, s)
		recent[key{s.SigVersion, s.Fine}] = true
		for _, g := range s.GPUs {
			if id, ok := names[g.ID]; ok {
				v.Aliases[g.ID] = id
			}
		}
	}
	stats := map[key]*SigStats{}
	for _, s := range sums {
		k := key{s.SigVersion, s.Fine}
		if !recent[k] || s.Time.After(now) {
			continue
		}
		st := stats[k]
		if st == nil {
			st = &SigStats{Version: s.SigVersion, Fine: s.Fine, First: s.Time.UTC()}
			stats[k] = st
		}
		st.Total++
		// Oldest first, ties by ID: a later time replaces the latest,
		// an equal one keeps the smaller ID already there.
		if st.Total == 1 || s.Time.After(st.Last) {
			st.Last, st.Title, st.Coarse, st.SigClass = s.Time.UTC(), s.Title, s.Coarse, s.SigClass
		}
		st.Evidence = st.Evidence || HasEvidence(s.Verdict)
	}
	for _, st := range stats {
		v.Signatures = append(v.Signatures, *st)
	}
	slices.SortFunc(v.Signatures, func(a, b SigStats) int {
		return cmp.Or(cmp.Compare(a.Version, b.Version), cmp.Compare(a.Fine, b.Fine))
	})
	return v
}

// SortSummaries orders summaries oldest first, ties by ID: the order
// Summaries and View.Recent hand them back in.
func SortSummaries(l []Summary) {
	slices.SortStableFunc(l, func(a, b Summary) int { return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.ID, b.ID)) })
}

// StackLine is the summary's software as one line, components sorted: what
// "stacks seen" lists.
func (s *Summary) StackLine() string {
	keys := make([]string, 0, len(s.Stack))
	for k := range s.Stack {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + s.Stack[k]
	}
	return strings.Join(parts, " ")
}
