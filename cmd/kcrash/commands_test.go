package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/upload/uploadtest"
)

// These call each command's run function directly, without cobra, with
// buffers for streams (cli/cli's xRun(opts) tests); the scripts under
// testdata/script test the same commands through the command line.

func TestVersionRun(t *testing.T) {
	io, out, errOut := iostreams.Test()
	if err := versionRun(&versionOptions{IO: io}); err != nil {
		t.Fatal(err)
	}
	want := "kcrash " + version + " " + runtime.GOOS + "/" + runtime.GOARCH + " " + runtime.Version() + "\n"
	if out.String() != want || errOut.Len() != 0 {
		t.Errorf("stdout %q stderr %q, want %q", out, errOut, want)
	}
}

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
