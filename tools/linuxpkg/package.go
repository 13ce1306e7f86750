package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers "deb"
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers "rpm"
)

type options struct {
	Repo, Dist, Version, Completer string
	Arches                         []string
}

// formats are the package formats built for each architecture.
var formats = []string{"deb", "rpm"}

// Installed paths, for docs/install.md and the tests.
const (
	binPath    = "/usr/bin/kcrash"
	unitPath   = "/usr/lib/systemd/system/kcrash-agent.service"
	epilogPath = "/usr/libexec/kcrash/kcrash-epilog.sh"
)

// build checks each architecture's binary and writes its packages into
// o.Dist; it returns the files written.
func build(o options) ([]string, error) {
	comp, err := os.MkdirTemp("", "linuxpkg-completions-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(comp)
	if err := completions(o.Completer, comp); err != nil {
		return nil, err
	}
	var written []string
	for _, arch := range o.Arches {
		bin := filepath.Join(o.Dist, "kcrash-linux-"+arch)
		if err := checkBinary(bin, arch); err != nil {
			return written, err
		}
		for _, format := range formats {
			path, err := writePackage(format, info(o, arch, bin, comp), o.Dist)
			if err != nil {
				return written, fmt.Errorf("%s %s: %v", format, arch, err)
			}
			written = append(written, path)
		}
	}
	return written, nil
}

// completions has kcrash write its own bash, zsh and fish completion
// scripts (cobra's) into dir.
func completions(kcrash, dir string) error {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, err := exec.Command(kcrash, "completion", shell).Output()
		if err != nil {
			return fmt.Errorf("%s completion %s: %v", kcrash, shell, err)
		}
		if len(out) == 0 {
			return fmt.Errorf("%s completion %s: nothing written", kcrash, shell)
		}
		if err := os.WriteFile(filepath.Join(dir, "kcrash."+shell), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func info(o options, arch, bin, comp string) *nfpm.Info {
	file := func(src, dst string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode}}
	}
	onlyFor := func(c *files.Content, packager string) *files.Content {
		c.Packager = packager
		return c
	}
	scripts := filepath.Join(o.Repo, "tools", "linuxpkg", "scripts")
	return nfpm.WithDefaults(&nfpm.Info{
		Name:        "kcrash",
		Arch:        arch,
		Platform:    "linux",
		Version:     o.Version,
		Section:     "utils",
		Priority:    "optional",
		Maintainer:  "kcrash developers <kcrash@users.noreply.github.com>",
		Description: "Supervise GPU inference jobs and bundle the evidence when they crash\nkcrash wraps a command (an SGLang or vLLM server, a test, a benchmark), watches it,\nand when it dies abnormally writes one triaged crash bundle. The package holds the\nnode agent's systemd unit (not enabled) and a Slurm epilog script.",
		Vendor:      "kcrash",
		Homepage:    "https://github.com/kcrash/kcrash",
		License:     "see https://github.com/kcrash/kcrash",
		Overridables: nfpm.Overridables{
			Contents: files.Contents{
				file(bin, binPath, 0o755),
				file(filepath.Join(o.Repo, "configs", "systemd", "kcrash-agent.service"), unitPath, 0o644),
				file(filepath.Join(o.Repo, "configs", "slurm", "kcrash-epilog.sh"), epilogPath, 0o755),
				file(filepath.Join(comp, "kcrash.bash"), "/usr/share/bash-completion/completions/kcrash", 0o644),
				// zsh looks in vendor-completions on Debian, site-functions on Fedora and RHEL.
				onlyFor(file(filepath.Join(comp, "kcrash.zsh"), "/usr/share/zsh/vendor-completions/_kcrash", 0o644), "deb"),
				onlyFor(file(filepath.Join(comp, "kcrash.zsh"), "/usr/share/zsh/site-functions/_kcrash", 0o644), "rpm"),
				file(filepath.Join(comp, "kcrash.fish"), "/usr/share/fish/vendor_completions.d/kcrash.fish", 0o644),
			},
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(scripts, "postinstall.sh"),
				PreRemove:   filepath.Join(scripts, "preremove.sh"),
				PostRemove:  filepath.Join(scripts, "postremove.sh"),
			},
			RPM: nfpm.RPM{Group: "Applications/System", Summary: "Supervise GPU inference jobs and bundle the evidence when they crash"},
		},
	})
}

// writePackage writes one package into dir under its conventional name.
func writePackage(format string, in *nfpm.Info, dir string) (string, error) {
	p, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	if err := nfpm.PrepareForPackager(in, format); err != nil {
		return "", err
	}
	in.Target = p.ConventionalFileName(in)
	path := filepath.Join(dir, in.Target)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := p.Package(in, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", err
	}
	return path, f.Close()
}
