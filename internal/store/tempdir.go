package store

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrNoTempDir is Open's error for SQLite when no directory SQLite would
// put its temporary files in is writable.
var ErrNoTempDir = errors.New("no writable temporary directory for SQLite")

// sqliteTempDirs are the directories SQLite looks in for its temporary
// files, in its order (os_unix.c, unixTempFileDir): SQLITE_TMPDIR, TMPDIR,
// /var/tmp, /usr/tmp, /tmp, then the working directory.
func sqliteTempDirs(getenv func(string) string) []string {
	var dirs []string
	for _, key := range []string{"SQLITE_TMPDIR", "TMPDIR"} {
		if v := getenv(key); v != "" {
			dirs = append(dirs, v)
		}
	}
	return append(dirs, "/var/tmp", "/usr/tmp", "/tmp", ".")
}

// checkTempDir finds the first of dirs that is a directory a file can be
// created in. SQLite spills statement journals and large sorts to such a
// file; without one, every write that needs it fails with "disk I/O error
// (6410)", long after the store was opened. A read-only container root
// (read_only: true) with no tmpfs on /tmp is the usual cause: the check
// makes it an error at start that says what to do.
func checkTempDir(dirs []string) error {
	var tried []string
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		f, err := os.CreateTemp(dir, ".relay-tmp-check-*")
		if err != nil {
			tried = append(tried, dir)
			continue
		}
		name := f.Name()
		f.Close()
		os.Remove(name)
		return nil
	}
	return fmt.Errorf("%w (none of %s can be written): mount a writable directory on /tmp (in a container with a read-only root, a tmpfs), or set TMPDIR to one", ErrNoTempDir, strings.Join(tried, ", "))
}
