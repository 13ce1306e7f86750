package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/kcrash/kcrash/collectors"
	"github.com/spf13/cobra"
)

type collectorsOptions struct {
	IO *streams
}

func init() { register(func(s *streams) *cobra.Command { return newCollectorsCmd(s, nil) }) }

func newCollectorsCmd(s *streams, runF func(*collectorsOptions) error) *cobra.Command {
	o := &collectorsOptions{IO: s}
	return &cobra.Command{
		Use:   "collectors",
		Short: "List the evidence collectors and whether each is on by default",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(o)
			}
			return collectorsRun(o)
		},
	}
}

// collectorsRun lists every registered collector.
func collectorsRun(o *collectorsOptions) error {
	tw := tabwriter.NewWriter(o.IO.Out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDEFAULT\tWHAT")
	for _, c := range collectors.All() {
		def := "off"
		if c.Default {
			def = "on"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, def, c.Description)
	}
	return tw.Flush()
}

func hasCollector(name string) bool {
	for _, c := range collectors.All() {
		if c.Name == name {
			return true
		}
	}
	return false
}
