package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/relay-demo/relay/internal/testenv"
)

func script(t *testing.T, shell string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"completion", shell}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatalf("relay completion %s: %v", shell, err)
	}
	return out.String()
}

// TestCompletionNamesEveryCommand checks that every script offers every
// word of every command, and the flags of a tool.
func TestCompletionNamesEveryCommand(t *testing.T) {
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			s := script(t, shell)
			for _, c := range commands() {
				for _, w := range append(strings.Fields(c.name), c.verbs...) {
					if !containsWord(s, w) {
						t.Errorf("the %s script does not name %q (of relay %s)", shell, w, c.name)
					}
				}
			}
			for _, w := range []string{"help", "env", "--watch", "--token", "--no-declare", "--yes"} {
				if shell == "fish" && strings.HasPrefix(w, "--") {
					w = "-l " + strings.TrimPrefix(w, "--")
				}
				if !containsWord(s, w) {
					t.Errorf("the %s script does not name %q", shell, w)
				}
			}
		})
	}
}

// containsWord reports whether s holds w between characters that cannot
// be part of a command word or flag.
func containsWord(s, w string) bool {
	part := func(b byte) bool {
		return b == '-' || b == '_' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
	}
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		if (j == 0 || !part(s[j-1])) && (j+len(w) == len(s) || !part(s[j+len(w)])) {
			return true
		}
		i = j + 1
	}
}

// TestCompletionBash runs the bash script's function on command lines and
// checks what it offers.
func TestCompletionBash(t *testing.T) {
	bash := needShell(t, "bash")
	path := filepath.Join(t.TempDir(), "relay.bash")
	if err := os.WriteFile(path, []byte(script(t, "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	var top, channels []string
	for _, c := range commands() {
		if w := strings.Fields(c.name); !slices.Contains(top, w[0]) {
			top = append(top, w[0])
		}
		if ch, ok := strings.CutPrefix(c.name, "worker "); ok {
			channels = append(channels, ch)
		}
	}
	tests := []struct {
		line []string // the words, the one being completed last
		want string
	}{
		{[]string{""}, strings.Join(append(top, "help"), " ")},
		{[]string{"wor"}, "worker"},
		{[]string{"worker", ""}, strings.Join(channels, " ")},
		{[]string{"worker", "email", "--"}, "--help"},
		{[]string{"api", ""}, "--help"},
		{[]string{"send", "--wa"}, "--wait --watch"},
		{[]string{"send", "--n", "3", "--to"}, "--to --token"},
		{[]string{"status", "--j"}, "--json"},
		{[]string{"providers", "--w"}, "--width"},
		{[]string{"pro"}, "providers"},
		{[]string{"dead", ""}, "list replay purge show job"},
		{[]string{"dead", "purge", "--y"}, "--yes"},
		{[]string{"dead", "list", "--y"}, ""},
		{[]string{"completion", "b"}, "bash"},
		{[]string{"topology", "--no"}, "--no-declare"},
		{[]string{"completion", ""}, "bash zsh fish"},
		{[]string{"help", "e"}, "env"},
		{[]string{"version", ""}, ""},
		{[]string{"nope", ""}, ""},
	}
	var prog strings.Builder
	prog.WriteString("source " + path + "\n")
	for _, tt := range tests {
		words := append([]string{"relay"}, tt.line...)
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog.WriteString("COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) +
			"; COMPREPLY=(); _relay; echo \"${COMPREPLY[*]}\"\n")
	}
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(tests) {
		t.Fatalf("bash printed %d lines for %d command lines:\n%s", len(got), len(tests), out)
	}
	for i, tt := range tests {
		if got[i] != tt.want {
			t.Errorf("relay %s<TAB> offers %q, want %q", strings.Join(tt.line, " "), got[i], tt.want)
		}
	}
}

// TestCompletionSyntax checks each script with its shell's parser, where
// the shell is installed.
func TestCompletionSyntax(t *testing.T) {
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			bin := needShell(t, shell)
			path := filepath.Join(t.TempDir(), "relay."+shell)
			if err := os.WriteFile(path, []byte(script(t, shell)), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "-n", path).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		})
	}
}

// TestToolFlags checks that the flags the scripts offer are read from
// each tool's help.
func TestToolFlags(t *testing.T) {
	for _, c := range commands() {
		if c.env != nil || len(c.verbs) > 0 || c.name == "version" {
			continue
		}
		if flags := toolFlags(context.Background(), c); len(flags) == 0 {
			t.Errorf("relay %s -h lists no flags", c.name)
		}
	}
	send := commands()[slices.IndexFunc(commands(), func(c command) bool { return c.name == "send" })]
	flags := toolFlags(context.Background(), send)
	for _, want := range []string{"--api", "--token", "--n", "--watch"} {
		if !slices.Contains(flags, want) {
			t.Errorf("relay send's flags %q lack %s", flags, want)
		}
	}
}

// needShell returns the path of shell, skipping the test where it is not
// installed, and failing it in CI (CI=true), where .ci/run installs it
// (testenv.Unavailable).
func needShell(t *testing.T, shell string) string {
	t.Helper()
	bin, err := exec.LookPath(shell)
	if err != nil {
		testenv.Unavailable(t, "no %s on PATH (.ci/run installs it)", shell)
	}
	return bin
}

// TestCompletionForTheNameRun runs relay under another name, as a copy of
// the template may call its binary, and wants each script to complete
// that name.
func TestCompletionForTheNameRun(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(t.TempDir(), "billing")
	if err := os.Symlink(self, renamed); err != nil {
		t.Fatal(err)
	}
	for shell, want := range map[string]string{
		"bash": "complete -F _relay billing\n",
		"zsh":  "compdef _relay billing\n",
		"fish": "complete -c billing -f\n",
	} {
		t.Run(shell, func(t *testing.T) {
			cmd := exec.Command(renamed, "-test.run=^$")
			cmd.Env = append(os.Environ(), asMain+"=1", "RELAY_TEST_ARGS=completion "+shell)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("billing completion %s: %v", shell, err)
			}
			if !strings.Contains(string(out), want) || strings.Contains(string(out), " relay\n") {
				t.Errorf("billing completion %s registers for another name; want %q:\n%s", shell, want, out)
			}
		})
	}
}
