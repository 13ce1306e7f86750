package main

import (
	"fmt"
	"sort"

	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/spf13/cobra"
)

type profilesOptions struct {
	IO     *streams
	Config string // --config
}

func init() { register(func(s *streams) *cobra.Command { return newProfilesCmd(s, nil) }) }

func newProfilesCmd(s *streams, runF func(*profilesOptions) error) *cobra.Command {
	o := &profilesOptions{IO: s}
	c := &cobra.Command{
		Use:   "profiles",
		Short: "List the environment profiles and the variables each sets",
		Long: `List the environment profiles of ` + "`kcrash run --profile`" + `. Profiles compose
(--profile sglang,rocm-sync); a variable the user already set is left alone
unless --env names it. {workdir} is the run's work directory, {level} is --level.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(o)
			}
			return profilesRun(o)
		},
	}
	configFlag(c, &o.Config)
	return c
}

// profilesRun prints the built-in profiles and the config file's.
func profilesRun(o *profilesOptions) error {
	cfg, err := loadConfig(o.Config)
	if err != nil {
		return err
	}
	ps, err := configs.Profiles(cfg.Profiles)
	if err != nil {
		return err
	}
	w := o.IO.Out
	for i, name := range configs.ProfileNames(ps) {
		p := ps[name]
		if i > 0 {
			fmt.Fprintln(w)
		}
		def := ""
		if name == configs.DefaultProfile {
			def = " (default)"
		}
		fmt.Fprintf(w, "%s%s: %s\n", name, def, p.Description)
		keys := make([]string, 0, len(p.Env))
		for k := range p.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s=%s\n", k, p.Env[k])
		}
		for _, l := range p.Logs {
			fmt.Fprintf(w, "  kernel-API logs: %s\n", l)
		}
		if p.PythonStacks {
			fmt.Fprintf(w, "  Python stacks of a hang: kcrash's sitecustomize.py first on PYTHONPATH registers a faulthandler dump on signal %d\n", int(collectors.PyStacksSignal))
		}
	}
	return nil
}
