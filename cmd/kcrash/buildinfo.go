package main

import (
	"debug/elf"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/kcrash/kcrash/supervisor"
)

// commit is set with -ldflags "-X main.commit=..." by scripts/release.sh
// (GOFLAGS=-buildvcs=false builds carry no VCS stamp of their own).
var commit = ""

// installLine is the build that loses nothing: static, and with the
// runtime's record of the signals kcrash started with (docs/install.md).
const installLine = "CGO_ENABLED=0 go install -tags kcrash_startsignals -ldflags=-checklinkname=0 github.com/kcrash/kcrash/cmd/kcrash@latest"

// buildFacts is what kind of kcrash binary is running.
type buildFacts struct {
	Version string
	Commit  string // "" when unknown
	Go      string
	// Static: the executable names no ELF interpreter, so it runs on any
	// Linux of its architecture; a dynamic one needs the C library it was
	// linked against (glibc ≥ the build host's), which RHEL 8 or Ubuntu
	// 20.04 based images may not have.
	Static    bool
	StaticWhy string // how Static was found out
	// StartSignals: built with -tags kcrash_startsignals, so the child
	// starts with exactly the signals kcrash started with ignored or blocked.
	StartSignals bool
}

// A binary left unstamped by the release but built by `go install
// …@VERSION` carries its module version: bundles, the agent and `kcrash
// version` say that one.
func init() {
	if info, ok := debug.ReadBuildInfo(); ok && version == defaultVersion {
		if v := info.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
	}
}

// readBuild describes the running binary.
func readBuild() buildFacts {
	b := buildFacts{Version: version, Commit: commit, Go: runtime.Version(), StartSignals: supervisor.StartSignalsExact()}
	info, haveInfo := debug.ReadBuildInfo()
	if haveInfo {
		if b.Commit == "" {
			b.Commit = buildSetting(info, "vcs.revision")
			if b.Commit != "" && buildSetting(info, "vcs.modified") == "true" {
				b.Commit += "+dirty"
			}
		}
	}
	exe, err := os.Executable()
	if err == nil {
		var interp string
		interp, err = elfInterpreter(exe)
		b.Static = err == nil && interp == ""
		switch {
		case err != nil:
		case b.Static:
			b.StaticWhy = "no ELF interpreter"
		default:
			b.StaticWhy = "ELF interpreter " + interp
		}
	}
	if err != nil {
		// The file is gone or unreadable (replaced by an upgrade while
		// running): the build's own record of cgo is the next best word.
		cgo := "unknown"
		if haveInfo {
			cgo = buildSetting(info, "CGO_ENABLED")
		}
		b.Static = cgo == "0"
		b.StaticWhy = fmt.Sprintf("CGO_ENABLED=%s at build time (%v)", cgo, err)
	}
	return b
}

func buildSetting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// elfInterpreter returns the program interpreter (PT_INTERP) an ELF file
// names, "" for a static executable.
func elfInterpreter(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		buf := make([]byte, p.Filesz)
		if _, err := p.ReadAt(buf, 0); err != nil {
			return "", fmt.Errorf("%s: PT_INTERP: %v", path, err)
		}
		return strings.TrimRight(string(buf), "\x00"), nil
	}
	return "", nil
}

// lost is the one line saying what this build lost, "" when nothing.
func (b buildFacts) lost() string {
	var l []string
	if !b.Static {
		l = append(l, "it is dynamically linked (it fails where the C library is older than the build host's)")
	}
	if !b.StartSignals {
		l = append(l, "it does not know which signals it started with ignored or blocked (SIGTERM, SIGQUIT... reach the child at their defaults)")
	}
	if len(l) == 0 {
		return ""
	}
	return "this kcrash build lost something: " + strings.Join(l, "; ") + ". Rebuild: " + installLine
}

func (b buildFacts) linkLine() string {
	if b.Static {
		return "static (" + b.StaticWhy + ")"
	}
	return "dynamic (" + b.StaticWhy + ")"
}
