package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/report"
	"github.com/kcrash/kcrash/software"
	"github.com/spf13/cobra"
)

// showOptions are `kcrash show`'s arguments.
type showOptions struct {
	IO      *streams
	bundle  string // a bundle file, or a directory of bundles (the newest)
	asJSON  bool
	list    bool
	extract string
}

// sparkWidth is the sparklines' width in characters.
const sparkWidth = 48

func init() { register(func(s *streams) *cobra.Command { return newShowCmd(s, nil) }) }

func newShowCmd(s *streams, runF func(*showOptions) error) *cobra.Command {
	o := &showOptions{IO: s}
	c := &cobra.Command{
		Use:   "show BUNDLE|DIR",
		Short: "Print a bundle's summary (--json: its manifest; --list, --extract FILE: its files)",
		Long: `Print a bundle's summary: the verdict, then each GPU's VRAM and the host's memory
over the run as sparklines with their exact peaks, the evidence and next steps.
DIR means the newest bundle in that directory. --list names the bundle's files,
--extract FILE writes one of them to stdout; neither needs tar.`,
		Example: `  kcrash show kcrash-bundles/
  kcrash show --list kcrash-bundles/kcrash-20260502T142110Z-node7-4242.tar.gz
  kcrash show --extract output.log kcrash-bundles/ | less -R`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			boundReaderHeap()
			o.bundle = args[0]
			if runF != nil {
				return runF(o)
			}
			return showRun(o)
		},
	}
	c.Flags().BoolVar(&o.asJSON, "json", false, "print the manifest as JSON")
	c.Flags().BoolVar(&o.list, "list", false, "list the bundle's files and their sizes")
	c.Flags().StringVar(&o.extract, "extract", "", "write the bundle's `FILE` (as --list names it) to stdout")
	return c
}

func showRun(o *showOptions) error {
	s := o.IO
	n := 0
	for _, on := range []bool{o.asJSON, o.list, o.extract != ""} {
		if on {
			n++
		}
	}
	if n > 1 {
		return usagef("show: --json, --list and --extract go one at a time")
	}
	if fi, err := os.Stat(o.bundle); err == nil && fi.IsDir() {
		// a killed kcrash's stage there becomes the newest bundle first
		recoverStages(s, captureConfig(nil, o.bundle, 0, 0), false)
	}
	path, err := report.Resolve(o.bundle)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: an extracted bundle; show reads the .tar.gz (its files are already here)", path)
	}
	if o.bundle != path {
		fmt.Fprintf(s.Err, "kcrash: showing %s, the newest bundle in %s\n", visible.Line(path), visible.Line(o.bundle))
	}
	switch {
	case o.list:
		ents, err := report.List(path)
		if err != nil {
			return err
		}
		// A fixed width (human.Bytes is at most "999.9 MB") rather than a
		// tabwriter, which would hold the whole listing in memory.
		w := bufio.NewWriter(s.Out)
		for _, e := range ents {
			fmt.Fprintf(w, "%10s  %s\n", human.Bytes(e.Size), visible.Line(e.Name))
		}
		return w.Flush()
	case o.extract != "":
		// raw bytes into a file or a pipe; to a terminal, escapes shown, never run
		return report.Extract(path, o.extract, s.Out, isTerminal(s.Out))
	}
	if o.asJSON {
		// the manifest alone, printed as it is read: decoded whole, a
		// 16 MiB manifest would take several times that
		b, err := bundle.OpenManifest(path)
		if err != nil {
			return err
		}
		raw, _ := b.File("manifest.json")
		if err := writeJSONStream(s.Out, bytes.NewReader(raw)); err != nil {
			return fmt.Errorf("%s: manifest.json: %v", path, err)
		}
		return nil
	}
	in, err := report.Load(path)
	if err != nil {
		return err
	}
	sum, ok := in.File("summary.md")
	if !ok {
		if in.Has("summary.md") {
			return fmt.Errorf("%s: summary.md is too large to show here; kcrash show --extract summary.md %s | less", path, path)
		}
		return fmt.Errorf("%s: no summary.md in the bundle", path)
	}
	// A bundle may come from anyone: its text is shown, never interpreted
	// by the terminal.
	return writeSummary(s.Out, string(visible.Bytes(append(sum, software.BundleLine(in.File)...))), report.Sparklines(in, sparkWidth))
}

// writeSummary prints summary.md with the sparklines right under the
// verdict paragraph.
func writeSummary(w io.Writer, sum string, spark []string) error {
	if len(spark) > 0 {
		block := "```\n" + visible.String(strings.Join(spark, "\n")) + "\n```\n\n"
		i := strings.Index(sum, "**Verdict:**")
		if j := strings.Index(sum[max(i, 0):], "\n\n"); i >= 0 && j >= 0 {
			at := i + j + 2
			sum = sum[:at] + block + sum[at:]
		} else {
			sum += "\n" + block
		}
	}
	_, err := io.WriteString(w, sum)
	return err
}
