package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kcrash/kcrash/collectors"
)

type doctorOptions struct {
	IO *streams
	// Env is the host the collectors are asked about (its roots).
	Env  *collectors.Env
	JSON bool // --json
	// Build is the running binary's kind (readBuild).
	Build buildFacts
}

func init() { register(func(s *streams) *cobra.Command { return newDoctorCmd(s, nil) }) }

func newDoctorCmd(s *streams, runF func(*doctorOptions) error) *cobra.Command {
	o := &doctorOptions{IO: s}
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Tell which collectors will work on this host, and why not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Env = collectors.NewEnv()
			o.Build = readBuild()
			if runF != nil {
				return runF(o)
			}
			return doctorRun(o)
		},
	}
	c.Flags().BoolVar(&o.JSON, "json", false, "print JSON")
	return c
}

// doctorRun prints every registered collector's answer for the env's roots,
// after a line of its own when this kcrash build lost something (see
// buildFacts.lost): on stderr with --json, which stays a list of checks.
func doctorRun(o *doctorOptions) error {
	checks := collectors.CheckAll(o.Env)
	lost := o.Build.lost()
	if o.JSON {
		if lost != "" {
			fmt.Fprintln(o.IO.Err, "kcrash: "+lost)
		}
		return writeJSON(o.IO.Out, checks)
	}
	if lost != "" {
		fmt.Fprintln(o.IO.Out, "BUILD: "+lost)
	}
	tw := tabwriter.NewWriter(o.IO.Out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "COLLECTOR\tWORKS\tWHY")
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Collector, c.Works, c.Why)
	}
	return tw.Flush()
}
