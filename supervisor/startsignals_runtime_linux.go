//go:build kcrash_startsignals && (amd64 || arm64)

package supervisor

import (
	_ "unsafe" // go:linkname
)

// The runtime's record of how the process started: the handler of each
// signal before the runtime installed its own (SIG_IGN stays 1), and the
// initial signal mask. Reading them takes -ldflags=-checklinkname=0 (Go 1.23
// refuses such references otherwise); a runtime that renames them fails the
// link, never the run.

//go:linkname runtimeFwdSig runtime.fwdSig
var runtimeFwdSig [65]uintptr

//go:linkname runtimeInitSigmask runtime.initSigmask
var runtimeInitSigmask [2]uint32

const startSignalsExact = true

func runtimeStartSignals() (ignored, blocked signalSet, ok bool) {
	for s := 1; s < len(runtimeFwdSig); s++ {
		if runtimeFwdSig[s] == sigIgn {
			ignored |= 1 << (uint(s) - 1)
		}
	}
	blocked = signalSet(runtimeInitSigmask[0]) | signalSet(runtimeInitSigmask[1])<<32
	return ignored, blocked, true
}
