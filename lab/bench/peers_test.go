package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/lab/internal/section"
)

func TestKeepPeers(t *testing.T) {
	const report = "# Benchmarks\n\nnew figures\n"
	sec := section.PeersStart + "\n## Peers\n\n| tool | rate |\n|---|---|\n| x | 1 |\n" + section.PeersEnd
	tests := []struct {
		name         string
		old          string
		want         string
		wantComplete bool
	}{
		{"no old file's section", "# Benchmarks\n\nold figures\n", report, true},
		{"a section at the end", "# Benchmarks\n\nold figures\n\n" + sec + "\n", report + "\n" + sec + "\n", true},
		{"a section in the middle, text after it dropped", "# Benchmarks\n\n" + sec + "\n\nold prose\n", report + "\n" + sec + "\n", true},
		{"no newline after the end marker", "old\n" + sec, report + "\n" + sec + "\n", true},
		{"two sections, in order", sec + "\nbetween\n" + strings.ReplaceAll(sec, "| x | 1 |", "| y | 2 |"),
			report + "\n" + sec + "\n\n" + strings.ReplaceAll(sec, "| x | 1 |", "| y | 2 |") + "\n", true},
		{"a start with no end keeps the rest", "old\n" + section.PeersStart + "\nhalf a section\n", report + "\n" + section.PeersStart + "\nhalf a section\n", false},
		{"an end with no start keeps nothing", "old\n" + section.PeersEnd + "\n", report, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, complete := keepPeers([]byte(report), []byte(tt.old))
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("keepPeers (-want +got):\n%s", diff)
			}
			if complete != tt.wantComplete {
				t.Errorf("complete = %v, want %v", complete, tt.wantComplete)
			}
		})
	}
}

// TestWriteReportKeepsPeers writes a markdown report over a file with a
// peers section, then a JSON report over another: only markdown keeps it.
func TestWriteReportKeepsPeers(t *testing.T) {
	dir := t.TempDir()
	sec := section.PeersStart + "\n## Against other libraries\n\nmeasured by make bench-peers\n" + section.PeersEnd + "\n"
	md := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(md, []byte("# Benchmarks\n\nold\n\n"+sec), 0o640); err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	b := &bench{out: &progress}
	if err := b.writeReport(md, []byte("# Benchmarks\n\nnew\n"), true); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Benchmarks\n\nnew\n\n" + sec; string(got) != want {
		t.Errorf("report is %q, want %q", got, want)
	}
	if info, err := os.Stat(md); err != nil || info.Mode().Perm() != 0o640 {
		t.Errorf("report's mode is %v (%v), want the old file's 0640", info.Mode().Perm(), err)
	}
	// A new file, and a JSON one: written as rendered.
	for _, tt := range []struct {
		name     string
		old      string
		markdown bool
	}{{"new.md", "", true}, {"report.json", sec, false}} {
		path := filepath.Join(dir, tt.name)
		if tt.old != "" {
			if err := os.WriteFile(path, []byte(tt.old), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.writeReport(path, []byte("{}\n"), tt.markdown); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != "{}\n" {
			t.Errorf("%s: %q, %v; want the report alone", tt.name, got, err)
		}
	}
	// Nothing of the temporary files is left.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("%d files in the directory, want 3: %v", len(entries), entries)
	}
	if progress.Len() != 0 {
		t.Errorf("progress %q, want none", progress.String())
	}

	// A start marker with no end: the rest is kept, and a warning says so.
	if err := os.WriteFile(md, []byte("old\n"+section.PeersStart+"\nhalf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.writeReport(md, []byte("new\n"), true); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(md); string(got) != "new\n\n"+section.PeersStart+"\nhalf\n" {
		t.Errorf("report is %q, want the unfinished section kept", got)
	}
	if !strings.Contains(progress.String(), "WARNING") || !strings.Contains(progress.String(), section.PeersEnd) {
		t.Errorf("progress %q, want a warning naming the missing end marker", progress.String())
	}
}

func TestWriteReportUnwritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "benchmarks.md")
	if err := (&bench{}).writeReport(path, []byte("x"), true); err == nil {
		t.Errorf("writeReport into a missing directory = nil, want an error")
	}
}

// TestKeepLabelledSections regenerates the page over one that has another
// broker's sections: the whole-page report keeps them, in order.
func TestKeepLabelledSections(t *testing.T) {
	bench43 := "<!-- bench:4.3:start -->\n## On RabbitMQ 4.3.6\n<!-- bench:4.3:end -->\n"
	peers43 := "<!-- bench-peers:4.3:start -->\n## peers on 4.3\n<!-- bench-peers:4.3:end -->\n"
	notes := "<!-- bench-notes:native:start -->\n## Native against direct\n<!-- bench-notes:native:end -->\n"
	peers := section.PeersStart + "\npeers\n" + section.PeersEnd + "\n"
	old := "# Benchmarks\n\nold\n\n" + peers + "\n" + bench43 + "\n" + peers43 + "\n" + notes
	got, complete := keepPeers([]byte("# Benchmarks\n\nnew\n"), []byte(old))
	if want := "# Benchmarks\n\nnew\n\n" + peers + "\n" + bench43 + "\n" + peers43 + "\n" + notes; string(got) != want || !complete {
		t.Errorf("keepPeers = %q, %v; want %q, true", got, complete, want)
	}
	// A labelled start marker with no end keeps the rest, as bench-peers's does.
	half := "# B\n\n<!-- bench:4.3:start -->\nhalf\n"
	if got, complete := keepPeers([]byte("new\n"), []byte(half)); string(got) != "new\n\n<!-- bench:4.3:start -->\nhalf\n" || complete {
		t.Errorf("keepPeers with a start marker alone = %q, %v", got, complete)
	}
}

// TestWriteReportSection writes a labelled section into a page twice: the
// first time it is appended, the second replaced, and the rest of the page
// stays byte for byte.
func TestWriteReportSection(t *testing.T) {
	md := filepath.Join(t.TempDir(), "benchmarks.md")
	page := "# Benchmarks\n\n3.10 figures\n\n" + section.PeersStart + "\npeers on 3.10\n" + section.PeersEnd + "\n"
	if err := os.WriteFile(md, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &bench{opts: Options{Section: "4.3"}}
	start, end := sectionMarkers("4.3")
	for i, body := range []string{"first run", "second run"} {
		sec := start + "\n" + body + "\n" + end + "\n"
		if err := b.writeReport(md, []byte(sec), true); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		if want := page + "\n" + sec; string(got) != want {
			t.Errorf("after run %d: %q, want %q", i+1, got, want)
		}
	}
	// Markers the page holds out of order: refused, the page kept.
	bad := page + end + "\n" + start + "\n"
	if err := os.WriteFile(md, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.writeReport(md, []byte(start+"\nx\n"+end+"\n"), true); !errors.Is(err, section.ErrMarkers) {
		t.Errorf("writeReport over markers out of order = %v, want %v", err, section.ErrMarkers)
	}
	if got, _ := os.ReadFile(md); string(got) != bad {
		t.Errorf("page changed to %q after a refused write", got)
	}
}

// TestWriteReportSectionOnABlankPage writes a labelled section over a
// page of blank lines alone: the page becomes the section.
func TestWriteReportSectionOnABlankPage(t *testing.T) {
	md := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(md, []byte("\n \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &bench{opts: Options{Section: "4.3"}}
	start, end := sectionMarkers("4.3")
	sec := start + "\nx\n" + end + "\n"
	if err := b.writeReport(md, []byte(sec), true); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(md); string(got) != sec {
		t.Errorf("page %q, want the section alone, %q", got, sec)
	}
}
