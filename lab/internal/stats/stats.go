// Package stats holds the arithmetic the lab's measurements share.
package stats

import (
	"cmp"
	"math"
)

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted, which must be in ascending order: the smallest value that at
// least p percent of the values are at or below. It is the zero value for
// no values.
func Percentile[T cmp.Ordered](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
