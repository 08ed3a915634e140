package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// runVersion is `relay version` and `relay --version`.
func runVersion(_ context.Context, args []string, _ func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("%w (relay version takes no arguments, got %q)", errUsage, strings.Join(args, " "))
	}
	bi, _ := debug.ReadBuildInfo()
	_, err := io.WriteString(stdout, versionText(bi))
	return err
}

// versionText describes the build bi (nil when the binary carries no
// build information): the module's version, then the VCS revision, its
// time and whether the tree had changes the revision lacks. What the build
// did not record reads "devel": `go build` in a checkout stamps a
// pseudo-version and the revision, `go run` and a build outside a VCS
// checkout (-buildvcs=false) do not.
func versionText(bi *debug.BuildInfo) string {
	const devel = "devel"
	version, path, goVersion := devel, "github.com/relay-demo/relay", devel
	vcs := map[string]string{}
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		if bi.Main.Path != "" {
			path = bi.Main.Path
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			if k, ok := strings.CutPrefix(s.Key, "vcs."); ok {
				vcs[k] = s.Value
			}
		}
	}
	or := func(v string) string {
		if v == "" {
			return devel
		}
		return v
	}
	var b strings.Builder
	fmt.Fprintf(&b, "relay %s\n", version)
	fmt.Fprintf(&b, "module:   %s\n", path)
	fmt.Fprintf(&b, "revision: %s\n", or(vcs["revision"]))
	fmt.Fprintf(&b, "time:     %s\n", or(vcs["time"]))
	fmt.Fprintf(&b, "modified: %s\n", or(vcs["modified"]))
	fmt.Fprintf(&b, "go:       %s\n", goVersion)
	return b.String()
}
