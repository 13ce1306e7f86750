package triage

import (
	"bytes"
	"strings"
)

// TerminalLine renders one line of a child's output as a terminal shows it
// ('\r' frames overwrite, backspace steps back, erase-line clears, other
// escapes and control characters dropped): what summary.md and the HTML
// report show of the output tail.
func TerminalLine(l string) string { return terminalLine(l) }

// LastLines is up to n last lines of b, without a trailing empty one and
// without the carriage returns that end them: the tail a summary or a page
// shows (each line then goes through TerminalLine).
func LastLines(b []byte, n int) []string {
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
