package triage

import "regexp"

// genericCauseList: a message that lists what might have caused a failure
// (Ray's "There are some potential root causes. (1) The process is killed
// by SIGKILL by OOM killer ... (3) The worker is crashed unexpectedly due to
// SIGSEGV", "Some common causes include: ..."). Each item names a failure the
// program does not know happened; what the line says before the list (the
// worker died) is still read, the list is not.
var genericCauseList = regexp.MustCompile(`(?i)\b(?:possible|potential|common|probable|likely) (?:root )?(?:causes?|reasons?)\b|\bcauses? (?:may|might|could) (?:be|include)\b|\b(?:may|might|could) be (?:caused by|due to)\b`)

// genericCauseListLits: a cheap test before the regexp.
var genericCauseListLits = []string{"cause", "reason", "due to"}

// genericBeforeCauseList is the part of a line before a list of possible
// causes (the whole line when it has none).
func genericBeforeCauseList(line, lower string) string {
	if !hasAny(lower, genericCauseListLits) {
		return line
	}
	if loc := genericCauseList.FindStringIndex(line); loc != nil {
		return line[:loc[0]]
	}
	return line
}
