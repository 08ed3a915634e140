package bench

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
)

func TestParseOptionsDefaults(t *testing.T) {
	both := []retry.QueueType{retry.Classic, retry.Quorum}
	tests := []struct {
		name string
		args []string
		want Options
	}{
		{"full run", nil, Options{Format: "text", QueueTypes: both, Figures: AllFigures, Rounds: 2,
			Ingest: 20000, Clients: 64, Consume: 50000, Prefetch: 16, Concurrency: 8, RoundTrips: 5000,
			Latency: 1000, Window: 16, Delay: 50 * time.Millisecond, Delayed: 100000, Streams: 1500, HistoryNotifications: 1_000_000, Timeout: 2 * time.Minute}},
		{"quick run", []string{"--quick"}, Options{Format: "text", Quick: true, QueueTypes: both, Figures: AllFigures, Rounds: 1,
			Ingest: 1000, Clients: 64, Consume: 3000, Prefetch: 16, Concurrency: 8, RoundTrips: 300,
			Latency: 100, Window: 16, Delay: 50 * time.Millisecond, Delayed: 5000, Streams: 300, HistoryNotifications: 20000, Timeout: 2 * time.Minute}},
		{"a count given wins over --quick", []string{"--quick", "--ingest", "77", "--rounds", "3", "--history-notifications", "1234"}, Options{Format: "text", Quick: true,
			QueueTypes: both, Figures: AllFigures, Rounds: 3, Ingest: 77, Clients: 64, Consume: 3000, Prefetch: 16, Concurrency: 8,
			RoundTrips: 300, Latency: 100, Window: 16, Delay: 50 * time.Millisecond, Delayed: 5000, Streams: 300, HistoryNotifications: 1234, Timeout: 2 * time.Minute}},
		{"markdown to a file, one queue type, two figures, repeated names once",
			[]string{"--format", "markdown", "--out", "docs/benchmarks.md", "--queues", "quorum,quorum", "--figures", "retry, memory,retry"},
			Options{Format: "markdown", Out: "docs/benchmarks.md", QueueTypes: []retry.QueueType{retry.Quorum},
				Figures: []string{"retry", "memory"}, Rounds: 2, Ingest: 20000, Clients: 64, Consume: 50000, Prefetch: 16,
				Concurrency: 8, RoundTrips: 5000, Latency: 1000, Window: 16, Delay: 50 * time.Millisecond, Delayed: 100000,
				Streams: 1500, HistoryNotifications: 1_000_000, Timeout: 2 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOptions(tt.args, io.Discard)
			if err != nil {
				t.Fatalf("ParseOptions(%q): %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseOptions(%q) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestParseOptionsErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // the error names the flag and the value
	}{
		{"unknown format", []string{"--format", "html"}, "--format html"},
		{"no clients", []string{"--clients", "0"}, "--clients 0"},
		{"too many clients", []string{"--clients", "5000"}, "--clients 5000"},
		{"unknown queue type", []string{"--queues", "stream"}, `--queues "stream"`},
		{"empty queue list", []string{"--queues", ""}, `--queues ""`},
		{"unknown figure", []string{"--figures", "ingest,latency"}, `--figures "ingest,latency"`},
		{"no requests", []string{"--ingest", "0"}, "--ingest 0"},
		{"negative consume", []string{"--consume", "-5"}, "--consume -5"},
		{"no prefetch", []string{"--prefetch", "0"}, "--prefetch 0"},
		{"no concurrency", []string{"--concurrency", "0"}, "--concurrency 0"},
		{"no round trips", []string{"--roundtrips", "0"}, "--roundtrips 0"},
		{"no timed round trips", []string{"--latency", "0"}, "--latency 0"},
		{"no window", []string{"--window", "0"}, "--window 0"},
		{"delay too short", []string{"--delay", "100us"}, "--delay 100µs"},
		{"delay too long", []string{"--delay", "2m"}, "--delay 2m0s"},
		{"nothing delayed", []string{"--delayed", "0"}, "--delayed 0"},
		{"no streams", []string{"--streams", "0"}, "--streams 0"},
		{"more streams than the API allows", []string{"--streams", "2001"}, "--streams 2001"},
		{"too many rounds", []string{"--rounds", "11"}, "--rounds 11"},
		{"an empty history", []string{"--history-notifications", "0"}, "--history-notifications 0"},
		{"too big a history", []string{"--history-notifications", "20000000"}, "--history-notifications 20000000"},
		{"an unknown history figure", []string{"--figures", "history-list"}, `--figures "history-list"`},
		{"timeout too short", []string{"--timeout", "10ms"}, "--timeout 10ms"},
		{"a stray argument", []string{"--quick", "now"}, `unexpected argument "now"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseOptions(tt.args, io.Discard)
			if err == nil {
				t.Fatalf("ParseOptions(%q) = nil error, want one naming %q", tt.args, tt.want)
			}
			if !errors.Is(err, errFlags) {
				t.Errorf("ParseOptions(%q) = %v, want an errFlags error", tt.args, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseOptions(%q) = %q, want it to contain %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestParseOptionsFlagSyntax(t *testing.T) {
	var out strings.Builder
	_, err := ParseOptions([]string{"--ingest", "many"}, &out)
	if err == nil || !strings.Contains(err.Error(), "many") {
		t.Errorf("ParseOptions(--ingest many) = %v, want an error quoting the value", err)
	}
	out.Reset()
	if _, err := ParseOptions([]string{"--help"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("ParseOptions(--help) = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(out.String(), "-quick") {
		t.Errorf("--help printed %q, want the flags listed", out.String())
	}
}
