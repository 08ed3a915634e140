package bench

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/testenv"
)

func TestCPUModel(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n"
	if got, want := cpuModel([]byte(cpuinfo)), "AMD EPYC 7B13 64-Core Processor"; got != want {
		t.Errorf("cpuModel = %q, want %q", got, want)
	}
	if got := cpuModel([]byte("processor\t: 0\nBogoMIPS\t: 50.00\n")); got != "" {
		t.Errorf("cpuModel without a model name = %q, want empty", got)
	}
}

func TestParseStatusKB(t *testing.T) {
	status := []byte("Name:\tbench\nVmPeak:\t 1300000 kB\nVmHWM:\t   24576 kB\nVmRSS:\t   20480 kB\nThreads:\t8\n")
	tests := []struct {
		field   string
		want    uint64
		wantErr bool
	}{
		{"VmRSS", 20480 << 10, false},
		{"VmHWM", 24576 << 10, false},
		{"Threads", 8 << 10, false},
		{"VmSwap", 0, true},
		{"Name", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			got, err := parseStatusKB(status, tt.field)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseStatusKB(%s) = %d, %v; want %d, error %v", tt.field, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestStatCPUTicks(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    uint64
		wantErr bool
	}{
		{"beam", "2955 (beam.smp) S 1 2954 2954 0 -1 4194304 2652569 0 1 0 9971 5552 0 0 20 0 20 0 4268", 9971 + 5552, false},
		{"a command with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0", 7, false},
		{"cut short", "7 (x) R 1 7 7", 0, true},
		{"no command", "7 x R", 0, true},
		{"garbled utime", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 u 4 0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := statCPUTicks([]byte(tt.stat))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("statCPUTicks = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"amqp://guest:guest@localhost:5672/", true},
		{"amqp://guest:guest@127.0.0.1:5672/", true},
		{"amqp://127.9.9.9/", true},
		{"amqp://[::1]:5672/", true},
		{"amqp://guest:guest@rabbit.example.com:5672/", false},
		{"amqp://10.0.0.5:5672/", false},
		{"amqps://192.168.1.2/", false},
		{"amqp://%zz", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := checkLoopback(tt.url)
			if (err == nil) != tt.ok {
				t.Errorf("checkLoopback(%q) = %v, want ok %v", tt.url, err, tt.ok)
			}
			if err != nil && strings.Contains(err.Error(), "guest:guest") {
				t.Errorf("checkLoopback(%q) = %q: the error shows the credentials", tt.url, err)
			}
		})
	}
}

func TestShellJoin(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--format", "markdown", "--out", "docs/benchmarks.md"}, "--format markdown --out docs/benchmarks.md"},
		{[]string{"--out", "my report.md"}, "--out 'my report.md'"},
		{[]string{"--out", "it's.md"}, `--out 'it'\''s.md'`},
		{[]string{""}, "''"},
	}
	for _, tt := range tests {
		if got := shellJoin(tt.args); got != tt.want {
			t.Errorf("shellJoin(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestSchedCPU reads this process's CPU time from its threads' schedstat:
// it must see CPU spent since, to well under the 10 ms of a tick.
func TestSchedCPU(t *testing.T) {
	before, err := schedCPU(os.Getpid())
	if err != nil {
		// Without it the quick runs' broker CPU rows can read 0 µs: in CI,
		// where TestRunQuick asserts them, that is a failure.
		testenv.Unavailable(t, "no schedstat on this kernel: processCPU falls back to 10 ms ticks: %v", err)
	}
	start := cpuTime()
	for cpuTime()-start < 30*time.Millisecond {
		// spin: burn CPU that getrusage sees
	}
	after, err := schedCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 20*time.Millisecond {
		t.Errorf("schedstat saw %s of CPU while getrusage saw 30ms or more", d)
	}
}

func TestParseListeners(t *testing.T) {
	// Two listeners, on 5672 (0x1628) and 5703 (0x1647), and a connection
	// from 5703 (state 01): only the listener on the port counts.
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1628 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1647 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2222 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1647 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 3333 1 0000000000000000 20 4 30 10 -1
`
	for _, tt := range []struct {
		port int
		want map[string]bool
	}{
		{5672, map[string]bool{"1111": true}},
		{5703, map[string]bool{"2222": true}},
		{15672, map[string]bool{}},
	} {
		if diff := cmp.Diff(tt.want, parseListeners(table, tt.port)); diff != "" {
			t.Errorf("parseListeners(%d) (-want +got):\n%s", tt.port, diff)
		}
	}
}

func TestAMQPPort(t *testing.T) {
	for url, want := range map[string]int{
		"amqp://guest:guest@127.0.0.1:5703/": 5703,
		"amqp://guest:guest@localhost/":      5672,
		"amqps://broker/":                    5671,
	} {
		if got := amqpPort(url); got != want {
			t.Errorf("amqpPort(%q) = %d, want %d", url, got, want)
		}
	}
}
