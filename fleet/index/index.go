// Package index defines what a fleet index stores about each bundle (a
// Summary: who, when, which GPUs and software, which signature) and the
// Store that keeps summaries between runs of `kcrash buckets`, so that only
// new bundles are read. It imports no bundle code and no database driver:
// backends live in sub-packages and are checked by storetest.
package index

import (
	"context"
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
	// Count is how many summaries the store holds.
	Count(ctx context.Context) (int, error)
	Close() error
}

// Key names the summary's signature across versions: "v<version>:<fine>".
func (s *Summary) Key() string { return SigKey(s.SigVersion, s.Fine) }

// SigKey is "v<version>:<fine>".
func SigKey(version int, fine string) string { return "v" + strconv.Itoa(version) + ":" + fine }

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
