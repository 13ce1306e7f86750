package source

import (
	"context"
	"slices"
	"strings"

	"github.com/kcrash/kcrash/crashsig"
	"github.com/kcrash/kcrash/fleet/index"
)

// Stale are the summaries an index holds whose signature is not of this
// kcrash's version (all of them with every): after a version bump their
// buckets would never meet the new ones, so their bundles are read again.
func Stale(sums []index.Summary, every bool) []index.Summary {
	var out []index.Summary
	for _, s := range sums {
		if every || s.SigVersion != crashsig.Version {
			out = append(out, s)
		}
	}
	return out
}

// Recompute reads again the files that hold old's bundles and puts their
// new summaries into store, each remembering the signature it had in the
// index (Previous), so a bucket of the old version maps to the new one.
// With force every signature is computed again, even one of this version.
// A file that is gone or changed is noted in Stats.Errors and its bundles
// keep their old summaries.
func Recompute(ctx context.Context, store index.Store, old []index.Summary, force bool) (Stats, error) {
	byID := map[string]*index.Summary{}
	files := map[string]bool{}
	for i := range old {
		byID[old[i].ID] = &old[i]
		files[sourceFile(old[i].Path)] = true
	}
	paths := make([]string, 0, len(files))
	for f := range files {
		paths = append(paths, f)
	}
	slices.Sort(paths)
	var sums []index.Summary
	var read []index.Source
	var st Stats
	w := Walk{
		Recompute: force,
		Put: func(s []index.Summary) error {
			for _, n := range s {
				if o := byID[n.ID]; o != nil {
					n.Previous = mergePrevious(o, &n)
					sums = append(sums, n)
				}
			}
			return nil
		},
		Mark: func(p string, stamp index.Stamp) error {
			read = append(read, index.Source{Path: absPath(p), Stamp: stamp})
			return nil
		},
	}
	for _, p := range paths {
		// One at a time: a file that is gone is a note, not the end.
		s, err := w.Run(ctx, []string{p})
		st.Read, st.Recomputed, st.Errors = st.Read+s.Read, st.Recomputed+s.Recomputed, append(st.Errors, s.Errors...)
		if err != nil {
			if ctx.Err() != nil {
				return st, err
			}
			st.Errors = append(st.Errors, err.Error())
		}
	}
	if len(sums) == 0 {
		return st, nil
	}
	return st, store.Put(ctx, sums, read)
}

// mergePrevious is the new summary's history: the old one's, then the old
// signature itself when it differs from the new one.
func mergePrevious(old, n *index.Summary) []string {
	prev := slices.Clone(old.Previous)
	for _, p := range n.Previous {
		if !slices.Contains(prev, p) {
			prev = append(prev, p)
		}
	}
	if k := old.Key(); k != n.Key() && !slices.Contains(prev, k) {
		prev = append(prev, k)
	}
	return prev
}

// Change is where one older signature's bundles are now.
type Change struct {
	Old     string         `json:"old"`     // v<version>:<fine>
	Bundles int            `json:"bundles"` // its bundles among the summaries
	New     map[string]int `json:"new"`     // v<version>:<fine> → bundles
}

// Changes maps every older signature the summaries remember (their last
// Previous) to the signatures their bundles have now, oldest key first.
func Changes(sums []index.Summary) []Change {
	byOld := map[string]*Change{}
	for _, s := range sums {
		if len(s.Previous) == 0 {
			continue
		}
		k := s.Previous[len(s.Previous)-1]
		c := byOld[k]
		if c == nil {
			c = &Change{Old: k, New: map[string]int{}}
			byOld[k] = c
		}
		c.Bundles++
		c.New[s.Key()]++
	}
	out := make([]Change, 0, len(byOld))
	for _, c := range byOld {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Old, b.Old) })
	return out
}

// sourceFile is the file (or S3 object) a summary's bundle was read from:
// ARCHIVE//ENTRY names a bundle inside a tarball, s3://bucket/key an object.
func sourceFile(p string) string {
	scheme := ""
	if rest, ok := strings.CutPrefix(p, "s3://"); ok {
		scheme, p = "s3://", rest
	}
	file, _, _ := strings.Cut(p, "//")
	return scheme + file
}
