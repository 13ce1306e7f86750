package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/internal/testenv"
)

func TestWriteVersion(t *testing.T) {
	head := "kcrash v1.2.3 " + runtime.GOOS + "/" + runtime.GOARCH + "\ncommit: abc123\ngo: go1.26.8\n"
	for _, tc := range []struct {
		name string
		b    buildFacts
		want string
	}{
		{"release", buildFacts{Version: "v1.2.3", Commit: "abc123", Go: "go1.26.8", Static: true, StaticWhy: "no ELF interpreter", StartSignals: true},
			head + "linked: static (no ELF interpreter)\nsignals at start: all kept for the child\n"},
		{"plain go build", buildFacts{Version: "v1.2.3", Commit: "abc123", Go: "go1.26.8", StaticWhy: "ELF interpreter /lib64/ld-linux-x86-64.so.2"},
			head + "linked: dynamic (ELF interpreter /lib64/ld-linux-x86-64.so.2)\nsignals at start: " + startSignalsLine(false) + "\n" +
				"warning: this kcrash build lost something: it is dynamically linked (it fails where the C library is older than the build host's); " +
				"it does not know which signals it started with ignored or blocked (SIGTERM, SIGQUIT... reach the child at their defaults). Rebuild: " + installLine + "\n"},
		{"static, no tag", buildFacts{Version: "v1.2.3", Commit: "abc123", Go: "go1.26.8", Static: true, StaticWhy: "no ELF interpreter"},
			head + "linked: static (no ELF interpreter)\nsignals at start: " + startSignalsLine(false) + "\n" +
				"warning: this kcrash build lost something: it does not know which signals it started with ignored or blocked (SIGTERM, SIGQUIT... reach the child at their defaults). Rebuild: " + installLine + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeVersion(&out, tc.b); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), tc.want)
			}
		})
	}
}

func TestElfInterpreter(t *testing.T) {
	// /bin/sh of any distribution is dynamically linked.
	interp, err := elfInterpreter("/bin/sh")
	if err != nil || !strings.HasPrefix(interp, "/lib") || !strings.Contains(interp, "ld-") {
		t.Errorf("/bin/sh: interpreter %q, %v", interp, err)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	if _, err := elfInterpreter(notELF); err == nil {
		t.Errorf("a shell script: no error")
	}
}

// TestVersionSaysWhatTheBuildLost builds kcrash the way a user would by
// accident (a plain go build, cgo on) and the way the release does, and asks
// each binary's version and doctor: the first says once, in each, what it
// lost; the second says nothing of the kind.
func TestVersionSaysWhatTheBuildLost(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds kcrash twice")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Skip(t, "no gcc: a cgo build cannot be made (.ci/run installs gcc)")
	}
	dir := t.TempDir()
	build := func(name, cgo string, args ...string) string {
		out := filepath.Join(dir, name)
		cmd := exec.Command(goBin, append(append([]string{"build", "-o", out}, args...), ".")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, b)
		}
		return out
	}
	ask := func(bin string, args ...string) (stdout, stderr string) {
		var o, e bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", bin, args, err, e.String())
		}
		return o.String(), e.String()
	}
	lost := "this kcrash build lost something: "

	plain := build("kcrash-plain", "1")
	v, _ := ask(plain, "version")
	if strings.Count(v, lost) != 1 || !strings.Contains(v, "\nlinked: dynamic (ELF interpreter /") ||
		!strings.Contains(v, "dynamically linked") || !strings.Contains(v, "signals it started with") || !strings.Contains(v, installLine) {
		t.Errorf("plain build, version:\n%s", v)
	}
	d, _ := ask(plain, "doctor")
	if strings.Count(d, lost) != 1 || !strings.HasPrefix(d, "BUILD: "+lost) {
		t.Errorf("plain build, doctor:\n%s", d)
	}
	js, jsErr := ask(plain, "doctor", "--json")
	if strings.Contains(js, lost) || strings.Count(jsErr, lost) != 1 {
		t.Errorf("plain build, doctor --json: stdout\n%s\nstderr\n%s", js, jsErr)
	}

	release := build("kcrash-release", "0", "-tags", "kcrash_startsignals", "-ldflags=-checklinkname=0 -X main.version=v9.9.9 -X main.commit=0123abc")
	v, _ = ask(release, "version")
	if strings.Contains(v, lost) || !strings.HasPrefix(v, "kcrash v9.9.9 ") || !strings.Contains(v, "\ncommit: 0123abc\n") ||
		!strings.Contains(v, "\nlinked: static (no ELF interpreter)\n") || !strings.Contains(v, "\nsignals at start: all kept for the child\n") {
		t.Errorf("release build, version:\n%s", v)
	}
	if d, _ := ask(release, "doctor"); strings.Contains(d, "BUILD") || !strings.HasPrefix(d, "COLLECTOR") {
		t.Errorf("release build, doctor:\n%s", d)
	}
}

// The rebuild line kcrash prints is the one docs/install.md gives users.
func TestInstallDocGoInstallLine(t *testing.T) {
	doc, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "\n"+installLine+"\n") {
		t.Errorf("docs/install.md has no line %q", installLine)
	}
}
