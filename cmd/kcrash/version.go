package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
)

type versionOptions struct {
	IO *streams
}

func init() { register(func(s *streams) *cobra.Command { return newVersionCmd(s, nil) }) }

func newVersionCmd(s *streams, runF func(*versionOptions) error) *cobra.Command {
	o := &versionOptions{IO: s}
	return &cobra.Command{
		Use:   "version",
		Short: "Print kcrash's version and what kind of build it is",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(o)
			}
			return versionRun(o)
		},
	}
}

func versionRun(o *versionOptions) error {
	return writeVersion(o.IO.Out, readBuild())
}

// writeVersion prints the build's facts, then, when the build lost
// something, the one line that says what and how to rebuild.
func writeVersion(w io.Writer, b buildFacts) error {
	c := b.Commit
	if c == "" {
		c = "unknown"
	}
	out := fmt.Sprintf("kcrash %s %s/%s\ncommit: %s\ngo: %s\nlinked: %s\nsignals at start: %s\n",
		b.Version, runtime.GOOS, runtime.GOARCH, c, b.Go, b.linkLine(), startSignalsLine(b.StartSignals))
	if l := b.lost(); l != "" {
		out += "warning: " + l + "\n"
	}
	_, err := io.WriteString(w, out)
	return err
}

// startSignalsLine says whether this build keeps every signal ignored or
// blocked at start for the child (see supervisor/sigstart_linux.go).
func startSignalsLine(recorded bool) string {
	if recorded {
		return "all kept for the child"
	}
	return "SIGTERM, SIGQUIT, SIGSEGV, SIGILL... not known (built without -tags kcrash_startsignals -ldflags=-checklinkname=0)"
}
