// Package procfs reads /proc: one reader, under a root that tests point at
// a fixture tree (FS), and the parsers of its formats.
package procfs

import "bytes"

// SplitNUL splits a NUL-separated /proc list (cmdline, environ) into its
// entries. Empty entries are dropped: a process that rewrote its argv
// (setproctitle) leaves a run of NULs as padding.
func SplitNUL(b []byte) []string {
	var out []string
	for _, f := range bytes.Split(b, []byte{0}) {
		if len(f) > 0 {
			out = append(out, string(f))
		}
	}
	return out
}
