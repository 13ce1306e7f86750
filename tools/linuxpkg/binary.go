package main

import (
	"debug/buildinfo"
	"debug/elf"
	"fmt"
)

// elfMachines are the ELF machines of the architectures kcrash is released
// for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkBinary refuses a kcrash binary that is not what a release ships: an
// ELF executable for arch, static (no interpreter), and built with
// CGO_ENABLED=0 and -tags kcrash_startsignals.
func checkBinary(path, arch string) error {
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("%s: architecture %q is not released (amd64, arm64)", path, arch)
	}
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("%s: an %s executable, want %s (%s)", path, f.Machine, want, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked (it has an ELF interpreter): build it with CGO_ENABLED=0", path)
		}
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: no Go build information: %v", path, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" {
		return fmt.Errorf("%s: built with CGO_ENABLED=%q, want 0", path, settings["CGO_ENABLED"])
	}
	if settings["-tags"] != "kcrash_startsignals" {
		return fmt.Errorf("%s: built with -tags=%q, want kcrash_startsignals (the start-signal record)", path, settings["-tags"])
	}
	if settings["GOARCH"] != arch {
		return fmt.Errorf("%s: GOARCH=%s, want %s", path, settings["GOARCH"], arch)
	}
	return nil
}
