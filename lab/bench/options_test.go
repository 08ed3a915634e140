package bench

import (
	"errors"
	"flag"
	"io"
	"slices"
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
			Ingest: 20000, Clients: 64, BatchSize: 100, BatchClients: 8, Consume: 50000, Prefetch: 16, Concurrency: 8, RoundTrips: 5000,
			Latency: 1000, Window: 16, Delay: 50 * time.Millisecond, Waiting: 1_000_000, Scheduled: 10000, Streams: 1500, HistoryNotifications: 1_000_000, DeadLetters: 100_000, Timeout: 2 * time.Minute}},
		{"quick run", []string{"--quick"}, Options{Format: "text", Quick: true, QueueTypes: both, Figures: AllFigures, Rounds: 1,
			Ingest: 1000, Clients: 64, BatchSize: 100, BatchClients: 8, Consume: 3000, Prefetch: 16, Concurrency: 8, RoundTrips: 300,
			Latency: 100, Window: 16, Delay: 50 * time.Millisecond, Waiting: 5000, Scheduled: 500, Streams: 300, HistoryNotifications: 20000, DeadLetters: 1000, Timeout: 2 * time.Minute}},
		{"--waiting and its deprecated name --delayed", []string{"--quick", "--delayed", "777"}, Options{Format: "text", Quick: true,
			QueueTypes: both, Figures: AllFigures, Rounds: 1, Ingest: 1000, Clients: 64, BatchSize: 100, BatchClients: 8, Consume: 3000,
			Prefetch: 16, Concurrency: 8, RoundTrips: 300, Latency: 100, Window: 16, Delay: 50 * time.Millisecond, Waiting: 777, Scheduled: 500,
			Streams: 300, HistoryNotifications: 20000, DeadLetters: 1000, Timeout: 2 * time.Minute}},
		{"batches and waiting messages", []string{"--waiting", "2500000", "--batch-size", "500", "--batch-clients", "2",
			"--figures", "ingest-batch,retry-direct,memory"}, Options{Format: "text", QueueTypes: both,
			Figures: []string{"ingest-batch", "retry-direct", "memory"}, Rounds: 2, Ingest: 20000, Clients: 64, BatchSize: 500,
			BatchClients: 2, Consume: 50000, Prefetch: 16, Concurrency: 8, RoundTrips: 5000, Latency: 1000, Window: 16,
			Delay: 50 * time.Millisecond, Waiting: 2_500_000, Scheduled: 10000, Streams: 1500, HistoryNotifications: 1_000_000, DeadLetters: 100_000, Timeout: 2 * time.Minute}},
		{"a section of the markdown page", []string{"--quick", "--format", "markdown", "--section", "4.3"}, Options{Format: "markdown", Section: "4.3", Quick: true,
			QueueTypes: both, Figures: AllFigures, Rounds: 1, Ingest: 1000, Clients: 64, BatchSize: 100, BatchClients: 8, Consume: 3000, Prefetch: 16, Concurrency: 8,
			RoundTrips: 300, Latency: 100, Window: 16, Delay: 50 * time.Millisecond, Waiting: 5000, Scheduled: 500, Streams: 300, HistoryNotifications: 20000, DeadLetters: 1000, Timeout: 2 * time.Minute}},
		{"a count given wins over --quick", []string{"--quick", "--ingest", "77", "--rounds", "3", "--history-notifications", "1234"}, Options{Format: "text", Quick: true,
			QueueTypes: both, Figures: AllFigures, Rounds: 3, Ingest: 77, Clients: 64, BatchSize: 100, BatchClients: 8, Consume: 3000, Prefetch: 16, Concurrency: 8,
			RoundTrips: 300, Latency: 100, Window: 16, Delay: 50 * time.Millisecond, Waiting: 5000, Scheduled: 500, Streams: 300, HistoryNotifications: 1234, DeadLetters: 1000, Timeout: 2 * time.Minute}},
		{"markdown to a file, one queue type, two figures, repeated names once",
			[]string{"--format", "markdown", "--out", "docs/benchmarks.md", "--queues", "quorum,quorum", "--figures", "retry, memory,retry"},
			Options{Format: "markdown", Out: "docs/benchmarks.md", QueueTypes: []retry.QueueType{retry.Quorum},
				Figures: []string{"retry", "memory"}, Rounds: 2, Ingest: 20000, Clients: 64, BatchSize: 100, BatchClients: 8, Consume: 50000, Prefetch: 16,
				Concurrency: 8, RoundTrips: 5000, Latency: 1000, Window: 16, Delay: 50 * time.Millisecond, Waiting: 1_000_000, Scheduled: 10000,
				Streams: 1500, HistoryNotifications: 1_000_000, DeadLetters: 100_000, Timeout: 2 * time.Minute}},
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
		{"a section that is no label", []string{"--format", "markdown", "--section", "4.3 -->"}, "--section 4.3 -->"},
		{"a section of a text report", []string{"--section", "4.3"}, "--section 4.3"},
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
		{"nothing waiting", []string{"--waiting", "0"}, "--waiting 0"},
		{"too many waiting", []string{"--waiting", "10000001"}, "--waiting 10000001"},
		{"too many delayed", []string{"--delayed", "10000001"}, "--delayed 10000001"},
		{"both names of --waiting", []string{"--waiting", "10", "--delayed", "10"}, "--delayed is the deprecated name of --waiting"},
		{"an empty batch", []string{"--batch-size", "0"}, "--batch-size 0"},
		{"a batch over the API's MAX_BATCH", []string{"--batch-size", "501"}, "--batch-size 501"},
		{"no batch clients", []string{"--batch-clients", "0"}, "--batch-clients 0"},
		{"an unknown retry figure", []string{"--figures", "retry-stages"}, `--figures "retry-stages"`},
		{"no streams", []string{"--streams", "0"}, "--streams 0"},
		{"more streams than the API allows", []string{"--streams", "2001"}, "--streams 2001"},
		{"too many rounds", []string{"--rounds", "11"}, "--rounds 11"},
		{"an empty history", []string{"--history-notifications", "0"}, "--history-notifications 0"},
		{"too big a history", []string{"--history-notifications", "20000000"}, "--history-notifications 20000000"},
		{"an unknown history figure", []string{"--figures", "history-list"}, `--figures "history-list"`},
		{"timeout too short", []string{"--timeout", "10ms"}, "--timeout 10ms"},
		{"no lanes", []string{"--noisy-lanes", "0"}, `--noisy-lanes "0"`},
		{"more lanes than a route has", []string{"--noisy-lanes", "1,65"}, `--noisy-lanes "1,65"`},
		{"lanes that are no number", []string{"--noisy-lanes", "8,"}, `--noisy-lanes "8,"`},
		{"an unknown way of naming receivers", []string{"--noisy-receivers", "endpoints,tenant"}, `--noisy-receivers "endpoints,tenant": want a comma-separated list of endpoints, hosts, tenants`},
		{"an empty way of naming receivers", []string{"--noisy-receivers", "tenants,"}, `--noisy-receivers "tenants,"`},
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
	// The help lists every flag, says what each group of figures measures
	// and that --delayed is the old name of --waiting.
	for _, want := range []string{"-quick", "-waiting", "-delayed", "deprecated: the old name of --waiting", "-batch-size",
		"retry-direct: retry round trips with the direct hand-off", "ingest-batch: POST /v1/notifications/batch",
		"-noisy-receivers", "endpoints (two registered endpoints of one tenant), hosts (bare URLs of two hosts), tenants (an endpoint of each of two tenants"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range AllFigures {
		if figureHelp[f] == "" {
			t.Errorf("figure group %q has no help", f)
		}
	}
}

