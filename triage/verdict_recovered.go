package triage

import (
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// recoverySig is the signature of a line where the program says it caught
// an allocation failure and retried with less (configs/signatures.yaml).
const recoverySig = "allocation-retried"

// recoveredKey marks an out-of-memory finding the program recovered from.
const recoveredKey detail.Bool = "recovered"

// markRecoveredOOM demotes GPU out-of-memory findings that the program
// recovered from: an OOM of a file followed, later in the same file, by the
// program's own retry line, with no OOM after that retry. Such a failure is
// not what ended the run (llama.cpp retrying without pipeline parallelism
// and going on to serve); an OOM after the retry is the retry failing, and
// stays a cause.
func (x *facts) markRecoveredOOM() {
	for _, r := range x.all {
		if r.f.Details.Text(detail.Signature) != recoverySig || r.f.File == "" {
			continue
		}
		if x.oomAfter(r) {
			continue
		}
		for _, c := range x.all {
			if c.w == wCause && c.kind == evidence.GPUOOM && c.f.File == r.f.File && c.f.Line > 0 && c.f.Line <= r.f.Line {
				c.w = wInfo
				c.f.Details.SetBool(recoveredKey, true)
			}
		}
	}
}

// oomAfter: a GPU OOM finding of r's file comes after r.
func (x *facts) oomAfter(r *cf) bool {
	for _, c := range x.all {
		if c.w == wCause && c.kind == evidence.GPUOOM && c.f.File == r.f.File && c.f.Line > r.f.Line {
			return true
		}
	}
	return false
}

// recoveredOOM: markRecoveredOOM demoted an out-of-memory finding.
func (x *facts) recoveredOOM() bool {
	for _, c := range x.all {
		if c.kind == evidence.GPUOOM && c.f.Details.Bool(recoveredKey) {
			return true
		}
	}
	return false
}
