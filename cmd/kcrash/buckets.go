package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kcrash/kcrash/crashsig"
	"github.com/kcrash/kcrash/fleet/bucket"
	"github.com/kcrash/kcrash/fleet/drain"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/fleet/index/sqlstore"
	"github.com/kcrash/kcrash/fleet/source"
	"github.com/kcrash/kcrash/report"
)

type bucketsOptions struct {
	IO       *streams
	sources  []string
	since    days
	window   days
	k, m, n  int
	asJSON   bool
	html     string
	index    string
	now      string // a fixed "now" (RFC 3339), for reproducible reports
	maxTitle int
	act      bucketsActions
	// recompute reads every indexed bundle again; diff prints where older
	// signatures' bundles are now.
	recompute, diff bool
}

func init() { register(func(s *streams) *cobra.Command { return newBucketsCmd(s, nil) }) }

func newBucketsCmd(s *streams, runF func(*bucketsOptions) error) *cobra.Command {
	o := &bucketsOptions{IO: s, since: days(bucket.DefaultWindow), window: days(bucket.DefaultWindow)}
	c := &cobra.Command{
		Use:   "buckets [SOURCE...] [--since D] [--window D] [-k K -m M -n N] [--index FILE|URL] [--json] [--html FILE] [--drain [--apply]] [--textfile-dir DIR]",
		Short: "Count bundles from many nodes by crash signature, and say which look like hardware and which like software",
		Long: fmt.Sprintf(`Read every bundle under the SOURCEs (bundle files, directories searched
recursively, tarballs of bundles, s3://bucket/prefix through the AWS SDK's
standard credentials and endpoint settings) and group them by crash signature (version
%d; see "kcrash signature"). Per bucket: signature, title, count, first and
last seen, hosts, GPUs, jobs and ranks, the software stacks seen, and a class:

  hardware-suspect  the record is a hardware fault (Xid 48/79/94/95/154, amdgpu
                    RAS), or most of its faults are on GPUs with >= k faults
                    under >= 2 coarse signatures or >= 2 software stacks
  software-suspect  its coarse signature is on >= m GPUs of >= n hosts; the
                    stack component all its bundles share and the others lack
                    is named (the upgrade)
  undetermined      neither; the counts say how far it is from each

Classes count what happened in the --window before now. Buckets with a bundle
since --since are listed; "new" marks those first seen since then.
With --index FILE, summaries are kept in a SQLite file between runs and a
file already read (same size and time) is not opened again: a daily run over
a growing directory reads only the new bundles. With --index postgres://URL
they are kept in a PostgreSQL database that many nodes write to at once; with
an index, the SOURCEs may be left out to report from the index alone.
Durations take d (days), h, m.

After a change of signature version, indexed bundles of the old version are
read again and each bucket lists the older signatures of its bundles
(--diff: where each older signature's bundles are now); --recompute computes
every signature anew.

Acting on it, opt-in: --drain says which Slurm nodes hold hardware-suspect
GPUs and the drain it would set (dry run); --drain --apply drains them with
scontrol (reason "kcrash: [hardware] GPU <serial>: N faults, <titles>"),
never over a drain that is already set. --textfile-dir DIR writes the
bucket counts for node_exporter's textfile collector (kcrash-buckets.prom).

Exit 0 when the report was made, 1 when a SOURCE cannot be read or a drain
or the metrics file failed (the report is still printed).`, crashsig.Version),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sources = args
			if len(args) == 0 && o.index == "" {
				return usagef("buckets: name a SOURCE, or an --index to report from")
			}
			if o.k < 1 || o.m < 1 || o.n < 1 {
				return usagef("buckets: -k, -m and -n must be at least 1")
			}
			if err := o.act.check(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return runBuckets(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.Var(&o.since, "since", "list buckets seen since `D` ago; \"new\" = first seen since then")
	f.Var(&o.window, "window", "the class rules count faults of the last `D`")
	f.IntVarP(&o.k, "k", "k", bucket.DefaultK, "faults a GPU needs (under >= 2 signatures or stacks) to be hardware-suspect")
	f.IntVarP(&o.m, "m", "m", bucket.DefaultM, "GPUs a coarse signature must span to be software-suspect")
	f.IntVarP(&o.n, "n", "n", bucket.DefaultN, "hosts a coarse signature must span to be software-suspect")
	f.BoolVar(&o.asJSON, "json", false, `print {"buckets": [...], "gpus": [...]}`)
	f.StringVar(&o.html, "html", "", "also write the report as a self-contained HTML page to `FILE`")
	f.StringVar(&o.index, "index", "", "keep bundle summaries in the SQLite `FILE` or the PostgreSQL database at a postgres:// URL: only bundles not read before are opened")
	f.BoolVar(&o.recompute, "recompute", false, "compute every signature anew from its bundle's triage (with --index: read every indexed bundle again)")
	f.BoolVar(&o.diff, "diff", false, "print where the bundles of older signatures (before a version bump or --recompute) are now")
	o.act.flags(f)
	f.StringVar(&o.now, "now", "", "report as of `TIME` (RFC 3339) instead of now")
	_ = f.MarkHidden("now")
	return c
}

// days is a duration flag that also takes days ("7d", "1.5d").
type days time.Duration

func (d *days) String() string {
	td := time.Duration(*d)
	if td%(24*time.Hour) == 0 {
		return strconv.Itoa(int(td/(24*time.Hour))) + "d"
	}
	return td.String()
}
func (d *days) Type() string { return "duration" }
func (d *days) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		f, err := strconv.ParseFloat(n, 64)
		if err != nil || f <= 0 {
			return fmt.Errorf("%q: want a positive number of days, e.g. 7d", s)
		}
		*d = days(time.Duration(f * float64(24*time.Hour)))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q: want a positive duration, e.g. 7d, 36h", s)
	}
	*d = days(v)
	return nil
}

// bucketsReport is the JSON output: the grouping and what reading cost.
type bucketsReport struct {
	bucket.Report
	Read       int      `json:"read"`       // bundles opened this time
	Skipped    int      `json:"skipped"`    // files the index already had
	Recomputed int      `json:"recomputed"` // signatures computed again
	Errors     []string `json:"errors,omitempty"`
	// Drain is --drain's plan, and with --apply its outcome.
	Drain   []drain.Action `json:"drain,omitempty"`
	Applied bool           `json:"drain_applied,omitempty"`
	// Changes (--diff): each older signature and where its bundles are now.
	Changes []source.Change `json:"changes,omitempty"`
}

func runBuckets(ctx context.Context, o *bucketsOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	now := time.Now()
	if o.now != "" {
		t, err := time.Parse(time.RFC3339, o.now)
		if err != nil {
			return usagef("buckets: --now: %v", err)
		}
		now = t
	}
	opts := bucket.Options{Now: now, Since: now.Add(-time.Duration(o.since)), Window: time.Duration(o.window), K: o.k, M: o.m, N: o.n}
	view, st, err := loadView(ctx, o, opts)
	if err != nil {
		return err
	}
	rep := bucketsReport{Report: bucket.GroupView(view, opts),
		Read: st.Read, Skipped: st.Skipped, Recomputed: st.Recomputed, Errors: st.Errors}
	if o.diff {
		rep.Changes = source.Changes(view.Recent)
	}
	actErr := o.act.run(ctx, &rep)
	if o.html != "" {
		page, err := report.BucketsPage(&rep.Report, rep.Read, rep.Recomputed)
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.html, page, 0o644); err != nil {
			return err
		}
	}
	if o.asJSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
		return actErr
	}
	printBuckets(o.IO, &rep)
	if o.diff {
		printChanges(o.IO, &rep)
	}
	printDrain(o.IO, &rep)
	return actErr
}

