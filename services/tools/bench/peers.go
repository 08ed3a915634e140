package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The markers around the section `make bench-peers` writes into the
// markdown report. relay bench does not measure it, but keeps it.
const (
	peersStart = "<!-- bench-peers:start -->"
	peersEnd   = "<!-- bench-peers:end -->"
)

// peersSections returns the sections of old between the markers, markers
// included, verbatim and in order, each followed by a newline. A start
// marker with no end marker after it keeps everything from it to the end
// of old, and complete is false: better a page with too much than a lost
// section.
func peersSections(old []byte) (sections [][]byte, complete bool) {
	complete = true
	for {
		i := bytes.Index(old, []byte(peersStart))
		if i < 0 {
			return sections, complete
		}
		rest := old[i:]
		j := bytes.Index(rest[len(peersStart):], []byte(peersEnd))
		if j < 0 {
			sections = append(sections, withNewline(rest))
			return sections, false
		}
		end := len(peersStart) + j + len(peersEnd)
		sections = append(sections, withNewline(rest[:end]))
		old = rest[end:]
	}
}

func withNewline(b []byte) []byte {
	out := bytes.Clone(b)
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	return out
}

// keepPeers returns report with the peers sections of old appended, a
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
// A markdown report keeps the peers sections the old file had.
func (b *bench) writeReport(path string, report []byte, markdown bool) error {
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read the report %s before replacing it: %w", path, err)
	case markdown:
		var complete bool
		report, complete = keepPeers(report, old)
		if !complete {
			b.progress("WARNING: %s has %q with no %q after it: kept everything from it to the end of the file", path, peersStart, peersEnd)
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
