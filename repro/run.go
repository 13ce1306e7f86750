package repro

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/triage"
)

// WriteDryRun prints exactly what Run would do: the kcrash command line, its
// directory, and every variable the child gets beyond environ, as
// configs.Resolve will compute it in the run (configEnv: the config file's
// env, which the run applies before the --env flags).
func (p *Plan) WriteDryRun(w io.Writer, exe string, profiles map[string]configs.Profile, environ, configEnv []string, clean func(string) string) error {
	r, err := configs.Resolve(profiles, p.Profiles, p.Level, p.WorkDir(1), environ, append(append([]string(nil), configEnv...), p.Env...))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "kcrash repro (dry run) of %s\n", clean(p.Orig.Path))
	p.WriteWithheld(w, clean)
	fmt.Fprintf(w, "  original: %s, verdict %s, suspect call %s\n", human.OrDash(p.Orig.Exit), human.OrDash(p.Orig.Verdict), human.OrDash(p.Orig.Suspect))
	fmt.Fprintf(w, "would run %d time(s), run N in %s:\n", p.Times, clean(filepath.Join(p.Out, "run-N")))
	fmt.Fprintf(w, "  directory: %s\n", clean(p.Dir))
	fmt.Fprintf(w, "  command:   %s\n", clean(shellJoin(append([]string{exe}, p.RunArgs(1)...))))
	fmt.Fprintf(w, "  the child: %s\n", clean(shellJoin(p.Command)))
	fmt.Fprintln(w, "  variables set for the child (run-1's paths), on top of the current environment:")
	for _, k := range sortedKeys(r.Set) {
		fmt.Fprintf(w, "    %s=%s\n", clean(k), clean(r.Set[k]))
	}
	if len(r.Kept) > 0 {
		fmt.Fprintln(w, "  left as the current environment has them (a profile would set them):")
		for _, k := range sortedKeys(r.Kept) {
			fmt.Fprintf(w, "    %s=%s\n", clean(k), clean(r.Kept[k]))
		}
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "  note: %s\n", clean(n))
	}
	return nil
}

// WriteWithheld says which of the bundle's variables that change what runs
// are left out of the re-run (or, with --trust-env, put back): first, as a
// bundle may come from anyone.
func (p *Plan) WriteWithheld(w io.Writer, clean func(string) string) {
	list, head := p.Withheld, "  not re-applied from the bundle, as they change what runs (--trust-env re-applies them):"
	if len(p.Trusted) > 0 {
		list, head = p.Trusted, "  re-applied from the bundle with --trust-env, though they change what runs:"
	}
	if len(list) == 0 {
		return
	}
	fmt.Fprintln(w, head)
	for _, kv := range list {
		fmt.Fprintf(w, "    %s\n", clean(kv))
	}
}

// shellJoin quotes args for a POSIX shell, so that the line can be pasted.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// RunResult is one run's outcome.
type RunResult struct {
	N          int      `json:"run"`
	Exit       string   `json:"exit"`
	Crashed    bool     `json:"crashed"`
	Bundle     string   `json:"bundle,omitempty"`
	Verdict    string   `json:"verdict,omitempty"`
	Suspect    string   `json:"suspect,omitempty"`
	SameKind   bool     `json:"same_verdict"`
	SameCall   bool     `json:"same_suspect"`
	Dumps      []string `json:"dumps,omitempty"`       // dump directories of the run
	FailedDump string   `json:"failed_dump,omitempty"` // the suspect's dump that never returned (or raised)
	Script     string   `json:"repro_py,omitempty"`
	Err        string   `json:"error,omitempty"`
}

// Summary is the whole repro.
type Summary struct {
	Runs        []RunResult `json:"runs"`
	Crashed     int         `json:"crashed"`
	SameVerdict int         `json:"same_verdict"`
	SameSuspect int         `json:"same_suspect"`
	Interrupted bool        `json:"interrupted"`
}

// Reproduced: every run crashed with the original's verdict and suspect.
func (s *Summary) Reproduced() bool {
	return !s.Interrupted && len(s.Runs) > 0 && s.Crashed == len(s.Runs) && s.SameVerdict == len(s.Runs) && s.SameSuspect == len(s.Runs)
}

