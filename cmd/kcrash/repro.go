package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/repro"
	"github.com/spf13/cobra"
)

// reproOptions are `kcrash repro`'s arguments.
type reproOptions struct {
	IO     *streams
	bundle string
	extra  []string // appended to the bundle's command (after --)
	times  int
	dryRun bool
	out    string
	vendor string
	level  int
	config string
	// trustEnv re-applies the bundle's variables that change what runs.
	trustEnv bool
	// exe is the kcrash binary each run re-invokes as `kcrash run`.
	exe string
}

func init() { register(func(s *streams) *cobra.Command { return newReproCmd(s, nil) }) }

func newReproCmd(s *streams, runF func(*reproOptions) error) *cobra.Command {
	o := &reproOptions{IO: s, times: 1, level: 10}
	c := &cobra.Command{
		Use:   "repro BUNDLE [--times N] [--dry-run] [-- EXTRA ARGS...]",
		Short: "Re-run a bundle's command escalated, N times: does the crash and its suspect call reproduce?",
		Long: `Re-run the command of BUNDLE in its working directory, with the current
environment plus an escalation chosen from the bundle's verdict:
  - the vendor's sync profile (rocm-sync or cuda-sync), from the evidence's
    HIP/CUDA wording or the GPUs the bundle lists, never from this host;
  - kernel-API level 10 with dumps limited to the suspect call
    (SGLANG_KERNEL_API_DUMP_INCLUDE / FLASHINFER_DUMP_INCLUDE): every call gets
    level-5 statistics, only the suspect pays for tensor dumps;
  - --disable-cuda-graph --disable-prefill-cuda-graph when the command is an
    SGLang launch.
Variables the original run set with --env come back, except those whose value
the bundle holds redacted (a secret is never restored from a bundle) and those
that change what runs (LD_*, PATH, PYTHONPATH, BASH_ENV, NODE_OPTIONS...),
which come back only with --trust-env: a bundle may come from anyone.
Each run is a normal ` + "`kcrash run`" + ` with its own bundle, under --out/run-N.
The end says how many runs crashed, whether the verdict and the suspect call
were the original's, and where the dumps are; beside the dump of the suspect
call that never returned it writes repro.py, which replays that call alone at
the failing M and at M=1. Exit 0 when every run reproduced the original's
verdict and suspect, 1 otherwise.`,
		Example: `  kcrash repro kcrash-bundles/kcrash-20260502T140732Z-node1-4242.tar.gz --dry-run
  kcrash repro BUNDLE --times 3
  kcrash repro BUNDLE -- --max-running-requests 1`,
		Args: func(c *cobra.Command, args []string) error {
			if c.ArgsLenAtDash() == 0 || len(args) == 0 {
				return usagef("repro: no bundle given (usage: kcrash repro BUNDLE [--times N] [--dry-run] [-- EXTRA ARGS...])")
			}
			if n := c.ArgsLenAtDash(); n > 1 || n < 0 && len(args) > 1 {
				return usagef("repro: one bundle at a time (extra arguments for the command go after --)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			o.bundle = args[0]
			if n := c.ArgsLenAtDash(); n >= 0 {
				o.extra = args[n:]
			}
			if runF != nil {
				return runF(o)
			}
			return runRepro(c.Context(), o)
		},
	}
	f := c.Flags()
	f.IntVar(&o.times, "times", o.times, "how many runs")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would run (command, directory, every variable set) and stop")
	f.StringVar(&o.out, "out", "", "directory of the runs (default ./kcrash-repro/<bundle>-<UTC time>)")
	f.StringVar(&o.vendor, "vendor", "", "amd, nvidia or none: the sync profile, when the evidence does not say")
	f.IntVar(&o.level, "level", o.level, "kernel-API level of the runs (5, or 10 for dumps of the suspect call)")
	f.StringVar(&o.config, "config", "", "config `FILE` (profiles), as for kcrash run")
	f.BoolVar(&o.trustEnv, "trust-env", false, "re-apply the bundle's variables that change what runs (LD_*, PATH, PYTHONPATH, BASH_ENV...): only for a bundle you trust")
	return c
}

func runRepro(ctx context.Context, o *reproOptions) error {
	s, path, extra := o.IO, o.bundle, o.extra
	if o.times < 1 || o.times > 1000 {
		return usagef("repro: --times %d: want 1 to 1000", o.times)
	}
	if o.level != 5 && o.level != 10 {
		return usagef("repro: --level %d: want 5 or 10", o.level)
	}
	switch o.vendor {
	case "", "amd", "nvidia", "none":
	default:
		return usagef("repro: --vendor %q: want amd, nvidia or none", o.vendor)
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return err
	}
	profiles, err := configs.Profiles(cfg.Profiles)
	if err != nil {
		return err
	}
	orig, err := repro.Load(path)
	if err != nil {
		return fmt.Errorf("repro: %s", visible.Line(err.Error()))
	}
	out := o.out
	if out == "" {
		name := strings.TrimSuffix(filepath.Base(path), ".tar.gz")
		out = filepath.Join("kcrash-repro", name+"-"+time.Now().UTC().Format("20060102T150405Z"))
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	plan, err := repro.NewPlan(orig, repro.Options{Times: o.times, Extra: extra, Out: out, Vendor: o.vendor, Level: o.level, TrustEnv: o.trustEnv}, profiles)
	if err != nil {
		return fmt.Errorf("repro: %s", visible.Line(err.Error()))
	}
	exe := o.exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("repro: cannot find the kcrash binary to re-run: %v", err)
		}
	}
	if o.dryRun {
		return plan.WriteDryRun(s.Out, exe, profiles, os.Environ(), cfg.envList(), visible.Line)
	}
	if fi, err := os.Stat(plan.Dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("repro: the original working directory %s is not here: %s", visible.Line(plan.Dir), "run it where the bundle was made, or recreate the directory")
	}
	plan.WriteWithheld(s.Err, visible.Line)
	r := &repro.Runner{Exe: exe, Stdin: s.In, Stdout: s.Out, Stderr: s.Err, Progress: s.Err, Clean: visible.Line}
	sum, err := r.Run(ctx, plan)
	if sum != nil {
		repro.WriteSummary(s.Out, plan, sum, visible.Line)
	}
	if err != nil {
		return fmt.Errorf("repro: %v", err)
	}
	if sum.Interrupted {
		return &exitError{code: 130}
	}
	if !sum.Reproduced() {
		return &exitError{code: 1}
	}
	return nil
}
