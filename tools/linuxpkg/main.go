// Command linuxpkg builds kcrash's .deb and .rpm from the static binaries
// scripts/release.sh put in a dist directory, with nfpm used as a library: a
// module of its own, so that kcrash's go.mod carries none of nfpm's
// dependencies.
//
//	go run . -repo ../.. -dist DIST -version V -completer DIST/kcrash-linux-amd64 amd64 arm64
//
// Each package holds /usr/bin/kcrash, the node agent's systemd unit
// (installed, not enabled), the Slurm epilog script and bash, zsh and fish
// completions. Every binary is checked first: static, for its architecture,
// built with the start-signal record.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	var o options
	flag.StringVar(&o.Repo, "repo", "../..", "the kcrash repository (the unit and the epilog script come from it)")
	flag.StringVar(&o.Dist, "dist", "", "directory holding kcrash-linux-ARCH; the packages are written into it")
	flag.StringVar(&o.Version, "version", "", "the release's version (v1.2.3)")
	flag.StringVar(&o.Completer, "completer", "", "a kcrash binary this machine runs, to generate the shell completions")
	flag.Parse()
	o.Arches = flag.Args()
	if o.Dist == "" || o.Version == "" || o.Completer == "" || len(o.Arches) == 0 {
		fmt.Fprintln(os.Stderr, "usage: linuxpkg -dist DIR -version V -completer BIN [-repo DIR] ARCH...")
		os.Exit(2)
	}
	written, err := build(o)
	for _, w := range written {
		fmt.Println(w)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "linuxpkg:", err)
		os.Exit(1)
	}
}
