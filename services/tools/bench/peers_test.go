package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeepPeers(t *testing.T) {
	const report = "# Benchmarks\n\nnew figures\n"
	section := peersStart + "\n## Peers\n\n| tool | rate |\n|---|---|\n| x | 1 |\n" + peersEnd
	tests := []struct {
		name         string
		old          string
		want         string
		wantComplete bool
	}{
		{"no old file's section", "# Benchmarks\n\nold figures\n", report, true},
		{"a section at the end", "# Benchmarks\n\nold figures\n\n" + section + "\n", report + "\n" + section + "\n", true},
		{"a section in the middle, text after it dropped", "# Benchmarks\n\n" + section + "\n\nold prose\n", report + "\n" + section + "\n", true},
		{"no newline after the end marker", "old\n" + section, report + "\n" + section + "\n", true},
		{"two sections, in order", section + "\nbetween\n" + strings.ReplaceAll(section, "| x | 1 |", "| y | 2 |"),
			report + "\n" + section + "\n\n" + strings.ReplaceAll(section, "| x | 1 |", "| y | 2 |") + "\n", true},
		{"a start with no end keeps the rest", "old\n" + peersStart + "\nhalf a section\n", report + "\n" + peersStart + "\nhalf a section\n", false},
		{"an end with no start keeps nothing", "old\n" + peersEnd + "\n", report, true},
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
	section := peersStart + "\n## Against other libraries\n\nmeasured by make bench-peers\n" + peersEnd + "\n"
	md := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(md, []byte("# Benchmarks\n\nold\n\n"+section), 0o640); err != nil {
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
	if want := "# Benchmarks\n\nnew\n\n" + section; string(got) != want {
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
	}{{"new.md", "", true}, {"report.json", section, false}} {
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
	if err := os.WriteFile(md, []byte("old\n"+peersStart+"\nhalf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.writeReport(md, []byte("new\n"), true); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(md); string(got) != "new\n\n"+peersStart+"\nhalf\n" {
		t.Errorf("report is %q, want the unfinished section kept", got)
	}
	if !strings.Contains(progress.String(), "WARNING") || !strings.Contains(progress.String(), peersEnd) {
		t.Errorf("progress %q, want a warning naming the missing end marker", progress.String())
	}
}

func TestWriteReportUnwritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "benchmarks.md")
	if err := (&bench{}).writeReport(path, []byte("x"), true); err == nil {
		t.Errorf("writeReport into a missing directory = nil, want an error")
	}
}
