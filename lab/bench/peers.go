package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/relay-demo/relay/lab/internal/section"
)

// markedStart finds the start marker of any section the page holds
// between markers: bench-peers's (<!-- bench-peers:start -->), the
// labelled sections of other brokers, relay-lab bench's and bench-peers's
// (<!-- bench:4.3:start -->, <!-- bench-peers:4.3:start -->), and notes
// written by hand (<!-- bench-notes:native:start -->). Its group is the
// section's name, which the end marker repeats.
var markedStart = regexp.MustCompile(`<!-- (bench(?:-peers|-notes)?(?::[0-9A-Za-z._-]+)?):start -->`)

// labelPattern is what --section accepts: a broker version or a short name.
var labelPattern = regexp.MustCompile(`^[0-9A-Za-z._-]{1,32}$`)

// sectionMarkers are the markers around the section a run with --section
// label writes.
func sectionMarkers(label string) (start, end string) {
	return section.Markers("bench:" + label)
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
		_, end := section.Markers(string(old[m[2]:m[3]]))
		rest := old[m[0]:]
		j := bytes.Index(rest[len(start):], []byte(end))
		if j < 0 {
			sections = append(sections, withNewline(rest))
			return sections, false
		}
		n := len(start) + j + len(end)
		sections = append(sections, withNewline(rest[:n]))
		old = rest[n:]
	}
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
// section alone, and replaces it in the old file, or is appended; an old
// file of blank lines alone is replaced by the section.
func (b *bench) writeReport(path string, report []byte, markdown bool) error {
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read the report %s before replacing it: %w", path, err)
	case markdown && b.opts.Section != "":
		start, end := sectionMarkers(b.opts.Section)
		page := string(old)
		if strings.TrimSpace(page) == "" {
			page = ""
		}
		doc, err := section.Replace(page, string(report), start, end)
		if err != nil {
			return fmt.Errorf("report %s: %w", path, err)
		}
		report = []byte(doc)
	case markdown:
		var complete bool
		report, complete = keepPeers(report, old)
		if !complete {
			b.progress("WARNING: %s has a section's start marker with no end marker after it (such as %q without %q): kept everything from it to the end of the file", path, section.PeersStart, section.PeersEnd)
		}
	}
	if err := section.WriteFile(path, report); err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	return nil
}
