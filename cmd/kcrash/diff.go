package main

import (
	"fmt"

	"github.com/kcrash/kcrash/calldiff"
	"github.com/kcrash/kcrash/internal/gzcap"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/spf13/cobra"
)

type diffOptions struct {
	IO        *streams
	a, b      string // the two runs: bundles or kernel-API logs
	asJSON    bool
	window    int
	maxEdits  int
	magnitude float64
	maxLog    byteSize
}

func newDiffOptions() *diffOptions {
	return &diffOptions{window: calldiff.DefaultWindow, maxEdits: calldiff.DefaultMaxEdits, magnitude: calldiff.DefaultMagnitude, maxLog: gzcap.Default}
}

func init() { register(func(s *streams) *cobra.Command { return newDiffCmd(s, nil) }) }

func newDiffCmd(s *streams, runF func(*diffOptions) error) *cobra.Command {
	o := newDiffOptions()
	o.IO = s
	c := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two runs call by call: first divergence, missing calls, shape/dtype/statistics differences",
		Long: `Compare the kernel-API calls of two runs. A and B are each a kcrash bundle or a
kernel-API log (SGLang or FlashInfer, plain or .gz). Per process, the last
--window calls before each run's end are aligned with a sequence diff on API
names, and the whole-run call counts are compared. Printed: the first
divergence, calls one run made and the other did not (a missing expected call
means another code path was taken), argument shape/dtype differences between
aligned calls (the first is the shape jump), at level 5 statistics that turn
non-finite or jump by orders of magnitude, and both verdicts. The logs are
streamed, so gigabyte logs compare in bounded memory.`,
		Example: `  kcrash diff good.tar.gz bad.tar.gz
  kcrash diff kapi_good.log.gz kcrash-bundles/kcrash-20260502T140732Z-node1-4242.tar.gz --json`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("diff: want two runs, got %d (usage: kcrash diff A B)", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			boundReaderHeap()
			o.a, o.b = args[0], args[1]
			if runF != nil {
				return runF(o)
			}
			return runDiff(o)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.asJSON, "json", false, "print the comparison as JSON")
	f.IntVar(&o.window, "window", o.window, "how many of each process's last calls to align")
	f.IntVar(&o.maxEdits, "max-edits", o.maxEdits, "give up aligning windows that differ in more places than this")
	f.Float64Var(&o.magnitude, "magnitude", o.magnitude, "factor between aligned statistics reported as a jump")
	f.Var(&o.maxLog, "max-log-bytes", "the most a gzipped log may decompress to (`SIZE`)")
	return c
}

func runDiff(o *diffOptions) error {
	s, a, b := o.IO, o.a, o.b
	// The bounds keep memory bounded: a window's calls with their arguments,
	// and the alignment's trace of max-edits² ints.
	if o.window <= 0 || o.window > 50000 {
		return usagef("diff: --window %d: want 1 to 50000 calls", o.window)
	}
	if o.maxEdits <= 0 || o.maxEdits > 4000 {
		return usagef("diff: --max-edits %d: want 1 to 4000", o.maxEdits)
	}
	if o.magnitude <= 1 {
		return usagef("diff: --magnitude %g: want a factor above 1", o.magnitude)
	}
	r, err := calldiff.Compare(a, b, calldiff.Options{Window: o.window, MaxEdits: o.maxEdits, Magnitude: o.magnitude, MaxLogBytes: int64(o.maxLog)})
	if err != nil {
		return fmt.Errorf("diff: %s", visible.Line(err.Error()))
	}
	if o.asJSON {
		return writeJSON(s.Out, r)
	}
	calldiff.WriteText(s.Out, r, visible.Line)
	return nil
}
