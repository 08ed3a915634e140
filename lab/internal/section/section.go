// Package section finds, replaces and writes the marked sections of a
// markdown page such as docs/benchmarks.md: the text between a start
// marker, <!-- name:start -->, and its end marker, <!-- name:end -->.
package section

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PeersStart and PeersEnd are the markers around the page's own
// bench-peers section, which `make bench-peers` writes and `relay-lab
// bench` keeps.
const (
	PeersStart = "<!-- bench-peers:start -->"
	PeersEnd   = "<!-- bench-peers:end -->"
)

// Markers returns the start and end markers of the section called name.
func Markers(name string) (start, end string) {
	return "<!-- " + name + ":start -->", "<!-- " + name + ":end -->"
}

// Peers returns the markers around the bench-peers section of label, a
// run on another broker (label 4.3: <!-- bench-peers:4.3:start -->); an
// empty label is the page's own bench-peers section.
func Peers(label string) (start, end string) {
	if label == "" {
		return PeersStart, PeersEnd
	}
	return Markers("bench-peers:" + label)
}

// ErrMarkers means a document holds a section's markers in an order or
// number Replace will not guess about.
var ErrMarkers = errors.New("section markers out of order")

// Replace returns doc with the text from start to end (the markers
// included) replaced by section, which carries the markers itself. With
// neither marker in doc, section is appended after a blank line, or is
// the whole result for an empty doc. Every other part of doc is kept as
// it is. A doc with one marker but not the other, the end before the
// start, or either one more than once is refused with an error wrapping
// ErrMarkers.
func Replace(doc, section, start, end string) (string, error) {
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	switch {
	case i < 0 && j < 0:
		if doc == "" {
			return section, nil
		}
		return strings.TrimRight(doc, "\n") + "\n\n" + section, nil
	case i < 0 || j < 0 || j < i || strings.Count(doc, start) > 1 || strings.Count(doc, end) > 1:
		return "", fmt.Errorf("%w: want one %s before one %s", ErrMarkers, start, end)
	}
	return doc[:i] + section + strings.TrimPrefix(doc[j+len(end):], "\n"), nil
}

// WriteFile writes data to path through a temporary file in the same
// directory, renamed into place, so that a failed write leaves the old
// file whole. The file keeps the permissions it had, or gets 0644 if it
// is new.
func WriteFile(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; removes a failed write's
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
