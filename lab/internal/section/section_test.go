package section

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMarkers(t *testing.T) {
	tests := []struct {
		name, label        string
		markers            func(string) (string, string)
		wantStart, wantEnd string
	}{
		{"a named section", "bench:4.3", Markers, "<!-- bench:4.3:start -->", "<!-- bench:4.3:end -->"},
		{"the page's own bench-peers section", "", Peers, "<!-- bench-peers:start -->", "<!-- bench-peers:end -->"},
		{"bench-peers on another broker", "4.3", Peers, "<!-- bench-peers:4.3:start -->", "<!-- bench-peers:4.3:end -->"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if start, end := tt.markers(tt.label); start != tt.wantStart || end != tt.wantEnd {
				t.Errorf("markers(%q) = %q, %q; want %q, %q", tt.label, start, end, tt.wantStart, tt.wantEnd)
			}
		})
	}
}

// TestReplaceLabelled replaces the section of one broker in a page that
// holds other sections: those stay as they are.
func TestReplaceLabelled(t *testing.T) {
	start, end := Markers("bench:4.3")
	section := start + "\n## On RabbitMQ 4.3\n\nnew\n" + end + "\n"
	peers := PeersStart + "\npeers\n" + PeersEnd + "\n"
	other := "<!-- bench:4.0:start -->\nfour-oh\n<!-- bench:4.0:end -->\n"
	tests := []struct {
		name    string
		doc     string
		want    string
		wantErr error
	}{
		{"no file yet", "", section, nil},
		{"markers missing: appended after a blank line", "# Benchmarks\n\nold\n", "# Benchmarks\n\nold\n\n" + section, nil},
		{"markers missing, no final newline", "# Benchmarks", "# Benchmarks\n\n" + section, nil},
		{"markers present: replaced, the rest untouched",
			"# Benchmarks\n\nold\n\n" + peers + "\n" + start + "\nstale\nstale\n" + end + "\n\n" + other,
			"# Benchmarks\n\nold\n\n" + peers + "\n" + section + "\n" + other, nil},
		{"another broker's section is not this one's", "# B\n\n" + other, "# B\n\n" + other + "\n" + section, nil},
		{"end before start", end + "\n" + start + "\n", "", ErrMarkers},
		{"start alone", "x\n" + start + "\n", "", ErrMarkers},
		{"two sections", start + end + start + end, "", ErrMarkers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Replace(tt.doc, section, start, end)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Replace (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReplacePeers replaces the page's own bench-peers section.
func TestReplacePeers(t *testing.T) {
	section := PeersStart + "\nnew\n" + PeersEnd + "\n"
	tests := []struct {
		name    string
		doc     string
		want    string
		wantErr error
	}{
		{"empty document", "", section, nil},
		{"no markers: appended after a blank line", "# Benchmarks\n\ntext\n", "# Benchmarks\n\ntext\n\n" + section, nil},
		{"no markers, no final newline", "# Benchmarks", "# Benchmarks\n\n" + section, nil},
		{
			"markers in the middle: replaced, the rest kept",
			"# B\n\nbefore\n\n" + PeersStart + "\nold\nold\n" + PeersEnd + "\n\nafter\n",
			"# B\n\nbefore\n\n" + section + "\nafter\n", nil,
		},
		{"markers at the end", "# B\n" + PeersStart + "\nold\n" + PeersEnd + "\n", "# B\n" + section, nil},
		{"markers at the end without a newline", "# B\n" + PeersStart + "\nold\n" + PeersEnd, "# B\n" + section, nil},
		{"a blank document keeps its blank lines", "\n\n", "\n\n" + section, nil},
		{"end before start", PeersEnd + "\n" + PeersStart + "\n", "", ErrMarkers},
		{"start alone", "x\n" + PeersStart + "\n", "", ErrMarkers},
		{"end alone", "x\n" + PeersEnd + "\n", "", ErrMarkers},
		{"two sections", PeersStart + PeersEnd + PeersStart + PeersEnd, "", ErrMarkers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Replace(tt.doc, section, PeersStart, PeersEnd)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Replace error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Replace (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteFile writes over a file, which keeps its permissions, and a
// new one, which gets 0644, and leaves no temporary file behind.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(old, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		mode os.FileMode
	}{{old, 0o640}, {filepath.Join(dir, "new.md"), 0o644}} {
		if err := WriteFile(tt.path, []byte("new\n")); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(tt.path); err != nil || string(got) != "new\n" {
			t.Errorf("%s: %q, %v; want %q", tt.path, got, err, "new\n")
		}
		info, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != tt.mode {
			t.Errorf("%s: mode %v, want %v", tt.path, info.Mode().Perm(), tt.mode)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("%d files in the directory, want 2: %v", len(entries), entries)
	}
}

func TestWriteFileUnwritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "benchmarks.md")
	if err := WriteFile(path, []byte("x")); err == nil {
		t.Errorf("WriteFile into a missing directory = nil, want an error")
	}
}
