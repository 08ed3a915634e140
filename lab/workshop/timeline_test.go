package workshop

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestTimelineShowsEveryRetryOfABoundedStrategy(t *testing.T) {
	var got []int
	for k := 1; k <= 1000; k++ {
		if shown(k, false) {
			got = append(got, k)
		}
	}
	want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}
	if len(got) != len(want) {
		t.Fatalf("shown attempts %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("shown attempts %v, want %v", got, want)
		}
	}
	if !shown(4321, true) {
		t.Error("a success must always be shown")
	}
}

func TestTimelineLines(t *testing.T) {
	var b bytes.Buffer
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tl := &timeline{w: &b, start: start, attempts: true}
	tl.attempt(start.Add(300*time.Millisecond), "n-04", 2, false, 250*time.Millisecond, 253*time.Millisecond, "503: busy")
	tl.attempt(start.Add(time.Second), "n-04", 3, true, -1, 700*time.Millisecond, "")
	tl.attempt(start.Add(time.Second), "n-05", 11, false, 0, time.Millisecond, "hidden")
	tl.parked(start.Add(2*time.Second), "n-06", 6, "max-retries")
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	want := []string{
		"   0.300s  n-04             2  failed         250ms      253ms  503: busy",
		"   1.000s  n-04             3  delivered          ?      700ms",
		"   2.000s  n-06             -  parked                           max-retries, after 6 attempts",
	}
	if len(lines) != len(want) {
		t.Fatalf("lines:\n%s", b.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d\n got %q\nwant %q", i, lines[i], want[i])
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("one two three four", "  ", 12)
	if want := "  one two\n  three four\n"; got != want {
		t.Errorf("wrap = %q, want %q", got, want)
	}
}
