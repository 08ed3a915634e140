package deploy

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/google/go-cmp/cmp"
	"github.com/moby/buildkit/frontend/dockerfile/command"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// pluginURL is the delayed-message exchange plugin the broker image
// installs: the last release, built for RabbitMQ 4.2.
const pluginURL = "https://github.com/rabbitmq/rabbitmq-delayed-message-exchange/releases/download/v4.2.0/rabbitmq_delayed_message_exchange-v4.2.0.ez"

// stage is one FROM of a Dockerfile and the instructions under it.
type stage struct {
	base, name string
	from       *parser.Node
	body       []*parser.Node
}

// instructions returns the stage's instructions named cmd (command.Run,
// command.Env, ...).
func (s stage) instructions(cmd string) []*parser.Node {
	var out []*parser.Node
	for _, n := range s.body {
		if strings.EqualFold(n.Value, cmd) {
			out = append(out, n)
		}
	}
	return out
}

// words returns the words of an instruction after its name.
func words(n *parser.Node) []string {
	var out []string
	for w := n.Next; w != nil; w = w.Next {
		out = append(out, w.Value)
	}
	return out
}

// dockerfiles returns the Dockerfiles under deploy/, from the repository
// root.
func dockerfiles(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "deploy", "*", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	if len(out) == 0 {
		t.Fatal("no Dockerfile under deploy/")
	}
	return out
}

// parseDockerfile parses a Dockerfile, from the repository root, into its
// stages.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var stages []stage
	for _, n := range res.AST.Children {
		// The parser passes unknown instructions through; docker ignores
		// them, so a misspelt one would be lost without a word.
		if _, ok := command.Commands[strings.ToLower(n.Value)]; !ok {
			t.Errorf("%s:%d: unknown instruction %s", path, n.StartLine, n.Value)
		}
		if strings.EqualFold(n.Value, command.From) {
			w := words(n)
			if len(w) == 0 {
				t.Fatalf("%s:%d: FROM without an image", path, n.StartLine)
			}
			s := stage{base: w[0], from: n}
			if len(w) == 3 && strings.EqualFold(w[1], "as") {
				s.name = w[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			continue // ARG before the first FROM
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, n)
	}
	if len(stages) == 0 {
		t.Fatalf("%s: no FROM", path)
	}
	return stages
}

func TestDockerfiles(t *testing.T) {
	for _, path := range dockerfiles(t) {
		t.Run(path, func(t *testing.T) {
			var names []string
			for _, s := range parseDockerfile(t, path) {
				isStage := false
				for _, n := range names {
					isStage = isStage || strings.EqualFold(n, s.base)
				}
				if !isStage {
					if err := pinned(s.base); err != nil {
						t.Errorf("line %d: %v", s.from.StartLine, err)
					}
				}
				if s.name != "" {
					names = append(names, s.name)
				}
				// The shell of a RUN is the base image's /bin/sh; sh -n
				// here catches what any POSIX shell would refuse.
				for _, run := range s.instructions(command.Run) {
					if run.Attributes["json"] {
						continue
					}
					script := strings.Join(words(run), " ")
					if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
						t.Errorf("line %d: RUN is not valid sh: %v\n%s", run.StartLine, err, out)
					}
				}
			}
		})
	}
}

func TestPinned(t *testing.T) {
	tests := []struct {
		image string
		ok    bool
	}{
		{"rabbitmq:4.2.1-management", true},
		{"gcr.io/distroless/static-debian12:nonroot", true},
		{"golang@sha256:" + strings.Repeat("a", 64), true},
		{"rabbitmq", false},
		{"rabbitmq:latest", false},
		{"prom/prometheus:${VERSION}", false},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			if err := pinned(tt.image); (err == nil) != tt.ok {
				t.Errorf("pinned(%q) = %v, want ok %v", tt.image, err, tt.ok)
			}
		})
	}
}

func TestRabbitMQDockerfile(t *testing.T) {
	stages := parseDockerfile(t, brokerContext+"/Dockerfile")
	if len(stages) != 1 {
		t.Fatalf("%d stages, want 1", len(stages))
	}
	s := stages[0]
	ref, err := reference.ParseNormalizedNamed(s.base)
	if err != nil {
		t.Fatal(err)
	}
	tagged, ok := ref.(reference.Tagged)
	if reference.FamiliarName(ref) != "rabbitmq" || !ok || !regexp.MustCompile(`^4\.2\.[0-9]+-management$`).MatchString(tagged.Tag()) {
		t.Errorf("FROM %s, want the official rabbitmq image at an exact 4.2.x-management tag: the plugin runs on 4.2, not on 4.3", s.base)
	}

	var download, enable bool
	for _, run := range s.instructions(command.Run) {
		cmd := strings.Join(words(run), " ")
		if strings.Contains(cmd, pluginURL) {
			download = true
			if !strings.Contains(cmd, "curl -f") || !strings.Contains(cmd, "exit 1") {
				t.Errorf("line %d: the plugin download must fail the build with a message when it fails", run.StartLine)
			}
		}
		if regexp.MustCompile(`rabbitmq-plugins enable --offline [^;&|]*\brabbitmq_delayed_message_exchange\b`).MatchString(cmd) {
			enable = true
		}
	}
	if !download {
		t.Errorf("no RUN downloads %s", pluginURL)
	}
	if !enable {
		t.Error("no RUN enables rabbitmq_delayed_message_exchange (rabbitmq-plugins enable --offline)")
	}
}

// goVersion parses "1.26.8" (or "1.26") into its numbers.
func goVersion(t *testing.T, v string) [3]int {
	t.Helper()
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		t.Fatalf("Go version %q: want 1.N or 1.N.P", v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("Go version %q: %v", v, err)
		}
		out[i] = n
	}
	return out
}

