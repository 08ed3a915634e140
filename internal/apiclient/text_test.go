package apiclient

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

func TestClip(t *testing.T) {
	tests := []struct {
		name  string
		s     string
		width int
		want  string
	}{
		{"fits", "503 Service Unavailable", 23, "503 Service Unavailable"},
		{"cut before the word that does not fit", "503 Service Unavailable", 22, "503 Service…"},
		{"a space right at the cut", "451 mailbox busy", 12, "451 mailbox…"},
		{"trailing punctuation goes", "send email: 451 mailbox busy", 14, "send email…"},
		{"one long word is cut inside", "https://hooks.example/orders/7f3a9c", 12, "https://hoo…"},
		{"a long word after a short one: cut inside, not down to the first word", "webhook http://127.0.0.1:9090/webhooks/down: 503", 20, "webhook http://127.…"},
		{"line breaks and tabs become spaces", "451-first line\r\n451\tsecond line", 40, "451-first line 451 second line"},
		{"runes, not bytes", "échec: boîte pleine, réessayez", 21, "échec: boîte pleine…"},
		{"no room", "anything", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Clip(tt.s, tt.width)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Clip(%q, %d) (-want +got):\n%s", tt.s, tt.width, diff)
			}
		})
	}
}

func TestMillis(t *testing.T) {
	tests := []struct {
		ms   int64
		want string
	}{
		{0, "0ms"},
		{350, "350ms"},
		{1000, "1s"},
		{1234, "1.2s"},
		{9960, "10s"},
		{15400, "15s"},
		{150000, "2m30s"},
		{300000, "5m"},
		{3600000, "1h"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Millis(tt.ms); got != tt.want {
				t.Errorf("Millis(%d) = %q, want %q", tt.ms, got, tt.want)
			}
		})
	}
}

func TestLabel(t *testing.T) {
	tests := []struct {
		a    notification.Attempt
		want string
	}{
		{notification.Attempt{N: 2}, "attempt 2"},
		{notification.Attempt{N: 1, Round: 1}, "attempt 1, round 1"},
		{notification.Attempt{N: 0, Round: 2, Outcome: retry.Replayed}, "round 2"},
		{notification.Attempt{N: 1, Outcome: retry.Cancelled}, "before attempt 1"},
		{notification.Attempt{N: 3, Round: 1, Outcome: retry.Cancelled}, "before attempt 3, round 1"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Label(tt.a); got != tt.want {
				t.Errorf("Label(%+v) = %q, want %q", tt.a, got, tt.want)
			}
		})
	}
}

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		name string
		a    notification.Attempt
		want string
	}{
		{"a failure retried", notification.Attempt{N: 1, Outcome: retry.Failed}, "failed"},
		{"a failure deferred", notification.Attempt{N: 1, Outcome: retry.Failed, Deferred: true}, "deferred"},
		{"delivered", notification.Attempt{N: 2, Outcome: retry.Delivered}, "delivered"},
		{"parked, whatever it says", notification.Attempt{N: 3, Outcome: retry.Parked, Deferred: true}, "parked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OutcomeOf(tt.a); got != tt.want {
				t.Errorf("OutcomeOf(%+v) = %q, want %q", tt.a, got, tt.want)
			}
		})
	}
}