// loadView reads the sources; with an index, only files it has not read
// at their current size and time, and the report's view comes from the
// index.
func loadView(ctx context.Context, o *bucketsOptions, opts bucket.Options) (index.View, source.Stats, error) {
	now, from := opts.ViewRange()
	if o.index == "" {
		var sums []index.Summary
		st, err := source.Walk{Recompute: o.recompute, Put: func(s []index.Summary) error { sums = append(sums, s...); return nil }}.Run(ctx, o.sources)
		return index.ViewOf(sums, now, from), st, err
	}
	store, err := sqlstore.Open(ctx, o.index)
	if err != nil {
		return index.View{}, source.Stats{}, err
	}
	defer store.Close()
	var st source.Stats
	if len(o.sources) > 0 {
		if st, err = source.Update(ctx, store, o.sources); err != nil {
			return index.View{}, st, err
		}
	}
	// After a version bump (or with --recompute) the index's older
	// signatures are computed again from their bundles, each remembering the
	// one it had, so old buckets map to new ones instead of lingering apart.
	var stale []index.Summary
	if o.recompute {
		stale, err = store.Summaries(ctx, time.Time{})
	} else {
		stale, err = store.OtherVersions(ctx, crashsig.Version)
	}
	if err != nil {
		return index.View{}, st, err
	}
	if len(stale) > 0 {
		rst, err := source.Recompute(ctx, store, stale, o.recompute)
		st.Read, st.Recomputed, st.Errors = st.Read+rst.Read, st.Recomputed+rst.Recomputed, append(st.Errors, rst.Errors...)
		if err != nil {
			return index.View{}, st, err
		}
	}
	view, err := store.View(ctx, now, from)
	return view, st, err
}

