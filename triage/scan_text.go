package triage

import (
	"io"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/kernlog"
)

// ScanEvidenceText reads a file whose kind is not known (`kcrash triage FILE`,
// or a --log file that is really a console capture): it is scanned as program
// output and as kernel messages at once, in one pass, because a program's log
// often holds pasted dmesg lines (an amdgpu fault, an Xid) and a dmesg capture
// can hold a ROCr line. Kernel findings keep source dmesg. A line that both
// parsers recognise as the same kind (ROCr's memory access fault) is kept once,
// as the log scanner's finding. year completes syslog timestamps.
func ScanEvidenceText(r io.Reader, file string, year int) ([]evidence.Finding, error) {
	pr, pw := io.Pipe()
	var kfs []evidence.Finding
	done := make(chan struct{})
	go func() {
		defer close(done)
		kfs, _ = kernlog.ParseReader(pr, year)
		// Keep draining so that the log scanner's tee never blocks.
		_, _ = io.Copy(io.Discard, pr)
	}()
	lfs, err := ScanLogWithCues(io.TeeReader(r, pw), file)
	pw.Close()
	<-done
	type key struct {
		line int
		kind evidence.Kind
	}
	seen := make(map[key]bool, len(lfs))
	for _, f := range lfs {
		if isGenericCue(f) {
			continue // the fallback's cue is no finding of the line's kind
		}
		seen[key{f.Line, f.Kind}] = true
	}
	for _, f := range kfs {
		if seen[key{f.Line, f.Kind}] {
			continue
		}
		f.File = file
		lfs = append(lfs, f)
	}
	lsSortByLine(lfs)
	return lfs, err
}
