package peers

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/lab/internal/section"
)

// TestLabelledSection writes the section of another broker into a page
// that has the page's own: appended the first time, replaced the second,
// and the page's own section, before and after it, untouched; and the
// page's own section rewritten leaves the labelled one alone.
func TestLabelledSection(t *testing.T) {
	start, end := section.Peers("4.3")
	own := section.PeersStart + "\nown\n" + section.PeersEnd + "\n"
	page := "# Benchmarks\n\nbench\n\n" + own
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"first", "second"} {
		if err := writeSection(path, start+"\n"+body+"\n"+end+"\n", "4.3"); err != nil {
			t.Fatalf("writeSection: %v", err)
		}
	}
	labelled := start + "\nsecond\n" + end + "\n"
	if got, _ := os.ReadFile(path); string(got) != page+"\n"+labelled {
		t.Errorf("page %q, want %q", got, page+"\n"+labelled)
	}
	if err := writeSection(path, section.PeersStart+"\nown again\n"+section.PeersEnd+"\n", ""); err != nil {
		t.Fatalf("writeSection: %v", err)
	}
	want := "# Benchmarks\n\nbench\n\n" + section.PeersStart + "\nown again\n" + section.PeersEnd + "\n\n" + labelled
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Errorf("page %q, want %q", got, want)
	}
}

func TestWriteSectionTwiceKeepsOneSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\n\nrelay-lab bench's part\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"first", "second"} {
		if err := writeSection(path, section.PeersStart+"\n"+body+"\n"+section.PeersEnd+"\n", ""); err != nil {
			t.Fatalf("writeSection: %v", err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\nrelay-lab bench's part\n\n" + section.PeersStart + "\nsecond\n" + section.PeersEnd + "\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("file (-want +got):\n%s", diff)
	}
}

func TestWriteSectionCreatesAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	sec := section.PeersStart + "\nx\n" + section.PeersEnd + "\n"
	if err := writeSection(path, sec, ""); err != nil {
		t.Fatalf("writeSection: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != sec {
		t.Errorf("file = %q, want %q", got, sec)
	}
}

func TestWriteSectionRefusesBrokenMarkers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	doc := "# B\n" + section.PeersStart + "\nno end\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, section.PeersStart+"\n"+section.PeersEnd+"\n", ""); !errors.Is(err, section.ErrMarkers) {
		t.Fatalf("writeSection = %v, want section.ErrMarkers", err)
	}
	if got, _ := os.ReadFile(path); string(got) != doc {
		t.Errorf("the file changed to %q", got)
	}
}

func result(name, title string, jobsPerSecond float64) Result {
	w := DefaultWorkload
	return Result{Name: name, Title: title, Workload: w, Server: "S 1",
		Elapsed: time.Duration(float64(w.Jobs) / jobsPerSecond * float64(time.Second)), Delivered: w.Jobs,
		ClientCPU: 2 * time.Second, ServerCPU: 4 * time.Second, ServerCPUOK: true, PeakRSS: 30 << 20, Settings: []string{"set " + name}}
}