// printChanges prints --diff: each older signature, and the bucket(s) its
// bundles are in now (one: renamed; several: split; shared: merged).
func printChanges(s *streams, rep *bucketsReport) {
	w := s.Out
	if len(rep.Changes) == 0 {
		fmt.Fprintf(w, "\nno bundle had an older signature\n")
		return
	}
	into := map[string]int{}
	for _, c := range rep.Changes {
		for n := range c.New {
			into[n]++
		}
	}
	fmt.Fprintf(w, "\nsignatures before a version bump or --recompute, and where their bundles are now:\n")
	for _, c := range rep.Changes {
		news := make([]string, 0, len(c.New))
		for n := range c.New {
			news = append(news, n)
		}
		sort.Strings(news)
		parts := make([]string, len(news))
		for i, n := range news {
			parts[i] = fmt.Sprintf("%s (%d)", n, c.New[n])
			if into[n] > 1 {
				parts[i] += " merged"
			}
		}
		how := ""
		if len(news) > 1 {
			how = " split"
		}
		fmt.Fprintf(w, "  %s (%d bundles) -> %s%s\n", c.Old, c.Bundles, strings.Join(parts, ", "), how)
	}
}

func printBuckets(s *streams, rep *bucketsReport) {
	w := s.Out
	fmt.Fprintf(w, "%d bundles (%d read now, %d already indexed, %d signatures recomputed); %d buckets since %s; classes over the last %s, k=%d m=%d n=%d\n",
		rep.Bundles, rep.Read, rep.Skipped, rep.Recomputed, len(rep.Buckets), rep.Since.UTC().Format("2006-01-02 15:04 MST"), rep.Window, rep.K, rep.M, rep.N)
	for _, e := range rep.Errors {
		fmt.Fprintf(s.Err, "kcrash: skipped %s\n", e)
	}
	if len(rep.Buckets) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SIGNATURE\tCOUNT\tNEW\tCLASS\tFIRST SEEN\tLAST SEEN\tHOSTS\tGPUS\tTITLE")
	for _, b := range rep.Buckets {
		isNew := ""
		if b.New {
			isNew = "new"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", b.Signature, b.Count, isNew, b.Class,
			b.FirstSeen.UTC().Format("2006-01-02 15:04"), b.LastSeen.UTC().Format("2006-01-02 15:04"), len(b.Hosts), len(b.GPUs), b.Title)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nwhy:\n")
	for _, b := range rep.Buckets {
		fmt.Fprintf(w, "  %s  %s\n", b.Signature, b.Reason)
	}
	var hw []bucket.GPU
	for _, g := range rep.GPUs {
		if g.Class == bucket.Hardware {
			hw = append(hw, g)
		}
	}
	if len(hw) > 0 {
		fmt.Fprintf(w, "\nhardware-suspect GPUs:\n")
		for _, g := range hw {
			where := []string{g.Host}
			for _, x := range []string{g.BusID, g.Name, g.Serial} {
				if x != "" {
					where = append(where, x)
				}
			}
			fmt.Fprintf(w, "  %s (%s): %s\n", g.ID, strings.Join(where, ", "), g.Reason)
		}
	}
}
