// Package bucket groups bundle summaries into buckets (one fine signature
// each) and classes buckets and GPUs as hardware-suspect, software-suspect or
// undetermined from counts a person can check (docs/fleet.md §2). It is pure:
// summaries in, a report out.
package bucket

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/kcrash/kcrash/fleet/index"
)

// Classes.
const (
	Hardware     = "hardware-suspect"
	Software     = "software-suspect"
	Undetermined = "undetermined"
)

// Defaults for the class rules; docs/fleet.md says why.
const (
	DefaultK      = 3
	DefaultM      = 3
	DefaultN      = 2
	DefaultWindow = 7 * 24 * time.Hour
)

// Options are the window and the class thresholds.
type Options struct {
	Now time.Time
	// Since: only buckets with a member at or after it are listed, counts are
	// of those members, and a bucket first seen at or after it is "new".
	// Zero: Now - Window.
	Since time.Time
	// Window: the class rules count what happened in (Now-Window, Now].
	Window time.Duration
	// K: faults a GPU needs, under ≥ 2 coarse signatures or ≥ 2 stacks, to be
	// hardware-suspect. M, N: GPUs and hosts a coarse signature must span to
	// be software-suspect.
	K, M, N int
}

func (o *Options) defaults() {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Since.IsZero() {
		o.Since = o.Now.Add(-o.Window)
	}
	if o.K <= 0 {
		o.K = DefaultK
	}
	if o.M <= 0 {
		o.M = DefaultM
	}
	if o.N <= 0 {
		o.N = DefaultN
	}
}

// Bucket is one fine signature's bundles.
type Bucket struct {
	Signature string    `json:"signature"` // the fine hash
	Coarse    string    `json:"coarse"`
	Version   int       `json:"version"`
	Title     string    `json:"title"`
	Count     int       `json:"count"` // members since Since
	Total     int       `json:"total"` // members ever seen
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	New       bool      `json:"new"`
	Hosts     []string  `json:"hosts"`
	GPUs      []string  `json:"gpus"`
	Jobs      []string  `json:"jobs"`
	Ranks     []string  `json:"ranks"`
	Stacks    []string  `json:"stacks"`
	Class     string    `json:"class"`
	Reason    string    `json:"reason"`
	Counts    Counts    `json:"counts"`
	// Component is what a software-suspect bucket's members share and other
	// bundles lack: "sglang=0.5.3".
	Component string `json:"component,omitempty"`
	// Previous are the older signatures ("v<version>:<fine>") its members
	// had before a version bump or --recompute: a ticket filed under one of
	// them is about this bucket now.
	Previous []string `json:"previous,omitempty"`
}

// Counts are the numbers a class rests on, counted in the window.
type Counts struct {
	Members      int `json:"members"`
	GPUs         int `json:"gpus"`
	Hosts        int `json:"hosts"`
	CoarseGPUs   int `json:"coarse_gpus"`   // GPUs not hardware-suspect with this coarse signature
	CoarseHosts  int `json:"coarse_hosts"`  // their hosts
	HardwareGPUs int `json:"hardware_gpus"` // member GPUs that are hardware-suspect
}

// GPU is one device's faults in the window.
type GPU struct {
	ID      string   `json:"id"`
	Host    string   `json:"host"`
	Name    string   `json:"name,omitempty"`
	BusID   string   `json:"bus_id,omitempty"`
	Serial  string   `json:"serial,omitempty"`
	Guessed bool     `json:"guessed,omitempty"`
	Faults  int      `json:"faults"`
	Coarse  int      `json:"coarse_signatures"`
	Stacks  int      `json:"stacks"`
	Buckets []string `json:"buckets"`
	Class   string   `json:"class"`
	Reason  string   `json:"reason"`
}

// Report is the grouping of a set of summaries.
type Report struct {
	Now     time.Time `json:"now"`
	Since   time.Time `json:"since"`
	Window  string    `json:"window"`
	K       int       `json:"k"`
	M       int       `json:"m"`
	N       int       `json:"n"`
	Bundles int       `json:"bundles"`
	Buckets []Bucket  `json:"buckets"`
	GPUs    []GPU     `json:"gpus"`
}

