package main

import (
	"errors"
	"fmt"
	"github.com/kcrash/kcrash/internal/suggest"
	"github.com/spf13/pflag"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/visible"
)

// version is set with -ldflags "-X main.version=..." by release builds
// (scripts/release.sh); left at defaultVersion, the module version that `go
// install …@VERSION` records stands in (readBuild).
var version = defaultVersion

const defaultVersion = "0.1.0-dev"

// streams are the command's standard streams, injectable for tests (cli/cli's IOStreams).
type streams = iostreams.IOStreams

// exitError carries an exit code out of a command without printing anything
// more: the command has already said what went wrong.
type exitError struct {
	code int
	// sig: kcrash should die of this signal (the child did); code is the
	// 128+N fallback where it cannot.
	sig syscall.Signal
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError marks a bad command line: exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

func usagef(format string, a ...any) error { return &usageError{fmt.Errorf(format, a...)} }

// Main runs kcrash with os.Args and returns the process exit code.
func Main() int {
	code, sig := runSig(os.Args[1:], &streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	if sig != 0 {
		dieOf(sig)
	}
	return code
}

// run is Main for tests: the exit code, 128+N for a signal death.
func run(args []string, s *streams) int {
	code, _ := runSig(args, s)
	return code
}

func runSig(args []string, s *streams) (int, syscall.Signal) {
	code, err := execute(args, s)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee.sig
	}
	return code, 0
}

func execute(args []string, s *streams) (int, error) {
	root := newRootCmd(s)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0, nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee
	}
	// An error may quote what came from a bundle, a config or a server (a
	// file name, a manifest field): shown, never interpreted by the terminal.
	fmt.Fprintf(s.Err, "kcrash: %s\n", visible.String(err.Error()))
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		if cmd != nil && cmd.Name() == "run" {
			// run follows env(1) and timeout(1): kcrash could not run the command.
			return 125, nil
		}
		return 2, nil
	}
	return 1, nil
}

func newRootCmd(s *streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "kcrash",
		Short: "Supervise GPU inference jobs and bundle the evidence when they crash",
		Long: `kcrash wraps a command (an SGLang or vLLM server, a test, a benchmark), passes its
output through untouched, watches it, and when it dies abnormally writes one crash
bundle: log tail, kernel-API log tail, kernel messages, GPU and host memory,
process tree, and a triage summary of what crashed and why.

  kcrash run -- bash run_qwen3.5_mxfp4.sh`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       version,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if near := nearestFlag(c, err); near != "" {
			return &usageError{fmt.Errorf("%v: did you mean --%s? (see `%s --help`)", err, near, c.CommandPath())}
		}
		return &usageError{fmt.Errorf("%v (see `%s --help`)", err, c.CommandPath())}
	})
	for _, add := range subcommands {
		root.AddCommand(add(s))
	}
	registerCompletions(root)
	return root
}

// subcommands is filled by each command's file in init, one file per verb.
var subcommands []func(*streams) *cobra.Command

func register(f func(*streams) *cobra.Command) { subcommands = append(subcommands, f) }

// isCobraUsage recognises cobra's own argument errors (unknown command, arg count).
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires ", "invalid argument", "flag needs"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// nearestFlag is the flag of c an unknown long flag was most likely meant
// to be, as cobra suggests commands: "" when err is not about an unknown
// flag or none is close.
func nearestFlag(c *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	c.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return suggest.Nearest(name, names)
}
