package triage

import (
	"regexp"
	"strings"
)

// genericCauseList: a message that lists what might have caused a failure
// (Ray's "There are some potential root causes. (1) The process is killed
// by SIGKILL by OOM killer ... (3) The worker is crashed unexpectedly due to
// SIGSEGV", "Some common causes include: ..."). Each item names a failure the
// program does not know happened; what the line says before the list (the
// worker died) is still read, the list is not. A terminal's hard wrap cuts
// the list over several lines: the rest of a wrapped line is still the list.
var genericCauseList = regexp.MustCompile(`(?i)\b(?:possible|potential|common|probable|likely) (?:root )?(?:causes?|reasons?)\b|\bcauses? (?:may|might|could) (?:be|include)\b|\b(?:may|might|could) be (?:caused by|due to)\b`)

// genericCauseListLits: a cheap test before the regexp.
var (
	genericCauseListLits  = []string{"cause", "reason", "due to"}
	genericCauseListPairs = newLitPairs(genericCauseListLits)
)

// causeListText is the part of the line a cue may be read from: all of it,
// the part before a list of possible causes, or nothing when the line is the
// wrapped rest of a line whose list began before it. It notes, for the next
// line, whether a list is open.
func (g *genericState) causeListText(li *lineInfo, may func(litPairs) bool, lowerLine func() string) string {
	if li.wrapPrev == "" {
		g.causeList = false
		if !may(genericCauseListPairs) || !hasAny(lowerLine(), genericCauseListLits) {
			return li.content
		}
		if loc := genericCauseList.FindStringIndex(li.content); loc != nil {
			g.causeList = true
			return li.content[:loc[0]]
		}
		return li.content
	}
	if g.causeList {
		return ""
	}
	// The phrase itself may be cut by the wrap ("potent|ial root causes").
	joined := li.wrapPrev + li.content
	if !hasAny(strings.ToLower(joined), genericCauseListLits) {
		return li.content
	}
	if loc := genericCauseList.FindStringIndex(joined); loc != nil {
		g.causeList = true
		if loc[0] < len(li.wrapPrev) {
			return ""
		}
		return li.content[:loc[0]-len(li.wrapPrev)]
	}
	return li.content
}