func TestOptionsBatchNotifications(t *testing.T) {
	tests := []struct {
		ingest, size, want int
	}{
		{20000, 100, 20000},
		{1000, 500, 1000},
		{77, 100, 100},
		{1001, 100, 1100},
	}
	for _, tt := range tests {
		o := Options{Ingest: tt.ingest, BatchSize: tt.size}
		if got := o.batchNotifications(); got != tt.want {
			t.Errorf("%d notifications in batches of %d: %d posted, want %d", tt.ingest, tt.size, got, tt.want)
		}
	}
}

func TestOptionsWaitingTimeout(t *testing.T) {
	o := Options{Timeout: 2 * time.Minute, Waiting: 1_000_000}
	if got, want := o.waitingTimeout(), 2*time.Minute+500*time.Second; got != want {
		t.Errorf("waitingTimeout with 1,000,000 waiting = %s, want %s", got, want)
	}
}

// TestParseNoisyLanes reads --noisy-lanes as the WORK_LANES settings the
// noisy figure compares, each once, in the order given.
func TestParseNoisyLanes(t *testing.T) {
	o, err := ParseOptions([]string{"--noisy-lanes", "8, 1,8"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.NoisyLanes, []int{8, 1}) {
		t.Errorf("--noisy-lanes '8, 1,8' = %v, want [8 1]", o.NoisyLanes)
	}
	if o, err := ParseOptions(nil, io.Discard); err != nil || o.NoisyLanes != nil {
		t.Errorf("no --noisy-lanes = %v, %v; want none: the figure's defaults", o.NoisyLanes, err)
	}
}

// TestParseNoisyReceivers reads --noisy-receivers as the ways of naming
// the receivers the noisy figure compares, each once, in the order given.
func TestParseNoisyReceivers(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"none given: the figure's defaults", nil, nil},
		{"the tenants row alone", []string{"--noisy-receivers", "tenants"}, []string{"tenants"}},
		{"each once, in order", []string{"--noisy-receivers", "tenants, endpoints,tenants,hosts"}, []string{"tenants", "endpoints", "hosts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseOptions(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, o.NoisyReceivers); diff != "" {
				t.Errorf("ParseOptions(%q).NoisyReceivers (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}
