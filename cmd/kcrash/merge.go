package main

import (
	"bytes"
	"fmt"
	"os"
	"unicode/utf8"

	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/merge"
	"github.com/kcrash/kcrash/report"
	"github.com/spf13/cobra"
)

// k8sTerminationLog is where Kubernetes reads a container's termination
// message (terminationMessagePath's default).
const k8sTerminationLog = "/dev/termination-log"

// terminationLogMax is the most Kubernetes keeps of a termination message.
const terminationLogMax = 4096

type mergeOptions struct {
	IO     *streams
	Inputs []string // bundles and directories
	JSON   bool     // --json
	// TermLog is where the one-line verdict also goes; TermLogGiven: the
	// user named it (created then; the default is used only when it exists).
	TermLog      string
	TermLogGiven bool
	HTML         string // --html FILE, "-" for stdout
}

func init() { register(func(s *streams) *cobra.Command { return newMergeCmd(s, nil) }) }

func newMergeCmd(s *streams, runF func(*mergeOptions) error) *cobra.Command {
	o := &mergeOptions{IO: s}
	c := &cobra.Command{
		Use:   "merge BUNDLE_OR_DIR...",
		Short: "One timeline across ranks and nodes: which rank failed first, and why",
		Long: `Read the bundles of one job (files, or directories searched for kcrash-*.tar.gz)
and line them up: each rank's verdict and first abnormal evidence, and the
first failure, the rank whose root-cause evidence came first. Ranks whose
verdict is only a symptom of another's failure (a collective timeout, a
sigquit from a child) are marked secondary, even when they exited first.

In a Kubernetes pod (` + k8sTerminationLog + ` writable), or with
--termination-log, the one-line verdict is also written there.`,
		Example: `  kcrash merge /shared/kcrash/job-1234/
  kcrash merge --json node-*/kcrash-*.tar.gz | jq .first_failure`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("merge: no bundles given (usage: kcrash merge BUNDLE_OR_DIR...)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			boundReaderHeap()
			if o.JSON && o.HTML == "-" {
				return usagef("merge: --json and --html - both want stdout")
			}
			o.Inputs, o.TermLogGiven = args, cmd.Flags().Changed("termination-log")
			if runF != nil {
				return runF(o)
			}
			return mergeRun(o)
		},
	}
	c.Flags().BoolVar(&o.JSON, "json", false, "print SPEC §6's JSON object")
	c.Flags().StringVar(&o.HTML, "html", "", "also write the ranks on one time axis, first failure marked, as a self-contained HTML page to `FILE` (- for stdout, instead of the table)")
	c.Flags().StringVar(&o.TermLog, "termination-log", k8sTerminationLog, "also write the one-line verdict to `PATH` (by default only when it exists and is writable)")
	return c
}

func mergeRun(o *mergeOptions) error {
	s := o.IO
	paths, skipped, err := merge.Paths(o.Inputs)
	for _, e := range skipped {
		fmt.Fprintf(s.Err, "kcrash: skipped %s\n", visible.Line(e.Error()))
	}
	if err != nil {
		return err
	}
	r, err := merge.Merge(paths)
	if err != nil {
		return err
	}
	for _, e := range r.Skipped {
		fmt.Fprintf(s.Err, "kcrash: skipped %s\n", visible.Line(e.Error()))
	}
	if o.HTML != "" {
		var page bytes.Buffer
		if err := report.WriteMerge(&page, r); err != nil {
			return err
		}
		if o.HTML == "-" {
			if _, err := s.Out.Write(page.Bytes()); err != nil {
				return err
			}
		} else if err := writeFileAtomic(o.HTML, page.Bytes(), 0o640); err != nil {
			return fmt.Errorf("--html: %v", err)
		}
	}
	if o.HTML == "-" {
		// the page is stdout
	} else if o.JSON {
		if err := writeJSON(s.Out, r); err != nil {
			return err
		}
	} else if err := r.WriteTable(s.Out); err != nil {
		return err
	}
	if o.TermLog != "" {
		if err := writeTerminationLog(o.TermLog, "kcrash: "+r.Line(), o.TermLogGiven); err != nil {
			return fmt.Errorf("--termination-log: %v", err)
		}
	}
	return nil
}

// writeTerminationLog replaces the file's content with line. The default
// path is used only when it already exists and is writable, so that kcrash
// never creates a file under /dev outside a pod; an explicit path is created.
func writeTerminationLog(path, line string, explicit bool) error {
	flags := os.O_WRONLY | os.O_TRUNC
	if explicit {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		if explicit {
			return err
		}
		return nil
	}
	if len(line) > terminationLogMax-1 {
		n := terminationLogMax - 1
		for n > 0 && !utf8.RuneStart(line[n]) {
			n--
		}
		line = line[:n]
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if !explicit {
		return nil // best effort: the merge itself succeeded
	}
	return err
}
