package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRunRefusesBeforeTouchingTheBroker checks that bad flags and a broker
// off this machine are refused before anything is dialled: the URLs point
// nowhere a test could reach.
func TestRunRefusesBeforeTouchingTheBroker(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad flag", []string{"--format", "pdf"}, nil, "--format pdf"},
		{"remote broker", []string{"--quick"}, map[string]string{"AMQP_URL": "amqp://guest:guest@rabbit.example.com:5672/"}, "loopback"},
		{"private address", []string{"--quick"}, map[string]string{"AMQP_URL": "amqp://192.168.0.10:5672/"}, "loopback"},
		{"remote history database", []string{"--quick"}, map[string]string{"HISTORY_BENCH_DSN": "postgres://relay:s3cret@db.example.com/relay"}, "HISTORY_BENCH_DSN points at \"db.example.com\""},
		{"history database not a URL", []string{"--quick", "--figures", "history"}, map[string]string{"HISTORY_BENCH_DSN": "host=db user=relay"}, "HISTORY_BENCH_DSN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := Run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, &out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error about %q", err, tt.want)
			}
			if strings.Contains(out.String(), "# ") {
				t.Errorf("Run printed progress before refusing:\n%s", out.String())
			}
		})
	}
	if err := Run(context.Background(), []string{"--rounds", "0"}, func(string) string { return "" }, &strings.Builder{}); !errors.Is(err, errFlags) {
		t.Errorf("Run(--rounds 0) = %v, want errFlags", err)
	}
}
