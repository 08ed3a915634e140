package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"

	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
)

// repoRoot is the repository root, seen from this package's directory,
// where `go test` runs its tests.
const repoRoot = "../.."

// goTool returns the go command, which the tests use to build relay.
func goTool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	return path
}

// buildRelay builds the relay binary into a temporary directory and
// returns its path.
func buildRelay(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "relay")
	cmd := exec.Command(goTool(t), "build", "-o", bin, "./cmd/relay")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/relay: %v\n%s", err, out)
	}
	return bin
}

// relayCommands runs `relay help` and returns the command names it lists
// ("api", "worker email", ...), so the checks follow the binary's real
// command table.
func relayCommands(t *testing.T, relay string) []string {
	t.Helper()
	out, err := exec.Command(relay, "help").Output()
	if err != nil {
		t.Fatalf("relay help: %v", err)
	}
	_, table, ok := strings.Cut(string(out), "Commands:\n")
	if !ok {
		t.Fatalf("relay help printed no \"Commands:\" table:\n%s", out)
	}
	var names []string
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		// A name has single spaces ("worker email"); at least two pad it
		// from its summary.
		name, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		names = append(names, name)
	}
	if len(names) == 0 {
		t.Fatalf("relay help listed no commands:\n%s", out)
	}
	return names
}

// splitCommand splits a container's arguments to relay into the command
// they run (the longest listed name their leading words spell) and that
// command's own arguments, the split relay itself makes (cmd/relay's
// TestLookup tests it there, on relay's own dispatcher).
func splitCommand(commands, args []string) (name string, rest []string, ok bool) {
	for n := len(args); n > 0; n-- {
		if candidate := strings.Join(args[:n], " "); slices.Contains(commands, candidate) {
			return candidate, args[n:], true
		}
	}
	return "", nil, false
}

// configs returns, for each long-running command, the configuration
// structs it parses from the environment (see each service's Run).
func configs() map[string][]any {
	out := map[string][]any{
		"api":     {&api.Config{}, &api.EndpointsConfig{}},
		"retrier": {&retrier.Config{}},
		"flaky":   {&flaky.Config{}},
	}
	for _, c := range worker.Channels() {
		cfgs, err := worker.Env(c.Name)
		if err != nil {
			panic(err) // a listed channel always has its structs
		}
		out["worker "+c.Name] = cfgs
	}
	return out
}

// retired maps variables relay no longer reads to their replacement. The
// processes that read them once refuse to start while they are set.
var retired = map[string]string{"WEBHOOK_ALLOW_PRIVATE": "WEBHOOK_ALLOW_CIDRS"}

// directReads maps the commands that read variables with getenv rather
// than through a Config struct to the package doing it: relay send takes
// its flags' defaults from the environment.
var directReads = map[string]string{"send": "cmd/relay/send"}

// otelVariables are the standard variables of the OpenTelemetry SDK that
// the pipeline's services (api, the workers, the retrier) trace with: the
// SDK reads them itself, from the process environment.
var otelVariables = []string{
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_COMPRESSION",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED",
}

// readVariables returns the variables a command reads: its Config
// structs' `env` tags, plus the getenv("NAME") calls in its package.
func readVariables(t *testing.T, command string) map[string]bool {
	t.Helper()
	vars := map[string]bool{}
	for _, cfg := range configs()[command] {
		params, err := env.GetFieldParams(cfg)
		if err != nil {
			t.Fatalf("env tags of %T: %v", cfg, err)
		}
		for _, p := range params {
			vars[p.Key] = true
		}
	}
	if command == "api" || command == "retrier" || strings.HasPrefix(command, "worker ") {
		for _, v := range otelVariables {
			vars[v] = true
		}
	}
	if name, ok := strings.CutPrefix(command, "worker "); ok {
		// Numbered providers: SMTP_PROVIDERS=n brings in SMTP_1_* … SMTP_<n>_*.
		for _, v := range worker.NumberedEnv(name) {
			vars[v] = true
		}
	}
	if dir, ok := directReads[command]; ok {
		for _, v := range getenvCalls(t, filepath.Join(repoRoot, dir)) {
			vars[v] = true
		}
	}
	if len(vars) == 0 {
		t.Fatalf("relay %s: no known configuration; add it to configs or directReads", command)
	}
	return vars
}

// getenvCalls returns the names passed as string literals to getenv in the
// non-test Go files of dir.
func getenvCalls(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "getenv" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if name, err := strconv.Unquote(lit.Value); err == nil {
					names = append(names, name)
				}
			}
			return true
		})
	}
	if len(names) == 0 {
		t.Fatalf("%s: found no getenv(\"NAME\") call", dir)
	}
	return names
}