// moduleGoVersion returns the go directive of the repository's go.mod.
func moduleGoVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("go.mod has no go directive")
	return ""
}

func TestRelayDockerfile(t *testing.T) {
	stages := parseDockerfile(t, relayDockerfile)
	build, final := stages[0], stages[len(stages)-1]

	// GOTOOLCHAIN=local: the builder must be at least go.mod's version, or
	// the build fails; and of the same release, so the image is built by
	// the toolchain the module names.
	ref, err := reference.ParseNormalizedNamed(build.base)
	if err != nil {
		t.Fatal(err)
	}
	tagged, ok := ref.(reference.Tagged)
	if reference.FamiliarName(ref) != "golang" || !ok {
		t.Fatalf("build stage FROM %s, want golang:<version>-<variant>", build.base)
	}
	image, _, _ := strings.Cut(tagged.Tag(), "-")
	module := moduleGoVersion(t)
	iv, mv := goVersion(t, image), goVersion(t, module)
	if iv[0] != mv[0] || iv[1] != mv[1] || iv[2] < mv[2] {
		t.Errorf("builder %s has Go %s, want %s or a later patch of it (go.mod)", build.base, image, module)
	}

	// The final stage runs as a user other than root.
	var user string
	for _, n := range final.instructions(command.User) {
		user = strings.Join(words(n), " ")
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("final stage USER %q, want a non-root user", user)
	}
}

// TestRelayBuildStage runs the RUN instructions of the relay image's build
// stage, with its ENV and ARG values, in a copy of the build context made
// as docker would (the repository root less what the Dockerfile's ignore
// file names), and checks the binary it makes: static, and the relay
// command table. The base image's part is the go command on this machine,
// and the cache mounts are its caches.
func TestRelayBuildStage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds relay from a copy of the repository; skipped with -short")
	}
	build := parseDockerfile(t, relayDockerfile)[0]
	dir := t.TempDir()
	copyContext(t, repoRoot, relayDockerfile+".dockerignore", dir)

	goCmd := goTool(t)
	caches, err := exec.Command(goCmd, "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	environ := []string{"PATH=" + filepath.Dir(goCmd) + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for i, v := range strings.Split(strings.TrimSpace(string(caches)), "\n") {
		environ = append(environ, []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY"}[i]+"="+v)
	}
	// What BuildKit gives the predefined platform arguments when the
	// target is this machine.
	platform := map[string]string{"TARGETOS": "linux", "TARGETARCH": runtime.GOARCH}
	for _, n := range build.body {
		switch strings.ToLower(n.Value) {
		case command.Arg:
			for _, a := range words(n) {
				name, value, hasValue := strings.Cut(a, "=")
				if v, ok := platform[name]; ok && !hasValue {
					value = v
				}
				environ = append(environ, name+"="+value)
			}
		case command.Env:
			w := words(n)
			for i := 0; i+1 < len(w); i += 3 {
				environ = append(environ, w[i]+"="+w[i+1])
			}
		case command.Run:
			if n.Attributes["json"] {
				t.Fatalf("line %d: exec-form RUN; the test runs shell-form RUN only", n.StartLine)
			}
			cmdline := strings.Join(words(n), " ")
			cmd := exec.Command("sh", "-c", cmdline)
			cmd.Dir = dir
			cmd.Env = environ
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("line %d: RUN %s: %v\n%s", n.StartLine, cmdline, err, out)
			}
		}
	}

	if runtime.GOOS != "linux" {
		t.Skipf("the image's binary is a linux one; this machine runs %s", runtime.GOOS)
	}
	// The copy of the context stands for the build stage's WORKDIR.
	var workdir, copied string
	for _, n := range build.instructions(command.Workdir) {
		workdir = strings.Join(words(n), " ")
	}
	stages := parseDockerfile(t, relayDockerfile)
	for _, n := range stages[len(stages)-1].instructions(command.Copy) {
		if w := words(n); len(w) == 2 {
			copied = w[0]
		}
	}
	rel, ok := strings.CutPrefix(copied, strings.TrimSuffix(workdir, "/")+"/")
	if !ok {
		t.Fatalf("the final stage copies %q, which is not under the build stage's WORKDIR %q", copied, workdir)
	}
	bin := filepath.Join(dir, rel)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the final stage copies %s from the build stage: %v", copied, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader: it would not run on distroless static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links %q: it would not run on distroless static", libs)
	}
	if diff := cmp.Diff(relayCommands(t, buildRelay(t)), relayCommands(t, bin)); diff != "" {
		t.Errorf("the image's relay lists other commands than this tree's (-tree +image):\n%s", diff)
	}
}

// copyContext copies the build context root into dst, less the paths the
// ignore file excludes, as docker does when it sends the context.
func copyContext(t *testing.T, root, ignoreFile, dst string) {
	t.Helper()
	raw, err := os.Open(filepath.Join(root, ignoreFile))
	if err != nil {
		t.Fatalf("the Dockerfile's ignore file: %v", err)
	}
	defer raw.Close()
	patterns, err := ignorefile.ReadAll(raw)
	if err != nil {
		t.Fatalf("%s: %v", ignoreFile, err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf("%s: %v", ignoreFile, err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		excluded, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		switch {
		case excluded && d.IsDir() && !pm.Exclusions():
			return filepath.SkipDir
		case excluded, !d.IsDir() && !d.Type().IsRegular():
			return nil
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		files++
		return copyFile(path, filepath.Join(dst, rel))
	})
	if err != nil {
		t.Fatalf("copy the build context: %v", err)
	}
	t.Logf("build context: %d files", files)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}
