package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The markers around the section `make bench-peers` writes into the
// markdown report. relay bench does not measure it, but keeps it.
const (
	peersStart = "<!-- bench-peers:start -->"
	peersEnd   = "<!-- bench-peers:end -->"
)

// markedStart finds the start marker of any section the page holds
// between markers: bench-peers's (<!-- bench-peers:start -->), the
// labelled sections of other brokers, relay bench's and bench-peers's
// (<!-- bench:4.3:start -->, <!-- bench-peers:4.3:start -->), and notes
// written by hand (<!-- bench-notes:native:start -->). Its group is the
// section's name, which the end marker repeats.
var markedStart = regexp.MustCompile(`<!-- (bench(?:-peers|-notes)?(?::[0-9A-Za-z._-]+)?):start -->`)

// labelPattern is what --section accepts: a broker version or a short name.
var labelPattern = regexp.MustCompile(`^[0-9A-Za-z._-]{1,32}$`)

// sectionMarkers are the markers around the section a run with --section
// label writes.
func sectionMarkers(label string) (start, end string) {
	return "<!-- bench:" + label + ":start -->", "<!-- bench:" + label + ":end -->"
}

// peersSections returns the marked sections of old (see markedStart),
// markers included, verbatim and in order, each followed by a newline. A
// start marker with no end marker after it keeps everything from it to
// the end of old, and complete is false: better a page with too much than
// a lost section.
func peersSections(old []byte) (sections [][]byte, complete bool) {
	complete = true
	for {
		m := markedStart.FindSubmatchIndex(old)
		if m == nil {
			return sections, complete
		}
		start := old[m[0]:m[1]]
		end := []byte("<!-- " + string(old[m[2]:m[3]]) + ":end -->")
		rest := old[m[0]:]
		j := bytes.Index(rest[len(start):], end)
		if j < 0 {
			sections = append(sections, withNewline(rest))
			return sections, false
		}
		n := len(start) + j + len(end)
		sections = append(sections, withNewline(rest[:n]))
		old = rest[n:]
	}
}

// errMarkers means a page holds a section's markers in an order or
// number relay bench will not guess about.
var errMarkers = errors.New("section markers out of order")

// spliceSection returns doc with the text from start to end (markers
// included) replaced by section, which carries the markers itself; with
// neither marker in doc, section is appended after a blank line. The rest
// of doc is kept as it is.
func spliceSection(doc, section, start, end string) (string, error) {
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	switch {
	case i < 0 && j < 0:
		if strings.TrimSpace(doc) == "" {
			return section, nil
		}
		return strings.TrimRight(doc, "\n") + "\n\n" + section, nil
	case i < 0 || j < 0 || j < i || strings.Count(doc, start) > 1 || strings.Count(doc, end) > 1:
		return "", fmt.Errorf("%w: want one %s before one %s", errMarkers, start, end)
	}
	return doc[:i] + section + strings.TrimPrefix(doc[j+len(end):], "\n"), nil
}

func withNewline(b []byte) []byte {
	out := bytes.Clone(b)
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	return out
}

// keepPeers returns report with the marked sections of old appended, a
// blank line before each.
func keepPeers(report, old []byte) (out []byte, complete bool) {
	sections, complete := peersSections(old)
	out = bytes.Clone(report)
	for _, s := range sections {
		if !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		out = append(out, '\n')
		out = append(out, s...)
	}
	return out, complete
}

// writeReport writes a rendered report to path, through a temporary file
// renamed into place, so that a failed write leaves the old file whole.
// A markdown report keeps the marked sections the old file had (those of
// bench-peers, and of other brokers); with --section, the report is that
// section alone, and replaces it in the old file, or is appended.
func (b *bench) writeReport(path string, report []byte, markdown bool) error {
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read the report %s before replacing it: %w", path, err)
	case markdown && b.opts.Section != "":
		start, end := sectionMarkers(b.opts.Section)
		doc, err := spliceSection(string(old), string(report), start, end)
		if err != nil {
			return fmt.Errorf("report %s: %w", path, err)
		}
		report = []byte(doc)
	case markdown:
		var complete bool
		report, complete = keepPeers(report, old)
		if !complete {
			b.progress("WARNING: %s has a section's start marker with no end marker after it (such as %q without %q): kept everything from it to the end of the file", path, peersStart, peersEnd)
		}
	}
	mode := fs.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; removes a failed write's
	if _, err := tmp.Write(report); err != nil {
		tmp.Close()
		return fmt.Errorf("write report %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write report %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	return nil
}
