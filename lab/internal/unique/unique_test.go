package unique

import (
	"regexp"
	"testing"
)

func TestHex(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		h := Hex()
		if !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(h) {
			t.Fatalf("Hex() = %q, want 8 hexadecimal digits", h)
		}
		if seen[h] {
			t.Fatalf("Hex() returned %q twice in 1000 calls", h)
		}
		seen[h] = true
	}
}
