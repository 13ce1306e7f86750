package main

import (
	"fmt"
	"runtime"

	"github.com/kcrash/kcrash/supervisor"

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
		Short: "Print kcrash's version",
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
	_, err := fmt.Fprintf(o.IO.Out, "kcrash %s %s/%s %s\nsignals at start: %s\n", version, runtime.GOOS, runtime.GOARCH, runtime.Version(), startSignalsLine())
	return err
}

// startSignalsLine says whether this build keeps every signal ignored or
// blocked at start for the child (see supervisor/sigstart_linux.go).
func startSignalsLine() string {
	if supervisor.StartSignalsExact() {
		return "all kept for the child"
	}
	return "SIGTERM, SIGQUIT, SIGSEGV, SIGILL... not known (built without -tags kcrash_startsignals -ldflags=-checklinkname=0)"
}
