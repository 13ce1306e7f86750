package main

import (
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/spf13/cobra"
)

func init() {
	register(func(s *streams) *cobra.Command {
		var config string
		c := &cobra.Command{
			Use:   "profiles",
			Short: "List the environment profiles and the variables each sets",
			Long: `List the environment profiles of ` + "`kcrash run --profile`" + `. Profiles compose
(--profile sglang,rocm-sync); a variable the user already set is left alone
unless --env names it. {workdir} is the run's work directory, {level} is --level.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, err := loadConfig(config)
				if err != nil {
					return err
				}
				ps, err := configs.Profiles(cfg.Profiles)
				if err != nil {
					return err
				}
				for i, name := range configs.ProfileNames(ps) {
					p := ps[name]
					if i > 0 {
						fmt.Fprintln(s.Out)
					}
					def := ""
					if name == configs.DefaultProfile {
						def = " (default)"
					}
					fmt.Fprintf(s.Out, "%s%s: %s\n", name, def, p.Description)
					keys := make([]string, 0, len(p.Env))
					for k := range p.Env {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					for _, k := range keys {
						fmt.Fprintf(s.Out, "  %s=%s\n", k, p.Env[k])
					}
					for _, l := range p.Logs {
						fmt.Fprintf(s.Out, "  kernel-API logs: %s\n", l)
					}
				}
				return nil
			},
		}
		configFlag(c, &config)
		return c
	})
	register(func(s *streams) *cobra.Command {
		return &cobra.Command{
			Use:   "collectors",
			Short: "List the evidence collectors and whether each is on by default",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				tw := tabwriter.NewWriter(s.Out, 2, 8, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tDEFAULT\tWHAT")
				for _, c := range collectors.All() {
					def := "off"
					if c.Default {
						def = "on"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, def, c.Description)
				}
				return tw.Flush()
			},
		}
	})
}

func hasCollector(name string) bool {
	for _, c := range collectors.All() {
		if c.Name == name {
			return true
		}
	}
	return false
}
