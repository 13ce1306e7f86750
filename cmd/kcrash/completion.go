package main

import (
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
)

// flagValues are the values shell completion offers for the flags that take
// one of a known set, whichever command has them. A list flag completes its
// last comma-separated element.
var flagValues = map[string]struct {
	list   bool
	values func() []string
}{
	"profile":         {true, profileNames},
	"collect":         {false, func() []string { return []string{"crash", "always", "never"} }},
	"collectors":      {true, collectorNames},
	"skip-collectors": {true, collectorNames},
	"hang-action":     {false, func() []string { return []string{"stop", "bundle-only"} }},
	// upload targets: the scheme, then the user types the rest
	"to":     {false, uploadSchemes},
	"upload": {false, uploadSchemes},
}

func uploadSchemes() []string {
	return []string{"jira:", "gitlab:", "github:", "gitea:", "forgejo:", "http://", "https://", "file:"}
}

func profileNames() []string {
	ps, err := configs.Profiles(nil)
	if err != nil {
		return nil
	}
	var names []string
	for n := range ps {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func collectorNames() []string {
	var names []string
	for _, c := range collectors.All() {
		names = append(names, c.Name)
	}
	return names
}

// registerCompletions gives every command's known-set flags their values.
func registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, fv := range flagValues {
			if c.Flags().Lookup(name) == nil {
				continue
			}
			_ = c.RegisterFlagCompletionFunc(name, func(_ *cobra.Command, _ []string, typed string) ([]string, cobra.ShellCompDirective) {
				prefix := ""
				if fv.list {
					if i := strings.LastIndexByte(typed, ','); i >= 0 {
						prefix, typed = typed[:i+1], typed[i+1:]
					}
				}
				var out []string
				for _, v := range fv.values() {
					if strings.HasPrefix(v, typed) {
						out = append(out, prefix+v)
					}
				}
				return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace*boolDirective(fv.list)
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// boolDirective is 1 for true: a list's element is followed by no space, so
// that a comma and the next one can follow.
func boolDirective(b bool) cobra.ShellCompDirective {
	if b {
		return 1
	}
	return 0
}
