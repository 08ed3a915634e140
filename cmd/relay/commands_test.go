package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"
)

func TestDispatch(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr error
		want    string
	}{
		{nil, errUsage, ""},
		{[]string{"help"}, nil, "dead replay"},
		{[]string{"help"}, nil, "status"},
		{[]string{"help"}, nil, "version"},
		{[]string{"status", "-h"}, flag.ErrHelp, ""},
		{[]string{"nope"}, errUsage, "unknown command"},
		{[]string{"help", "nope"}, errUsage, "unknown command"},
		{[]string{"stauts", "ntf_1"}, errUsage, `relay: unknown command "stauts": did you mean relay status?`},
		{[]string{"help", "sned"}, errUsage, "did you mean relay send?"},
		{[]string{"dead"}, errUsage, "list, replay, purge"},
		{[]string{"dead", "lsit"}, errUsage, `relay dead has no command "lsit": did you mean relay dead list? (relay dead needs one of: list, replay, purge, show, job)`},
		{[]string{"dead", "--help"}, nil, "dead replay"},
		{[]string{"dead", "-h"}, nil, "dead purge"},
		{[]string{"help", "dead"}, nil, "dead show"},
		{[]string{"worker", "--help"}, nil, "worker email"},
		{[]string{"retrier", "extra"}, errUsage, "configured by environment"},
		{[]string{"api", "--help"}, nil, "HTTP_ADDR"},
		{[]string{"api", "-h"}, nil, "AMQP_URL"},
		{[]string{"help", "api"}, nil, "API_TOKENS"},
		{[]string{"worker", "email", "--help"}, nil, "SMTP_HOST"},
		{[]string{"help", "worker", "sms"}, nil, "SMS_URL"},
		{[]string{"help", "send"}, flag.ErrHelp, ""},
		{[]string{"help", "env"}, nil, "FLAKY_SEED"},
		{[]string{"help", "env", "--format", "markdown"}, nil, "<!-- env:broker -->"},
		{[]string{"help", "env", "--format", "html"}, errUsage, "want text or markdown"},
		{[]string{"version"}, nil, "revision: "},
		{[]string{"--version"}, nil, "relay "},
		{[]string{"version", "x"}, errUsage, "no arguments"},
		{[]string{"completion", "bash"}, nil, "complete -F _relay relay"},
		{[]string{"completion", "zsh"}, nil, "compdef _relay relay"},
		{[]string{"completion", "fish"}, nil, "complete -c relay"},
		{[]string{"completion"}, errUsage, "bash, zsh, fish"},
		{[]string{"completion", "powershell"}, errUsage, "bash, zsh, fish"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &out, &errOut)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("run = %v, want %v", err, tt.wantErr)
			}
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("output %q lacks %q", got, tt.want)
			}
		})
	}
}

// TestLookup checks how relay splits its arguments into a command, of one
// word or two, and that command's own arguments: the split the checks in
// lab/deploy also make of every relay command in docker-compose.yml.
func TestLookup(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		want     string
		wantRest []string
		wantErr  error
		wantMsg  string
	}{
		{name: "one word", args: []string{"api"}, want: "api", wantRest: []string{}},
		{name: "two words", args: []string{"worker", "webhook"}, want: "worker webhook", wantRest: []string{}},
		{name: "flags after", args: []string{"send", "--n", "3"}, want: "send", wantRest: []string{"--n", "3"}},
		{name: "two words, flags after", args: []string{"dead", "list", "--json"}, want: "dead list", wantRest: []string{"--json"}},
		{name: "an argument after one word", args: []string{"status", "list"}, want: "status", wantRest: []string{"list"}},
		{name: "verb missing", args: []string{"worker"}, wantErr: errUsage, wantMsg: "relay worker needs one of: "},
		{name: "unknown verb", args: []string{"dead", "frob"}, wantErr: errUsage, wantMsg: "relay dead needs one of: list, replay"},
		{name: "unknown", args: []string{"serve"}, wantErr: errUnknown, wantMsg: `"serve"`},
		{name: "a group's help", args: []string{"dead", "--help"}, want: "dead", wantRest: []string{"--help"}},
		{name: "empty", args: nil, wantErr: errUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rest, err := lookup(tt.args)
			if !errors.Is(err, tt.wantErr) || (err != nil && !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Fatalf("lookup(%q) error = %v, want %v with %q", tt.args, err, tt.wantErr, tt.wantMsg)
			}
			if c.name != tt.want || !slices.Equal(rest, tt.wantRest) {
				t.Errorf("lookup(%q) = %q, %q; want %q, %q", tt.args, c.name, rest, tt.want, tt.wantRest)
			}
			if err == nil && c.run == nil {
				t.Errorf("lookup(%q) = %q, which runs nothing", tt.args, c.name)
			}
		})
	}
}

// TestErrorOutput checks what relay prints for an error, and its exit
// code: "relay: " once, never before a message that already names relay.
func TestErrorOutput(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		want     string
		wantCode int
	}{
		{"nil", nil, "", 0},
		{"help", flag.ErrHelp, "", 0},
		{"wrapped help", fmt.Errorf("x: %w", flag.ErrHelp), "", 0},
		{"usage", fmt.Errorf("%w: unknown command %q", errUsage, "x"), "usage: relay <command> [arguments]; `relay help` lists the commands: unknown command \"x\"\n", 2},
		{"plain", errors.New("configuration: PREFETCH=\"x\" is not valid"), "relay: configuration: PREFETCH=\"x\" is not valid\n", 1},
		{"a tool naming itself", errors.New("relay dead replay needs --id, --source or --all"), "relay dead replay needs --id, --source or --all\n", 1},
		{"a tool's usage", errors.New("usage: relay dead list|show|replay|purge [flags]"), "usage: relay dead list|show|replay|purge [flags]\n", 1},
		{"already prefixed", errors.New("relay: x"), "relay: x\n", 1},
		{"relay inside the message", errors.New("dial: the relay broker is down"), "relay: dial: the relay broker is down\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := exitCode(tt.err, &stderr); code != tt.wantCode {
				t.Errorf("exitCode = %d, want %d", code, tt.wantCode)
			}
			if stderr.String() != tt.want {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.want)
			}
			if strings.Count(stderr.String(), "relay:") > 1 || strings.Contains(stderr.String(), "relay: relay") {
				t.Errorf("stderr names relay twice: %q", stderr.String())
			}
		})
	}
}

