package capture

import (
	"strings"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/triage"

	"encoding/json"
	"fmt"
	"io"
	"time"
)

// triageResult is the triage of one bundle: the SPEC §5 object and a renderer
// for summary.md.
type triageResult struct {
	verdict   triage.Verdict
	json      json.RawMessage
	signature bundle.Signature
	summary   func(summaryMeta) string
}

type summaryMeta struct {
	slurmJob   string // a Slurm job's bundle written by the epilog or attach --slurm-job
	name       string
	args       []string
	ex         Exit
	start      time.Time
	outputFile string // the staged output.log
}

func exitText(ex Exit) string {
	switch {
	case ex.Signal != "" && ex.CoreDumped:
		return "killed by " + ex.Signal + " (core dumped)"
	case ex.Signal != "":
		return "killed by " + ex.Signal
	case ex.Code != nil:
		return fmt.Sprintf("exit status %d", *ex.Code)
	}
	if ex.Reason == "" {
		return "still running"
	}
	return "still running (" + ex.Reason + ")"
}

// outputFrom adapts a byte source (followed log files, a Slurm job's
// StdOut) to collectors.Env.Output.
func outputFrom(f func() []byte) func(io.Writer) (int64, error) {
	return func(w io.Writer) (int64, error) {
		n, err := w.Write(f())
		return int64(n), err
	}
}

// verdictWords is the verdict for one line: its kind and the start of its
// summary, cut at a word.
func verdictWords(v triage.Verdict) string {
	const most = 80
	words := string(v.Kind)
	if sum := strings.TrimSpace(v.Summary); sum != "" {
		if r := []rune(sum); len(r) > most {
			cut := string(r[:most])
			if i := strings.LastIndexByte(cut, ' '); i > most/2 {
				cut = cut[:i]
			}
			sum = strings.TrimRight(cut, " ,;:") + "…"
		}
		words += " (" + sum + ")"
	}
	return words
}