func TestMarkdown(t *testing.T) {
	r := Report{Command: "make bench-peers", Machine: "m", Servers: []string{"S 1"}, Workload: DefaultWorkload, Notes: []string{"a note"},
		Results: []Result{
			result("relay-stages", "relay (stages)", 4000),
			result("raw", "raw amqp091-go", 5000),
			result("asynq", "asynq", 2000),
			result("asynq-always", "asynq (appendfsync always)", 1000),
			result("river", "River", 1000),
			{Name: "watermill", Title: "watermill-amqp", Workload: Workload{Jobs: 500}, Err: "timeout after 5m0s: 3 of 500 jobs finished"},
		}}
	md := r.Markdown()
	for _, want := range []string{
		section.PeersStart + "\n",
		"| relay (stages) | 4,000 | 2.00× | 4.00× | 0.80× | 0.80× | ",
		"| 20,000 / 0 / 0 / 0 | 100 | 200 | 30.0 |",
		"| asynq | 2,000 | 1.00× | 2.00× | 0.40× | — |",
		"relay (stages) met (0.80× raw amqp091-go, goal 0.6×)",
		"| watermill-amqp (500 jobs) | failed: timeout after 5m0s: 3 of 500 jobs finished |",
		"- **relay (stages)** (S 1): set relay-stages",
		"- a note",
		"relay (stages) not met (2.00× asynq, 4.00× River, watermill-amqp not measured)",
		section.PeersEnd + "\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the section lacks %q:\n%s", want, md)
		}
	}
	if !strings.HasSuffix(md, section.PeersEnd+"\n") {
		t.Errorf("the section does not end with the end marker")
	}
	// Another broker's section: its own markers, its broker in the heading.
	r.Section, r.Servers = "4.3", []string{"RabbitMQ 4.3.6", "Redis 7.0.15"}
	md = r.Markdown()
	start, end := section.Peers("4.3")
	if want := start + "\n## Against other job queues on RabbitMQ 4.3.6 (`--section 4.3`)\n"; !strings.HasPrefix(md, want) {
		t.Errorf("the labelled section starts %q, want %q", md[:min(len(md), 100)], want)
	}
	if !strings.HasSuffix(md, end+"\n") || strings.Contains(md, section.PeersStart) {
		t.Errorf("the labelled section carries the page's own markers, or not its own end")
	}
}

func TestVerdict(t *testing.T) {
	tests := []struct {
		name  string
		relay float64
		want  string
	}{
		{"ahead of all", 3000, "relay (stages) met (1.50× asynq, 3.00× River, 6.00× watermill-amqp)"},
		{"level with asynq is enough", 2000, "relay (stages) met (1.00× asynq, 2.00× River, 4.00× watermill-amqp)"},
		{"behind asynq", 1900, "relay (stages) not met (0.95× asynq"},
		{"level with River is not ahead", 1000, "relay (stages) not met (0.50× asynq, 1.00× River"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Report{Results: []Result{
				result("relay-stages", "relay (stages)", tt.relay),
				result("asynq", "asynq", 2000),
				result("river", "River", 1000),
				result("watermill", "watermill-amqp", 500),
			}}
			if got := r.Verdict(); !strings.Contains(got, tt.want) {
				t.Errorf("Verdict() = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestThousands(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {20000, "20,000"}, {1234567, "1,234,567"}, {-4500, "-4,500"}}
	for _, tt := range tests {
		if got := thousands(tt.n); got != tt.want {
			t.Errorf("thousands(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestFloorVerdict(t *testing.T) {
	tests := []struct {
		name    string
		results []Result
		want    string
	}{
		{"direct at its floor's 0.9", []Result{result("relay-direct", "relay (direct)", 900), result("raw", "raw amqp091-go", 1000)},
			"relay (direct) met (0.90× raw amqp091-go, goal 0.9×)"},
		{"stages below 0.6", []Result{result("relay-stages", "relay (stages)", 500), result("raw", "raw amqp091-go", 1000)},
			"relay (stages) not met (0.50× raw amqp091-go, goal 0.6×)"},
		{"quorum against the quorum loop", []Result{result("relay-direct-quorum", "relay (direct, quorum)", 950), result("raw", "raw amqp091-go", 2000), result("raw-quorum", "raw amqp091-go (quorum)", 1000)},
			"relay (direct, quorum) met (0.95× raw amqp091-go (quorum), goal 0.9×)"},
		{"native without its floor", []Result{result("relay-native", "relay (native, quorum)", 950), result("raw", "raw amqp091-go", 1000)},
			"relay (native, quorum) not met (it or its floor, raw-native, did not run to the end)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Report{Results: tt.results}).FloorVerdict(); !strings.Contains(got, tt.want) {
				t.Errorf("FloorVerdict() = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}
