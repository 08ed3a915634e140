package config

import (
	"fmt"
	"slices"
	"strings"
)

// Unknown returns a warning for each variable of environ (KEY=value
// lines, as os.Environ gives them) that relay does not read but that looks
// meant for it: one whose name is a slip away from a variable of known
// (RETRY_DELAY for RETRY_DELAYS), or one starting with RELAY_. Such a
// variable is otherwise ignored in silence, and its default used instead.
// OTEL_ variables are the OpenTelemetry SDK's to judge, never warned
// about.
func Unknown(environ, known []string) []string {
	isKnown := make(map[string]bool, len(known))
	for _, k := range known {
		isKnown[k] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || isKnown[name] || strings.HasPrefix(name, "OTEL_") {
			continue
		}
		if near, ok := Nearest(name, known); ok {
			out = append(out, fmt.Sprintf("%s is set, but relay reads no such variable: did you mean %s?", name, near))
		} else if strings.HasPrefix(name, "RELAY_") {
			out = append(out, fmt.Sprintf("%s is set, but relay reads no such variable (`relay help env` lists them)", name))
		}
	}
	slices.Sort(out)
	return out
}

// Nearest returns the name of names that name most likely misspells: the
// closest by edit distance (a letter added, dropped, changed, or two
// swapped, or only the case), if it is close enough to be a slip, which
// takes more for a longer name; none when name is one of names. It is the
// one rule relay's "did you mean" follows, for variables and commands
// alike.
func Nearest(name string, names []string) (string, bool) {
	best, bestDist := "", -1
	for _, n := range names {
		if n == name {
			return "", false
		}
		d := distance(strings.ToUpper(name), strings.ToUpper(n))
		if bestDist < 0 || d < bestDist {
			best, bestDist = n, d
		}
	}
	// One slip in a short name, two in a long one: more would take
	// unrelated names (HOME, NAME) for each other.
	allowed := 1
	if len(name) >= 10 {
		allowed = 2
	}
	if len(name) < 3 || bestDist < 0 || bestDist > allowed {
		return "", false
	}
	return best, true
}

// distance is the optimal string alignment distance between a and b: the
// edits of one letter each, a swap of neighbours counting as one, that
// turn a into b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
