package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"github.com/spf13/pflag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/upload/uploadtest"
	"github.com/spf13/cobra"
)

// These call each command's run function directly, without cobra, with
// buffers for streams (cli/cli's xRun(opts) tests); the scripts under
// testdata/script test the same commands through the command line.

func TestProfilesRun(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("profiles:\n  mine:\n    description: a site profile\n    env:\n      MY_DEBUG: \"1\"\n"), 0o644)
	io, out, _ := iostreams.Test()
	if err := profilesRun(&profilesOptions{IO: io, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sglang (default): ", "mine: a site profile\n  MY_DEBUG=1\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	io, _, _ = iostreams.Test()
	if err := profilesRun(&profilesOptions{IO: io, Config: filepath.Join(t.TempDir(), "none.yaml")}); err == nil {
		t.Error("a --config that does not exist: no error")
	}
}

func TestCollectorsRun(t *testing.T) {
	io, out, _ := iostreams.Test()
	if err := collectorsRun(&collectorsOptions{IO: io}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if all := collectors.All(); len(lines) != len(all)+1 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], all[0].Name+" ") {
		t.Errorf("table:\n%s", out)
	}
}

func TestDoctorRunJSON(t *testing.T) {
	io, out, _ := iostreams.Test()
	if err := doctorRun(&doctorOptions{IO: io, Env: collectors.NewEnv(), JSON: true}); err != nil {
		t.Fatal(err)
	}
	var checks []collectors.Check
	if err := json.Unmarshal(out.Bytes(), &checks); err != nil || len(checks) != len(collectors.All()) {
		t.Errorf("%d checks, %v:\n%s", len(checks), err, out)
	}
}

