// Package suggest finds the known word a mistyped one was most likely
// meant to be (a flag, a config key), as cobra does for commands.
package suggest

// Nearest returns the option closest to word by edit distance, or "" when
// none is close enough to be a typo (more than a third of the word, at
// least 2, apart), or when word is empty.
func Nearest(word string, options []string) string {
	if word == "" {
		return ""
	}
	best, bestD := "", max(2, len([]rune(word))/3)+1
	for _, o := range options {
		if d := distance(word, o); d < bestD {
			best, bestD = o, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
