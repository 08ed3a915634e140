package status

import (
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

func TestAttemptProvider(t *testing.T) {
	p := printer{width: 120, loc: time.UTC}
	tests := []struct {
		name string
		a    notification.Attempt
		want string
	}{
		{"through a provider", notification.Attempt{N: 2, Outcome: retry.Delivered, Provider: "secondary"},
			"  10:00:00.000  attempt 2  delivered  via secondary"},
		{"without one", notification.Attempt{N: 1, Outcome: retry.Delivered}, "  10:00:00.000  attempt 1  delivered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.attempt("10:00:00.000", len("attempt 1"), tt.a, true)
			if strings.TrimRight(got, " ") != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
