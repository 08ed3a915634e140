package retry_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// closedURL returns an amqp:// URL, with a password, of a loopback port
// nothing listens on.
func closedURL(t *testing.T, password string) string {
	t.Helper()
	return "amqp://guest:" + password + "@" + retrytest.RefusedAddr(t) + "/"
}

func TestDialAnyNoNode(t *testing.T) {
	a, b := closedURL(t, "s3cret-a"), closedURL(t, "s3cret-b")
	tests := []struct {
		name     string
		urls     []string
		want     []string // in the error's text
		wantNone bool     // the error is ErrNoBroker
	}{
		{name: "empty list", wantNone: true},
		{name: "one node", urls: []string{a}, want: []string{retry.RedactURL(a)}},
		{name: "two nodes", urls: []string{a, b}, want: []string{"no broker node of 2 answers", retry.RedactURL(a), retry.RedactURL(b)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := retry.DialAny(tt.urls, "relay test")
			if err == nil {
				conn.Close()
				t.Fatal("DialAny = nil error, want one")
			}
			if got := errors.Is(err, retry.ErrNoBroker); got != tt.wantNone {
				t.Errorf("errors.Is(%v, ErrNoBroker) = %v, want %v", err, got, tt.wantNone)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, secret := range []string{"s3cret-a", "s3cret-b"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error shows the password %q: %v", secret, err)
				}
			}
		})
	}
}

// logLine is the part of a log line the tests read.
type logLine struct {
	Msg        string `json:"msg"`
	NextBroker string `json:"next_broker"`
}

// readLog decodes the JSON log lines in s.
func readLog(t *testing.T, s string) []logLine {
	t.Helper()
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// TestSuperviseAnyMovesOn checks that SuperviseAny, when no node answers,
// tries every node in turn, in the list's order from wherever it started,
// and names each by RedactURL only.
func TestSuperviseAnyMovesOn(t *testing.T) {
	tests := []struct {
		name  string
		nodes int
	}{
		{"one node", 1},
		{"three nodes", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var urls []string
			for i := range tt.nodes {
				urls = append(urls, closedURL(t, fmt.Sprintf("s3cret-%d", i)))
			}
			var out retrytest.Buffer
			log := slog.New(slog.NewJSONHandler(&out, nil))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err := retry.SuperviseAny(ctx, urls, "relay test", log, func(context.Context, *amqp.Connection) error {
				t.Error("fn ran, but no node listens")
				return nil
			})
			if err != nil {
				t.Fatalf("SuperviseAny = %v, want nil once ctx is done", err)
			}
			logs := out.String()
			for i := range tt.nodes {
				if secret := fmt.Sprintf("s3cret-%d", i); strings.Contains(logs, secret) {
					t.Errorf("the log shows the password %q", secret)
				}
			}
			var next []string
			for _, l := range readLog(t, logs) {
				if l.Msg == "broker connection lost, reconnecting" {
					next = append(next, l.NextBroker)
				}
			}
			// The waits are at most 250ms, 500ms and 1s: three seconds hold four
			// attempts at least.
			if len(next) < 4 {
				t.Fatalf("%d reconnect attempts in 3s, want 4 or more:\n%s", len(next), logs)
			}
			if tt.nodes == 1 {
				// One node: the log is Supervise's, without next_broker.
				if slices.ContainsFunc(next, func(s string) bool { return s != "" }) {
					t.Errorf("next_broker logged for a single node: %q", next)
				}
				return
			}
			redacted := make([]string, len(urls))
			for i, u := range urls {
				redacted[i] = retry.RedactURL(u)
			}
			at := slices.Index(redacted, next[0])
			if at < 0 {
				t.Fatalf("next_broker %q is none of %q", next[0], redacted)
			}
			for k, got := range next {
				if want := redacted[(at+k)%len(redacted)]; got != want {
					t.Errorf("attempt %d: next_broker %q, want %q (the list in order, round and round)", k+1, got, want)
				}
			}
		})
	}
}

func TestSuperviseAnyNoAddress(t *testing.T) {
	err := retry.SuperviseAny(context.Background(), nil, "relay test", slog.New(slog.DiscardHandler), func(context.Context, *amqp.Connection) error {
		return nil
	})
	if !errors.Is(err, retry.ErrNoBroker) {
		t.Errorf("SuperviseAny(no URL) = %v, want ErrNoBroker", err)
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		min, max time.Duration
	}{
		{name: "first attempt", n: 1, min: 125 * time.Millisecond, max: 250 * time.Millisecond},
		{name: "second attempt doubles", n: 2, min: 250 * time.Millisecond, max: 500 * time.Millisecond},
		{name: "fifth attempt reaches the cap", n: 5, min: retry.MaxBackoff / 2, max: retry.MaxBackoff},
		{name: "a long outage stays at the cap", n: 1000, min: retry.MaxBackoff / 2, max: retry.MaxBackoff},
		{name: "zero counts as the first", n: 0, min: 125 * time.Millisecond, max: 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 200 {
				if got := retry.Backoff(tt.n); got < tt.min || got > tt.max {
					t.Fatalf("Backoff(%d) = %s, want %s to %s", tt.n, got, tt.min, tt.max)
				}
			}
		})
	}
}