// Runner runs the plan with the kcrash binary Exe.
type Runner struct {
	Exe            string
	Stdin          *os.File
	Stdout, Stderr io.Writer
	Progress       io.Writer // one line before each run
	Clean          func(string) string
}

// Run runs the plan's runs one after the other. Signals that reach kcrash
// repro while a run is on are the run's business (the terminal's ^C reaches
// the run's own kcrash; a kill of repro is forwarded): a run that ends by
// SIGINT or SIGTERM stops the series.
func (r *Runner) Run(ctx context.Context, p *Plan) (*Summary, error) {
	if r.Clean == nil {
		r.Clean = func(s string) string { return s }
	}
	if err := os.MkdirAll(p.Out, 0o755); err != nil {
		return nil, fmt.Errorf("repro directory: %v", err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	sum := &Summary{}
	for i := 1; i <= p.Times; i++ {
		if ctx.Err() != nil {
			sum.Interrupted = true
			break
		}
		if err := os.MkdirAll(p.RunDir(i), 0o755); err != nil {
			return sum, fmt.Errorf("run %d: %v", i, err)
		}
		if r.Progress != nil {
			fmt.Fprintf(r.Progress, "kcrash repro: run %d of %d in %s\n", i, p.Times, r.Clean(p.RunDir(i)))
		}
		cmd := &exec.Cmd{Path: r.Exe, Args: append([]string{"kcrash"}, p.RunArgs(i)...), Dir: p.Dir,
			Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr}
		if err := cmd.Start(); err != nil {
			return sum, fmt.Errorf("run %d: %v", i, err)
		}
		done := make(chan struct{})
		go func() {
			for {
				select {
				case s := <-sigs:
					// The terminal's ^C reaches the run's kcrash by itself (same
					// process group); a signal sent to repro alone is passed on.
					cmd.Process.Signal(s)
				case <-done:
					return
				}
			}
		}()
		err := cmd.Wait()
		close(done)
		res := RunResult{N: i, Exit: exitText(cmd.ProcessState, err)}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			stopped := ws.Signaled() && (ws.Signal() == syscall.SIGINT || ws.Signal() == syscall.SIGTERM) ||
				ws.Exited() && (ws.ExitStatus() == 130 || ws.ExitStatus() == 143)
			if stopped {
				sum.Interrupted = true
			}
		}
		r.inspect(p, &res)
		if sum.Interrupted || res.Verdict == "killed" {
			// Stopped from outside: not the crash reproducing.
			res.Crashed = false
		}
		sum.Runs = append(sum.Runs, res)
		if res.Crashed {
			sum.Crashed++
		}
		if res.SameKind {
			sum.SameVerdict++
		}
		if res.SameCall {
			sum.SameSuspect++
		}
		if sum.Interrupted {
			break
		}
	}
	return sum, nil
}

func exitText(ps *os.ProcessState, err error) string {
	if ps == nil {
		return err.Error()
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + signalName(ws.Signal())
	}
	return fmt.Sprintf("exit %d", ps.ExitCode())
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{syscall.SIGABRT: "SIGABRT", syscall.SIGSEGV: "SIGSEGV", syscall.SIGKILL: "SIGKILL",
		syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGILL: "SIGILL"}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// inspect reads run i's bundle: its verdict, suspect and dumps, and writes
// repro.py beside the suspect's dump that never returned.
func (r *Runner) inspect(p *Plan, res *RunResult) {
	m, _ := filepath.Glob(filepath.Join(p.RunDir(res.N), "kcrash-*.tar.gz"))
	sort.Strings(m)
	if len(m) == 0 {
		return
	}
	res.Bundle = m[len(m)-1]
	b, err := bundle.Open(res.Bundle)
	if err != nil {
		res.Err = err.Error()
		return
	}
	ex := b.Manifest.Exit
	res.Crashed = ex.Signal != nil || ex.Code != nil && *ex.Code != 0
	if ex.Signal != nil {
		res.Exit = "killed by " + *ex.Signal
	}
	var tr triage.Result
	if err := json.Unmarshal(b.Manifest.Triage, &tr); err != nil {
		res.Err = "manifest.triage: " + err.Error()
		return
	}
	res.Verdict = string(tr.Verdict.Kind)
	res.Suspect = triage.SuspectAPI(tr)
	res.SameKind = res.Verdict == p.Orig.Verdict
	res.SameCall = p.Orig.Suspect != "" && res.Suspect == p.Orig.Suspect
	res.Dumps = findDumps(p.WorkDir(res.N))
	if tr.KernelAPI != nil {
		for _, d := range tr.KernelAPI.DumpDirs {
			if d.API == p.Orig.Suspect || d.API == res.Suspect {
				res.FailedDump = d.Path
			}
		}
	}
	if res.FailedDump == "" {
		// The report may not have reached the dumps (a log cut short):
		// the directories themselves say which call never returned.
		for _, d := range res.Dumps {
			if meta, err := ReadMeta(d); err == nil && meta.FunctionName == p.Orig.Suspect && meta.ExecutionStatus != "completed" {
				res.FailedDump = d
			}
		}
	}
	if res.FailedDump != "" {
		if s, err := WriteScript(res.FailedDump, p.Dir); err != nil {
			res.Err = "repro.py: " + err.Error()
		} else {
			res.Script = s
		}
	}
}

// findDumps lists the level-10 call directories under a run's work
// directory (the dump roots the profiles point there).
func findDumps(work string) []string {
	var out []string
	roots, _ := filepath.Glob(filepath.Join(work, "*dump*"))
	for _, root := range roots {
		ents, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range ents {
			d := filepath.Join(root, e.Name())
			if _, err := os.Stat(filepath.Join(d, "metadata.json")); err == nil {
				out = append(out, d)
			} else if _, err := os.Stat(filepath.Join(d, "metadata.jsonl")); err == nil {
				out = append(out, d)
			}
		}
	}
	sort.Strings(out)
	return out
}

// WriteSummary prints the outcome of the runs.
func WriteSummary(w io.Writer, p *Plan, s *Summary, clean func(string) string) {
	fmt.Fprintf(w, "kcrash repro of %s (original: %s, verdict %s, suspect %s)\n", clean(p.Orig.Path), human.OrDash(p.Orig.Exit), human.OrDash(p.Orig.Verdict), clean(human.OrDash(p.Orig.Suspect)))
	for _, r := range s.Runs {
		state := "did not crash"
		switch {
		case r.Crashed:
			state = "crashed"
		case r.Verdict == "killed":
			state = "stopped by a signal from outside"
		}
		fmt.Fprintf(w, "  run %d: %s (%s)", r.N, state, r.Exit)
		if r.Verdict != "" {
			fmt.Fprintf(w, ", verdict %s %s, suspect %s %s", r.Verdict, same(r.SameKind), clean(human.OrDash(r.Suspect)), same(r.SameCall))
		}
		fmt.Fprintln(w)
		if r.Bundle != "" {
			fmt.Fprintf(w, "    bundle: %s\n", clean(r.Bundle))
		}
		if len(r.Dumps) > 0 {
			fmt.Fprintf(w, "    dumps: %d call directories under %s\n", len(r.Dumps), clean(filepath.Dir(r.Dumps[0])))
		}
		if r.FailedDump != "" {
			fmt.Fprintf(w, "    the suspect call's dump (never returned): %s\n", clean(r.FailedDump))
		}
		if r.Script != "" {
			fmt.Fprintf(w, "    standalone repro: python3 %s\n", clean(r.Script))
			if _, err := os.Stat(filepath.Join(r.FailedDump, "metadata.jsonl")); err == nil {
				fmt.Fprintf(w, "    (a FlashInfer dump: flashinfer replay --dir %s replays it too)\n", clean(r.FailedDump))
			}
		}
		if r.Err != "" {
			fmt.Fprintf(w, "    problem: %s\n", clean(r.Err))
		}
	}
	n := len(s.Runs)
	verdict := "did not reproduce"
	switch {
	case s.Reproduced():
		verdict = "reproduced"
	case s.Crashed > 0:
		verdict = "reproduced in part"
	}
	fmt.Fprintf(w, "%s: %d of %d runs crashed; verdict as the original's in %d/%d, suspect call as the original's in %d/%d\n",
		verdict, s.Crashed, n, s.SameVerdict, n, s.SameSuspect, n)
	if s.Interrupted {
		fmt.Fprintf(w, "stopped after run %d of %d: interrupted\n", n, p.Times)
	}
}

func same(b bool) string {
	if b {
		return "(same)"
	}
	return "(differs)"
}
