package triage

import (
	"io"

	"github.com/kcrash/kcrash/evidence"
)

// ScanEvidenceText reads a file of unknown kind: program output as the log
// scanner sees it. This is the baseline; see the later version.
func ScanEvidenceText(r io.Reader, file string, year int) ([]evidence.Finding, error) {
	return ScanLog(r, file)
}
