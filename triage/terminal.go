package triage

// TerminalLine renders one line of a child's output as a terminal shows it
// ('\r' frames overwrite, backspace steps back, erase-line clears, other
// escapes and control characters dropped): what summary.md and the HTML
// report show of the output tail.
func TerminalLine(l string) string { return terminalLine(l) }
