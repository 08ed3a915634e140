package main

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVersionText(t *testing.T) {
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build information", nil,
			"relay devel\nmodule:   github.com/relay-demo/relay\nrevision: devel\ntime:     devel\nmodified: devel\ngo:       devel\n"},
		{"go run, no VCS", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/relay-demo/relay", Version: "(devel)"}},
			"relay devel\nmodule:   github.com/relay-demo/relay\nrevision: devel\ntime:     devel\nmodified: devel\ngo:       go1.26.8\n"},
		{"go build in a checkout", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "github.com/relay-demo/relay", Version: "v0.0.0-20260301120000-3ea2772f1c2d+dirty"},
			Settings: []debug.BuildSetting{
				{Key: "-compiler", Value: "gc"},
				{Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: "3ea2772f1c2d9e8b7a6f5e4d3c2b1a0918273645"},
				{Key: "vcs.time", Value: "2026-03-01T12:00:00Z"},
				{Key: "vcs.modified", Value: "true"},
			}},
			"relay v0.0.0-20260301120000-3ea2772f1c2d+dirty\nmodule:   github.com/relay-demo/relay\n" +
				"revision: 3ea2772f1c2d9e8b7a6f5e4d3c2b1a0918273645\ntime:     2026-03-01T12:00:00Z\nmodified: true\ngo:       go1.26.8\n"},
		{"go install module@version", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "github.com/relay-demo/relay", Version: "v1.2.0"}},
			"relay v1.2.0\nmodule:   github.com/relay-demo/relay\nrevision: devel\ntime:     devel\nmodified: devel\ngo:       go1.26.8\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, versionText(tt.bi)); diff != "" {
				t.Errorf("versionText (-want +got):\n%s", diff)
			}
		})
	}
}
