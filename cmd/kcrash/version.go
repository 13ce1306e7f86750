package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func init() {
	register(func(s *streams) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print kcrash's version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				fmt.Fprintf(s.Out, "kcrash %s %s/%s %s\n", version, runtime.GOOS, runtime.GOARCH, runtime.Version())
				return nil
			},
		}
	})
}
