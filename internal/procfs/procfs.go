// Package procfs holds what several packages need to read /proc's formats.
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