// TestErrorOutputIsPrintable sends a tool an error answer whose problem
// document carries a title-set and a screen-clear sequence: what reaches
// stderr holds neither, as stdout does not.
func TestErrorOutputIsPrintable(t *testing.T) {
	hostile := "\x1b]0;owned\x07\x1b[2J\x1b[Hall good\u202e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusInternalServerError)
		json.NewEncoder(w).Encode(map[string]string{"title": hostile, "detail": hostile})
	}))
	t.Cleanup(srv.Close)
	for _, args := range [][]string{
		{"cancel", "--api", srv.URL, "ntf_aaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{"status", "--api", srv.URL, "ntf_aaaaaaaaaaaaaaaaaaaaaaaaaa"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr)
		if err == nil {
			t.Fatalf("relay %s: no error from a 500", strings.Join(args, " "))
		}
		if code := exitCode(err, &stderr); code != 1 {
			t.Errorf("relay %s: exit code %d, want 1", args[0], code)
		}
		out := stdout.String() + stderr.String()
		if strings.ContainsAny(out, "\x1b\x07\u202e") {
			t.Errorf("relay %s printed terminal controls: %q", args[0], out)
		}
		if !strings.Contains(stderr.String(), `\u001b]0;owned`) {
			t.Errorf("relay %s: stderr %q does not show the answer escaped", args[0], stderr.String())
		}
	}
}

// TestServiceHelp checks that each service's --help lists every variable
// the structs it parses read, with its default, and each once.
func TestServiceHelp(t *testing.T) {
	for _, c := range commands() {
		if c.env == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), append(strings.Fields(c.name), "--help"), func(string) string { return "" }, &out, &out); err != nil {
				t.Fatal(err)
			}
			help := out.String()
			if c.name != "flaky" && !strings.Contains(help, "\n"+brokerTitle+":\n  AMQP_URL ") {
				t.Errorf("relay %s --help does not list the broker's variables under %q:\n%s", c.name, brokerTitle, help)
			}
			var cfgs []any
			if c.name == "all" {
				for _, name := range []string{"api", "retrier", "flaky", "worker email", "worker webhook", "worker sms"} {
					more, err := serviceConfigs(name)
					if err != nil {
						t.Fatal(err)
					}
					cfgs = append(cfgs, more...)
				}
			} else {
				var err error
				if cfgs, err = serviceConfigs(c.name); err != nil {
					t.Fatal(err)
				}
			}
			for _, cfg := range cfgs {
				params, err := env.GetFieldParams(cfg)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range params {
					line := "\n  " + p.Key + " "
					if !strings.Contains(help, line) && !strings.Contains(help, "\n  "+p.Key+"\n") {
						t.Errorf("relay %s --help does not list %s:\n%s", c.name, p.Key, help)
					}
					// Two structs of one process that read a variable must
					// agree on its default: the help shows one.
					if p.HasDefaultValue && p.DefaultValue != "" && c.name != "all" && !strings.Contains(help, p.Key+" (default "+strconv.Quote(p.DefaultValue)) {
						t.Errorf("relay %s --help does not give %s's default %q", c.name, p.Key, p.DefaultValue)
					}
					if c.name != "all" && strings.Count(help, "\n  "+p.Key+" ")+strings.Count(help, "\n  "+p.Key+"\n") != 1 {
						t.Errorf("relay %s --help lists %s more than once", c.name, p.Key)
					}
				}
			}
		})
	}
}

func TestWrap(t *testing.T) {
	tests := []struct {
		s     string
		width int
		want  []string
	}{
		{"", 10, nil},
		{"a b c", 10, []string{"a b c"}},
		{"aaaa bbbb cccc", 9, []string{"aaaa bbbb", "cccc"}},
		{"aaaaaaaaaaaa b", 5, []string{"aaaaaaaaaaaa", "b"}},
	}
	for _, tt := range tests {
		got := wrap(tt.s, tt.width)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("wrap(%q, %d) = %q, want %q", tt.s, tt.width, got, tt.want)
		}
	}
}

func TestMarkdownBlock(t *testing.T) {
	got := markdownBlock(envTable{id: "x", vars: []envVar{
		{key: "A", def: "1", hasDefault: true, help: "a | b <c>"},
		{key: "B", required: true, secret: true, help: "h"},
		{key: "C", zero: "0", help: "n"},
		{key: "D", zero: "empty", help: "s"},
		{key: "E", hasDefault: true, zero: "empty", help: "s"},
	}})
	want := "<!-- env:x -->\n| variable | default | meaning |\n|---|---|---|\n" +
		"| `A` | `1` | a \\| b &lt;c&gt; |\n" +
		"| `B` | required | h (secret: the start-up log masks it) |\n" +
		"| `C` | `0` | n |\n" +
		"| `D` | empty | s |\n" +
		"| `E` | empty | s |\n" +
		"<!-- /env:x -->\n"
	if got != want {
		t.Errorf("markdownBlock =\n%s\nwant\n%s", got, want)
	}
}