type sigKey struct {
	version int
	hash    string
}

// Group buckets the summaries and classes buckets and GPUs.
func Group(sums []index.Summary, o Options) Report {
	now, from := o.ViewRange()
	return GroupView(index.ViewOf(sums, now, from), o)
}

// ViewRange is the now and from of the index.View that GroupView needs:
// from is the earlier of Since and the window's start.
func (o Options) ViewRange() (now, from time.Time) {
	o.defaults()
	return o.Now, minTime(o.Since, o.Now.Add(-o.Window))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// GroupView buckets a view (index.ViewOf, or a store's View over
// o.ViewRange()) and classes buckets and GPUs.
func GroupView(v index.View, o Options) Report {
	o.defaults()
	rep := Report{Now: o.Now, Since: o.Since, Window: durationText(o.Window), K: o.K, M: o.M, N: o.N}
	from := o.Now.Add(-o.Window)
	inWindow := func(s *index.Summary) bool { return s.Time.After(from) && !s.Time.After(o.Now) }

	sums := unifyGPUs(v.Recent, v.Aliases)
	// The view's recent members by signature (for counts and lists); the
	// store's aggregates over every member up to now give first and last
	// seen, the total and the title.
	byFine := map[sigKey][]*index.Summary{}
	var window []*index.Summary
	// Each summary's stack line, made once (a GPU's and a bucket's rules
	// both count stacks).
	stackLine := make(map[*index.Summary]string, len(sums))
	for i := range sums {
		s := &sums[i]
		stackLine[s] = s.StackLine()
		byFine[sigKey{s.SigVersion, s.Fine}] = append(byFine[sigKey{s.SigVersion, s.Fine}], s)
		if inWindow(s) {
			window = append(window, s)
		}
	}

	// GPUs in the window, and their hardware rules.
	gpus := map[string]*gpuAcc{}
	for _, s := range window {
		for _, g := range s.GPUs {
			a := gpus[g.ID]
			if a == nil {
				a = &gpuAcc{GPU: GPU{ID: g.ID, Host: s.Host, Name: g.Name, BusID: g.BusID, Serial: g.Serial, Guessed: g.Guessed}}
				gpus[g.ID] = a
			}
			a.Faults++
			a.coarse = addOnce(a.coarse, sigKey{s.SigVersion, s.Coarse})
			a.fine = addOnce(a.fine, sigKey{s.SigVersion, s.Fine})
			a.stacks = addOnce(a.stacks, stackLine[s])
			if s.SigClass == "hardware" {
				a.hwRecord = s.Title
			}
		}
	}
	for _, a := range gpus {
		a.Coarse, a.Stacks = len(a.coarse), len(a.stacks)
		switch {
		case a.hwRecord != "":
			a.Class, a.Reason = Hardware, "hardware record: "+a.hwRecord
		case !a.Guessed && a.Faults >= o.K && (a.Coarse >= 2 || a.Stacks >= 2):
			a.Class, a.Reason = Hardware, fmt.Sprintf("%d faults (≥ k=%d) under %d coarse signatures and %d software stacks", a.Faults, o.K, a.Coarse, a.Stacks)
		}
	}

	// Coarse signatures' spread in the window, over GPUs not already
	// hardware-suspect: faults of GPUs that are explained as bad hardware
	// are no evidence that the software is at fault.
	byCoarse := map[sigKey]*spread{}
	for _, s := range window {
		k := sigKey{s.SigVersion, s.Coarse}
		sp := byCoarse[k]
		if sp == nil {
			sp = &spread{map[string]bool{}, map[string]bool{}}
			byCoarse[k] = sp
		}
		for _, g := range s.GPUs {
			if a := gpus[g.ID]; a == nil || a.Class != Hardware {
				sp.gpus[g.ID] = true
				sp.hosts[s.Host] = true
			}
		}
	}

	for _, sig := range v.Signatures {
		k := sigKey{sig.Version, sig.Fine}
		b := Bucket{Signature: k.hash, Version: k.version, Total: sig.Total, FirstSeen: sig.First, LastSeen: sig.Last}
		var listed, inWin []*index.Summary
		for _, s := range byFine[k] {
			if !s.Time.Before(o.Since) {
				listed = append(listed, s)
			}
			if inWindow(s) {
				inWin = append(inWin, s)
			}
		}
		if len(listed) == 0 {
			continue
		}
		b.Title, b.Coarse = sig.Title, sig.Coarse
		b.Count, b.New = len(listed), !b.FirstSeen.Before(o.Since)
		hosts, gpuIDs, jobs, ranks, stacks := set{}, set{}, set{}, set{}, set{}
		for _, s := range listed {
			hosts.add(s.Host)
			for _, g := range s.GPUs {
				gpuIDs.add(g.ID)
			}
			jobs.add(s.Job)
			if s.Rank != "" {
				ranks.add(s.Job + ":" + s.Rank)
			}
			stacks.add(stackLine[s])
		}
		b.Hosts, b.GPUs, b.Jobs, b.Ranks, b.Stacks = hosts.list(), gpuIDs.list(), jobs.list(), ranks.list(), stacks.list()
		prev := set{}
		for _, s := range byFine[k] {
			for _, p := range s.Previous {
				prev.add(p)
			}
		}
		b.Previous = prev.list()
		classify(&b, inWin, window, gpus, byCoarse[sigKey{k.version, b.Coarse}], o, sig.SigClass, !sig.Evidence)
		rep.Buckets = append(rep.Buckets, b)
	}
	for _, a := range gpus {
		if a.Class == "" {
			a.Class, a.Reason = Undetermined, fmt.Sprintf("%d faults under %d coarse signatures and %d stacks", a.Faults, a.Coarse, a.Stacks)
			soft := 0
			for _, b := range rep.Buckets {
				if slices.Contains(a.fine, sigKey{b.Version, b.Signature}) && b.Class == Software {
					soft++
				}
			}
			if soft > 0 && soft == len(a.fine) {
				a.Class, a.Reason = Software, "every fault is in a software-suspect bucket"
			}
		}
		for _, b := range rep.Buckets {
			if slices.Contains(a.fine, sigKey{b.Version, b.Signature}) {
				a.Buckets = append(a.Buckets, b.Signature)
			}
		}
		rep.GPUs = append(rep.GPUs, a.GPU)
	}
	rep.Bundles = v.Bundles
	sort.Slice(rep.Buckets, func(i, j int) bool {
		a, b := rep.Buckets[i], rep.Buckets[j]
		return cmp.Or(cmp.Compare(b.Count, a.Count), b.LastSeen.Compare(a.LastSeen), cmp.Compare(a.Signature, b.Signature)) < 0
	})
	sort.Slice(rep.GPUs, func(i, j int) bool {
		a, b := rep.GPUs[i], rep.GPUs[j]
		return cmp.Or(cmp.Compare(classRank(a.Class), classRank(b.Class)), cmp.Compare(b.Faults, a.Faults), cmp.Compare(a.ID, b.ID)) < 0
	})
	return rep
}

// unifyGPUs gives one device one ID: a record that printed only the bus id
// (Xid 13 lines carry no UUID) names the GPU another record on the same
// host named by UUID or serial (aliases, index.View's). The summaries are
// copied, not changed.
func unifyGPUs(sums []index.Summary, alias map[string]string) []index.Summary {
	if len(alias) == 0 {
		return sums
	}
	out := make([]index.Summary, len(sums))
	for i, s := range sums {
		out[i] = s
		cloned := false
		for j, g := range s.GPUs {
			if id, ok := alias[g.ID]; ok {
				if !cloned {
					out[i].GPUs, cloned = slices.Clone(s.GPUs), true
				}
				out[i].GPUs[j].ID = id
			}
		}
	}
	return out
}

// durationText writes whole days as "7d".
func durationText(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func classRank(c string) int {
	switch c {
	case Hardware:
		return 0
	case Software:
		return 1
	}
	return 2
}

// spread is where one coarse signature was seen in the window.
type spread struct{ gpus, hosts map[string]bool }

// gpuAcc is one GPU's faults. A GPU has a few, so its distinct
// signatures and stacks are short lists, not maps: a window has thousands
// of GPUs.
type gpuAcc struct {
	GPU
	coarse, fine []sigKey
	stacks       []string
	hwRecord     string
}

// addOnce appends v unless l has it.
func addOnce[T comparable](l []T, v T) []T {
	if slices.Contains(l, v) {
		return l
	}
	return append(l, v)
}

// classify applies the bucket rules in order: a hardware record; spread
// over GPUs and hosts (software); concentration on hardware-suspect GPUs;
// else undetermined.
func classify(b *Bucket, inWin, window []*index.Summary, gpus map[string]*gpuAcc, sp *spread, o Options, sigClass string, noEvidence bool) {
	c := &b.Counts
	c.Members = len(inWin)
	hosts, ids := set{}, set{}
	for _, s := range inWin {
		hosts.add(s.Host)
		for _, g := range s.GPUs {
			ids.add(g.ID)
			if a := gpus[g.ID]; a != nil && a.Class == Hardware {
				c.HardwareGPUs++
			}
		}
	}
	c.GPUs, c.Hosts = len(ids), len(hosts)
	if sp != nil {
		c.CoarseGPUs, c.CoarseHosts = len(sp.gpus), len(sp.hosts)
	}
	switch {
	case noEvidence:
		b.Class, b.Reason = Undetermined, "no crash evidence in its bundles (verdict unknown): nothing to class"
	case sigClass == "hardware":
		b.Class, b.Reason = Hardware, "the record is a hardware fault"
	case sigClass == "software":
		b.Class, b.Reason = Software, "the record names a software cause"
	case c.CoarseGPUs >= o.M && c.CoarseHosts >= o.N:
		b.Class = Software
		b.Reason = fmt.Sprintf("its coarse signature is on %d GPUs (≥ m=%d) of %d hosts (≥ n=%d)", c.CoarseGPUs, o.M, c.CoarseHosts, o.N)
		if comp, why := sharedComponent(b.Coarse, b.Version, window); comp != "" {
			b.Component = comp
			b.Reason += "; " + why
		}
	case c.Members > 0 && 2*c.HardwareGPUs > c.Members:
		b.Class = Hardware
		b.Reason = fmt.Sprintf("%d of %d faults on hardware-suspect GPUs", c.HardwareGPUs, c.Members)
	default:
		b.Class = Undetermined
		b.Reason = fmt.Sprintf("%d faults on %d GPUs of %d hosts; coarse signature on %d GPUs of %d hosts", c.Members, c.GPUs, c.Hosts, c.CoarseGPUs, c.CoarseHosts)
	}
}

// sharedComponent is the stack component (name=version) that every bundle
// of the coarse signature has and the fewest other bundles of the window
// have: the upgrade that brought the bug.
func sharedComponent(coarse string, version int, window []*index.Summary) (string, string) {
	var members, others []*index.Summary
	for _, s := range window {
		if s.Coarse == coarse && s.SigVersion == version {
			members = append(members, s)
		} else {
			others = append(others, s)
		}
	}
	if len(members) == 0 {
		return "", ""
	}
	share := func(list []*index.Summary, k, v string) float64 {
		if len(list) == 0 {
			return 0
		}
		n := 0
		for _, s := range list {
			if s.Stack[k] == v {
				n++
			}
		}
		return float64(n) / float64(len(list))
	}
	best, bestOut := "", 2.0
	var keys []string
	for k := range members[0].Stack {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := members[0].Stack[k]
		if share(members, k, v) < 1 {
			continue
		}
		if out := share(others, k, v); out < bestOut {
			best, bestOut = k+"="+v, out
		}
	}
	if best == "" || (len(others) > 0 && bestOut >= 1) {
		return "", ""
	}
	return best, fmt.Sprintf("all %d of its bundles have %s, %.0f%% of the %d others", len(members), best, 100*bestOut, len(others))
}

type set map[string]bool

func (s set) add(v string) {
	if v != "" {
		s[v] = true
	}
}

func (s set) list() []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
