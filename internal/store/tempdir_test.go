package store

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSQLiteTempDirs(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{name: "defaults", want: []string{"/var/tmp", "/usr/tmp", "/tmp", "."}},
		{name: "TMPDIR first", env: map[string]string{"TMPDIR": "/scratch"}, want: []string{"/scratch", "/var/tmp", "/usr/tmp", "/tmp", "."}},
		{name: "SQLITE_TMPDIR before TMPDIR", env: map[string]string{"TMPDIR": "/b", "SQLITE_TMPDIR": "/a"}, want: []string{"/a", "/b", "/var/tmp", "/usr/tmp", "/tmp", "."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sqliteTempDirs(func(k string) string { return tt.env[k] })
			if !slices.Equal(got, tt.want) {
				t.Errorf("sqliteTempDirs = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckTempDir(t *testing.T) {
	writable := t.TempDir()
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name    string
		dirs    []string
		wantErr bool
	}{
		{name: "a writable directory", dirs: []string{writable}},
		{name: "the first usable one counts", dirs: []string{missing, file, writable}},
		{name: "none exists", dirs: []string{missing}, wantErr: true},
		{name: "a file is no directory", dirs: []string{file, missing}, wantErr: true},
		{name: "no candidates", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkTempDir(tt.dirs)
			if got := errors.Is(err, ErrNoTempDir); got != tt.wantErr {
				t.Fatalf("checkTempDir(%q) = %v, want ErrNoTempDir: %v", tt.dirs, err, tt.wantErr)
			}
			if err != nil {
				for _, w := range []string{"/tmp", "TMPDIR"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
			}
			entries, _ := os.ReadDir(writable)
			if len(entries) != 0 {
				t.Errorf("the check left %d files behind in %s", len(entries), writable)
			}
		})
	}
}
