package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kcrash/kcrash/collectors"
)

func init() {
	register(func(s *streams) *cobra.Command {
		var asJSON bool
		c := &cobra.Command{
			Use:   "doctor",
			Short: "Tell which collectors will work on this host, and why not",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				return runDoctor(s.Out, collectors.NewEnv(), asJSON)
			},
		}
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		return c
	})
}

// runDoctor prints every registered collector's answer for env's roots.
func runDoctor(w io.Writer, env *collectors.Env, asJSON bool) error {
	checks := collectors.CheckAll(env)
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(checks)
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "COLLECTOR\tWORKS\tWHY")
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Collector, c.Works, c.Why)
	}
	return tw.Flush()
}