func TestShowRunListAndExtract(t *testing.T) {
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	io, out, _ := iostreams.Test()
	if err := showRun(&showOptions{IO: io, bundle: b, list: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "summary.md") || !strings.Contains(out.String(), "manifest.json") {
		t.Errorf("--list:\n%s", out)
	}
	io, out, _ = iostreams.Test()
	if err := showRun(&showOptions{IO: io, bundle: b, extract: "summary.md"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "# kcrash: gpu_page_fault") {
		t.Errorf("--extract summary.md:\n%s", out)
	}
	io, _, _ = iostreams.Test()
	if err := showRun(&showOptions{IO: io, bundle: b, list: true, asJSON: true}); err == nil || !strings.Contains(err.Error(), "one at a time") {
		t.Errorf("--list --json: %v", err)
	}
}

func TestMergeRunOneBundle(t *testing.T) {
	dir := t.TempDir()
	uploadtest.Bundle(t, dir, uploadtest.BundleOptions{})
	io, out, _ := iostreams.Test()
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := mergeRun(&mergeOptions{IO: io, Inputs: []string{dir}, JSON: true, TermLog: termLog, TermLogGiven: true}); err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r["first_failure"] == nil {
		t.Errorf("%v:\n%s", err, out)
	}
	if line, _ := os.ReadFile(termLog); !bytes.HasPrefix(line, []byte("kcrash: ")) {
		t.Errorf("termination log %q", line)
	}
	io, _, _ = iostreams.Test()
	if err := mergeRun(&mergeOptions{IO: io, Inputs: []string{t.TempDir()}}); err == nil {
		t.Error("a directory without bundles: no error")
	}
}

func TestUploadRunFileTarget(t *testing.T) {
	t.Setenv("KCRASH_CONFIG", "")
	b := uploadtest.Bundle(t, t.TempDir(), uploadtest.BundleOptions{})
	dest := t.TempDir() + "/"
	io, out, _ := iostreams.Test()
	if err := uploadRun(context.Background(), &uploadCmdOptions{IO: io, Bundle: b, To: []string{"file://" + dest}, Config: filepath.Join(t.TempDir(), "none.yaml")}); err == nil {
		t.Error("a --config that does not exist: no error")
	}
	if err := uploadRun(context.Background(), &uploadCmdOptions{IO: io, Bundle: b, To: []string{"file://" + dest}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dest, filepath.Base(b))); err != nil || !strings.Contains(out.String(), "file://") {
		t.Errorf("copy: %v; stdout:\n%s", err, out)
	}
}

func TestCollectRunWritesBundle(t *testing.T) {
	out := t.TempDir()
	io, _, errOut := iostreams.Test()
	o := &collectOptions{IO: io, since: time.Minute, out: out, collectorTimeout: 5 * time.Second, collectors: "host"}
	if err := runCollect(o); err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(out, "kcrash-*.tar.gz"))
	if len(m) != 1 || !strings.HasPrefix(errOut.String(), "kcrash: collected the last 1m0s of this host; bundle ") {
		t.Fatalf("%d bundles; stderr %q", len(m), errOut)
	}
	b, err := bundle.Open(m[0])
	if err != nil || b.Manifest.Mode != "collect" || b.Manifest.KcrashVersion != version {
		t.Errorf("manifest %+v %v", b.Manifest, err)
	}
	io, _, _ = iostreams.Test()
	if err := runCollect(&collectOptions{IO: io, out: out, collectors: "no-such"}); err == nil {
		t.Error("an unknown collector: no error")
	}
}

// TestNewAttachCmd tests attach's command line alone: a runF receives the
// options; giving both or neither of --pid and --slurm-job is a usage error.
func TestNewAttachCmd(t *testing.T) {
	t.Setenv("KCRASH_CONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var got *attachOptions
	run := func(args ...string) error {
		got = nil
		io, _, _ := iostreams.Test()
		c := newAttachCmd(io, func(o *attachOptions) error { got = o; return nil })
		c.SetArgs(args)
		c.SetOut(io.Out)
		c.SetErr(io.Err)
		return c.Execute()
	}
	if err := run("--pid", "42", "--log", "a.log", "-q"); err != nil || got == nil || got.pid != 42 || got.out != "kcrash-bundles" || !got.quiet || len(got.logs) != 1 {
		t.Errorf("--pid 42: %v %+v", err, got)
	}
	for _, args := range [][]string{{}, {"--pid", "1", "--slurm-job", "2"}} {
		var ue *usageError
		if err := run(args...); !errors.As(err, &ue) || got != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

func TestTriageRunProgramLog(t *testing.T) {
	io, out, _ := iostreams.Test()
	log := filepath.Join(testcorpus.Dir(t), "6-program-log", "device-side-assert-kernel-assertion-lines-indexkernel.txt")
	if err := runTriage(&triageOptions{IO: io, logs: []string{log}, asJSON: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"kind": "gpu_device_assert"`) {
		t.Errorf("verdict:\n%s", out)
	}
	io, _, _ = iostreams.Test()
	if err := runTriage(&triageOptions{IO: io, logs: []string{filepath.Join(t.TempDir(), "none.log")}}); err == nil {
		t.Error("an unreadable input: no error")
	}
}

// An arch mismatch whose log names no arch takes the GPU's from --smi.
func TestTriageArchFromSMIFile(t *testing.T) {
	io, out, _ := iostreams.Test()
	td := filepath.Join("..", "..", "triage", "testdata")
	o := &triageOptions{IO: io, logs: []string{filepath.Join(td, "unseen", "dev", "arch-mismatch-vllm-enginecore-rtx50.txt")},
		smis: []string{filepath.Join(td, "smi", "nvidia-smi-query-compute-cap-single.txt")}}
	if err := runTriage(o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "(sm_89)") || !strings.Contains(out.String(), "TORCH_CUDA_ARCH_LIST=8.9") {
		t.Errorf("summary:\n%s", out)
	}
}

// An error that quotes what came from outside (here a bundle path holding
// escape sequences) reaches the terminal with its control characters shown,
// never interpreted.
func TestErrorLineControlCharsVisible(t *testing.T) {
	var out, errb bytes.Buffer
	s := &streams{In: os.Stdin, Out: &out, Err: &errb}
	code, _ := execute([]string{"show", filepath.Join(t.TempDir(), "x\x1b]52;c;cHduZWQ=\x07\x1b[2J.tar.gz")}, s)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.ContainsAny(errb.String(), "\x1b\x07") || !strings.Contains(errb.String(), `\x1b]52`) {
		t.Fatalf("stderr %q", errb.String())
	}
}

// cmdOptions builds a command with a runF that keeps the options it is
// given, runs it on args, and returns them (nil when the runF was not
// reached) with Execute's error.
func cmdOptions[O any](t *testing.T, build func(*streams, func(*O) error) *cobra.Command, args ...string) (*O, *streams, error) {
	t.Helper()
	var got *O
	io, _, _ := iostreams.Test()
	c := build(io, func(o *O) error { got = o; return nil })
	c.SetArgs(args)
	c.SetOut(io.Out)
	c.SetErr(io.Err)
	err := c.Execute()
	return got, io, err
}

// noUserConfig keeps the developer's own config file and KCRASH_* variables
// out of a test.
func noUserConfig(t *testing.T) {
	t.Setenv("KCRASH_CONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "KCRASH_") && k != "KCRASH_CONFIG" {
			t.Setenv(k, "")
		}
	}
}

// TestNewRunCmd tests run's command line alone: flags stop at the command,
// the config's defaults fill what was not given, and a run without a
// command is a usage error that never reaches the run.
func TestNewRunCmd(t *testing.T) {
	noUserConfig(t)
	o, io, err := cmdOptions(t, newRunCmd, "--level", "5", "--env", "A=B", "--no-pty", "--", "cmd", "x", "--level", "1")
	if err != nil || o == nil {
		t.Fatalf("%v %+v", err, o)
	}
	if o.IO != io || o.level != 5 || !slices.Equal(o.env, []string{"A=B"}) || !o.noPty || !slices.Equal(o.args, []string{"cmd", "x", "--level", "1"}) || o.cfg == nil {
		t.Errorf("options %+v", o)
	}
	if o.profile != configs.DefaultProfile || o.collect != "crash" || o.ring != 16<<20 || o.budget != bundle.DefaultBudget || o.out != "" {
		t.Errorf("defaults %+v", o)
	}
	// Without --: the first word that is not a flag is the command.
	if o, _, err := cmdOptions(t, newRunCmd, "-q", "sh", "-c", "exit 3"); err != nil || !o.quiet || !slices.Equal(o.args, []string{"sh", "-c", "exit 3"}) {
		t.Errorf("run -q sh -c: %v %+v", err, o)
	}
	t.Setenv("KCRASH_LEVEL", "10")
	t.Setenv("KCRASH_OUT", "/b")
	if o, _, err := cmdOptions(t, newRunCmd, "--level", "1", "true"); err != nil || o.level != 1 || o.out != "/b" {
		t.Errorf("KCRASH_LEVEL=10 KCRASH_OUT=/b run --level 1: %v %+v", err, o)
	}
	var ue *usageError
	if o, _, err := cmdOptions(t, newRunCmd, "--level", "5"); !errors.As(err, &ue) || o != nil {
		t.Errorf("no command: %v %+v", err, o)
	}
}

// TestRunRun calls run's run function without cobra: a bad value is one
// line and 125 before anything starts; a command runs with its output
// passed through and its exit status kept.
func TestRunRun(t *testing.T) {
	noUserConfig(t)
	io, out, errOut := iostreams.Test()
	var ee *exitError
	err := runRun(context.Background(), &runOptions{IO: io, args: []string{"true"}, collect: "sometimes"})
	if !errors.As(err, &ee) || ee.code != 125 || errOut.String() != "kcrash: --collect \"sometimes\": want crash, always or never\n" || out.Len() != 0 {
		t.Errorf("--collect sometimes: %v; stderr %q", err, errOut)
	}
	io, out, errOut = iostreams.Test()
	o := &runOptions{IO: io, args: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, profile: "none", level: 3, collect: "never",
		noPty: true, ring: 1 << 16, collectorTimeout: time.Second, hangAction: "stop", sampleInterval: 100 * time.Millisecond,
		workdir: t.TempDir(), quiet: true, out: t.TempDir()}
	if err := runRun(context.Background(), o); !errors.As(err, &ee) || ee.code != 3 {
		t.Errorf("exit 3: %v", err)
	}
	if out.String() != "out\n" || !strings.HasPrefix(errOut.String(), "err\n") {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
}

// TestNewReproCmd tests repro's command line alone: the bundle, then the
// extra arguments after --.
func TestNewReproCmd(t *testing.T) {
	o, io, err := cmdOptions(t, newReproCmd, "B", "--times", "3", "--dry-run", "--", "--x")
	if err != nil || o == nil || o.IO != io || o.bundle != "B" || o.times != 3 || !o.dryRun || !slices.Equal(o.extra, []string{"--x"}) || o.level != 10 {
		t.Fatalf("%v %+v", err, o)
	}
	if o, _, err := cmdOptions(t, newReproCmd, "B"); err != nil || o.times != 1 || o.extra != nil {
		t.Errorf("repro B: %v %+v", err, o)
	}
	for _, args := range [][]string{{}, {"--", "--x"}, {"A", "B"}} {
		var ue *usageError
		if o, _, err := cmdOptions(t, newReproCmd, args...); !errors.As(err, &ue) || o != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// TestReproRunDryRun calls repro's run function on a real bundle (the
// report package's crash-gpu, packed as kcrash writes it): the plan goes to
// stdout, nothing runs.
func TestReproRunDryRun(t *testing.T) {
	noUserConfig(t)
	b := packBundle(t, filepath.Join("..", "..", "report", "testdata", "bundles", "crash-gpu"))
	io, out, errOut := iostreams.Test()
	runs := filepath.Join(t.TempDir(), "runs")
	o := &reproOptions{IO: io, bundle: b, extra: []string{"--x"}, times: 2, dryRun: true, level: 10, out: runs, exe: "/opt/kcrash"}
	if err := runRepro(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kcrash repro (dry run) of " + b + "\n",
		"verdict gpu_page_fault, suspect call sglang.quant_method.Fp8LinearMethod.apply\n",
		"would run 2 time(s), run N in " + runs + "/run-N:\n",
		"command:   /opt/kcrash run --out " + runs + "/run-1 ",
		"/work/wt/i14/examples/gpu-crash.sh' --x\n",
		"SGLANG_KERNEL_API_DUMP_INCLUDE=sglang.quant_method.Fp8LinearMethod.apply\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr %q", errOut)
	}
	if _, err := os.Stat(runs); !os.IsNotExist(err) {
		t.Errorf("a dry run made %s: %v", runs, err)
	}
	io, _, _ = iostreams.Test()
	if err := runRepro(context.Background(), &reproOptions{IO: io, bundle: b, times: 0, level: 10}); err == nil || err.Error() != "repro: --times 0: want 1 to 1000" {
		t.Errorf("--times 0: %v", err)
	}
}

// packBundle packs an extracted bundle directory into a .tar.gz under one
// top directory, as bundle.Open reads it.
func packBundle(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kcrash-"+filepath.Base(dir)+".tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	top := strings.TrimSuffix(filepath.Base(p), ".tar.gz")
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if err := tw.WriteHeader(&tar.Header{Name: top + "/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	for _, c := range []io.Closer{tw, gz, f} {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNewReportCmd tests report's command line alone.
func TestNewReportCmd(t *testing.T) {
	o, io, err := cmdOptions(t, newReportCmd, "B", "-o", "F")
	if err != nil || o == nil || o.IO != io || o.bundle != "B" || o.out != "F" {
		t.Fatalf("%v %+v", err, o)
	}
	for _, args := range [][]string{{}, {"A", "B"}} {
		var ue *usageError
		if o, _, err := cmdOptions(t, newReportCmd, args...); !errors.As(err, &ue) || o != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// TestReportRun calls report's run function on an extracted bundle: the
// page to stdout, or to -o FILE with one line on stderr.
func TestReportRun(t *testing.T) {
	b := filepath.Join("..", "..", "report", "testdata", "bundles", "crash-gpu")
	io, out, errOut := iostreams.Test()
	if err := runReport(&reportOptions{IO: io, bundle: b}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "<!DOCTYPE html>") || !strings.Contains(out.String(), "gpu_page_fault") || errOut.Len() != 0 {
		t.Errorf("stdout %.200q; stderr %q", out, errOut)
	}
	page := out.String()
	file := filepath.Join(t.TempDir(), "crash.html")
	io, out, errOut = iostreams.Test()
	if err := runReport(&reportOptions{IO: io, bundle: b, out: file}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(file); string(got) != page || out.Len() != 0 || !strings.HasPrefix(errOut.String(), "kcrash: report of "+b+" written to "+file+" (") {
		t.Errorf("-o: %d bytes, want %d; stdout %q; stderr %q", len(got), len(page), out, errOut)
	}
	io, _, _ = iostreams.Test()
	if err := runReport(&reportOptions{IO: io, bundle: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("a bundle that does not exist: no error")
	}
}

// TestFlagPlaceholders: every flag's placeholder in --help is one word
// (`--profile NAMES`), never the words of a quoted example from the usage
// text (`--profile kcrash profiles`).
func TestFlagPlaceholders(t *testing.T) {
	var out, errb bytes.Buffer
	root := newRootCmd(&streams{In: os.Stdin, Out: &out, Err: &errb})
	for _, c := range root.Commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(f)
			if strings.ContainsAny(name, " `") {
				t.Errorf("kcrash %s --%s: placeholder %q", c.Name(), f.Name, name)
			}
		})
	}
}

// TestFlagCompletion: shell completion offers the known values of
// --profile, --collect, --collectors (the list's last element) and --to.
func TestFlagCompletion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--profile", "sgl"}, "sglang\n"},
		{[]string{"run", "--collect", "al"}, "always\n"},
		{[]string{"run", "--collectors", "kmsg,gp"}, "kmsg,gpu\n"},
		{[]string{"attach", "--skip-collectors", "km"}, "kmsg\n"},
		{[]string{"upload", "--to", "gitl"}, "gitlab:\n"},
	} {
		var out, errb bytes.Buffer
		root := newRootCmd(&streams{In: os.Stdin, Out: &out, Err: &errb})
		root.SetArgs(append([]string{cobra.ShellCompRequestCmd}, c.args...))
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		got := out.String()
		if i := strings.LastIndex(got, "\n:"); i >= 0 {
			got = got[:i+1] // the directive line follows the values
		}
		if got != c.want {
			t.Errorf("complete %v = %q, want %q", c.args, got, c.want)
		}
	}
}
