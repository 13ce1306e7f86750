package capture

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// triageResult is the triage of one bundle: the SPEC §5 object and a renderer
// for summary.md.
type triageResult struct {
	json    json.RawMessage
	summary func(summaryMeta) string
}

type summaryMeta struct {
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
