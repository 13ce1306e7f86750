//go:build !(kcrash_startsignals && (amd64 || arm64))

package supervisor

// Built without -tags kcrash_startsignals: the signals the runtime took
// over before kcrash's code ran (SIGTERM, SIGQUIT, SIGSEGV, SIGILL... ignored
// or blocked at start) are not known, and the child starts with them at the
// default, unblocked.
const startSignalsExact = false

func runtimeStartSignals() (ignored, blocked signalSet, ok bool) { return 0, 0, false }
