// Package suggest finds the name a user probably meant: the "did you mean"
// of a misspelled flag, configuration key or command.
package suggest

import "strings"

// Closest returns the candidate nearest to word, or "" when none is near
// enough to be a likely typo. Near means: the same once '-' and '_' are
// taken as one (renew-interval for renew_interval), a prefix of at least
// three letters (--inter for --interval), or an edit distance (insertions,
// deletions, substitutions and swaps of neighbours) of at most one for
// every three letters of word, and at least one.
func Closest(word string, candidates []string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "_")) }
	w := norm(word)
	if w == "" {
		return ""
	}
	best, bestD := "", -1
	for _, c := range candidates {
		n := norm(c)
		if n == w {
			return c
		}
		d := distance(w, n)
		if len(w) >= 3 && strings.HasPrefix(n, w) {
			d = 1 // an abbreviation counts as one edit
		}
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(1, len(w)/3) {
		return ""
	}
	return best
}

// distance is the optimal string alignment distance between a and b
// (Levenshtein with transpositions of neighbours), on bytes.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
