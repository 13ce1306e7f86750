package main

import (
	"encoding/json"
	"fmt"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/software"
	"github.com/spf13/cobra"
)

func init() {
	register(func(s *streams) *cobra.Command {
		var asJSON bool
		c := &cobra.Command{
			Use:   "show BUNDLE",
			Short: "Print a bundle's summary (--json: its manifest)",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				b, err := bundle.Open(args[0])
				if err != nil {
					return err
				}
				if asJSON {
					raw, _ := b.File("manifest.json")
					var v any
					if err := json.Unmarshal(raw, &v); err != nil {
						return fmt.Errorf("%s: manifest.json: %v", args[0], err)
					}
					out, err := json.MarshalIndent(v, "", "  ")
					if err != nil {
						return err
					}
					// encoding/json leaves DEL and C1 controls raw
					_, err = s.Out.Write(append(visible.JSON(out), '\n'))
					return err
				}
				sum, ok := b.File("summary.md")
				if !ok {
					for _, n := range b.Names() {
						if n == "summary.md" {
							return fmt.Errorf("%s: summary.md is too large to show; extract it with tar", args[0])
						}
					}
					return fmt.Errorf("%s: no summary.md in the bundle", args[0])
				}
				// A bundle may come from anyone: its text is shown, never
				// interpreted by the terminal.
				_, err = s.Out.Write(visible.Bytes(append(sum, software.BundleLine(b.File)...)))
				return err
			},
		}
		c.Flags().BoolVar(&asJSON, "json", false, "print the manifest as JSON")
		return c
	})
}
