package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/report"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// reportOptions are `kcrash report`'s arguments.
type reportOptions struct {
	IO     *streams
	bundle string // a bundle file, an extracted bundle, or a directory of bundles (the newest)
	out    string // "" or "-": stdout
}

func newReportCmd(s *streams, runF func(*reportOptions) error) *cobra.Command {
	o := &reportOptions{IO: s}
	c := &cobra.Command{
		Use:   "report BUNDLE [-o FILE]",
		Short: "Write a bundle as one self-contained HTML page (verdict, evidence, timelines)",
		Long: `Render a bundle as one HTML page: the verdict and its evidence, next steps, and on
one time axis the VRAM of each GPU, host and cgroup memory, the process tree's
lifelines, kernel events and the last kernel-API calls; then the output tail,
the kernel messages and the collectors' statuses. The page loads nothing and
works without JavaScript: open it in any browser, attach it to a ticket.
Every bundle already carries the same page as report.html.

BUNDLE is a bundle file, an extracted bundle directory, or a directory of
bundles (the newest is used). Without -o the page goes to stdout, unless
stdout is a terminal.`,
		Example: `  kcrash report kcrash-bundles/kcrash-20260502T142110Z-node7-4242.tar.gz -o crash.html
  kcrash report kcrash-bundles/ > newest.html`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("report: give one bundle (usage: kcrash report BUNDLE [-o FILE])")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			boundReaderHeap()
			o.bundle = args[0]
			if runF != nil {
				return runF(o)
			}
			return runReport(o)
		},
	}
	c.Flags().StringVarP(&o.out, "output", "o", "", "write the page to `FILE` (- for stdout)")
	return c
}

func init() { register(func(s *streams) *cobra.Command { return newReportCmd(s, nil) }) }

func runReport(o *reportOptions) error {
	s := o.IO
	path, err := report.Resolve(o.bundle)
	if err != nil {
		return err
	}
	if o.out == "" && isTerminal(s.Out) {
		return usagef("report: not writing HTML to a terminal; use -o FILE, or redirect stdout")
	}
	in, err := report.Load(path)
	if err != nil {
		return err
	}
	var page bytes.Buffer
	if err := report.Write(&page, in); err != nil {
		return err
	}
	if o.out == "" || o.out == "-" {
		_, err := s.Out.Write(page.Bytes())
		return err
	}
	if err := writeFileAtomic(o.out, page.Bytes(), 0o640); err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "kcrash: report of %s written to %s (%s)\n", visible.Line(path), visible.Line(o.out), human.Bytes(int64(page.Len())))
	return nil
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// writeFileAtomic writes data to a temporary file beside name, then renames
// it over name: a reader never sees half a page.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
