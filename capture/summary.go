package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
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

// lastLines returns up to n last lines of b, without a trailing empty one.
func lastLines(b []byte, n int) []string {
	b = bytes.TrimRight(b, "\n")
	if len(b) == 0 {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, "\r")
	}
	return lines
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
