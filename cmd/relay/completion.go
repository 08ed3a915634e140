package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
)

// shells are the shells `relay completion` writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// runCompletion is `relay completion bash|zsh|fish`.
func runCompletion(ctx context.Context, args []string, _ func(string) string, stdout io.Writer) error {
	if len(args) != 1 || !slices.Contains(shells, args[0]) {
		return fmt.Errorf("%w (relay completion takes one of %s)", errUsage, strings.Join(shells, ", "))
	}
	return completionScripts.ExecuteTemplate(stdout, args[0], completionTree(ctx))
}

// compWord is a word the completion offers: a command, or a verb after
// one, with the words that may follow it or, when none, its flags.
type compWord struct {
	Name, Summary string
	Subs          []compWord
	Flags         []string
}

// completionTree lists relay's commands as the scripts complete them. A
// tool's flags are read from its own -h, so they never drift from what it
// parses; a service takes --help only.
func completionTree(ctx context.Context) []compWord {
	var top []compWord
	add := func(w compWord, under string) {
		if under == "" {
			top = append(top, w)
			return
		}
		i := slices.IndexFunc(top, func(t compWord) bool { return t.Name == under })
		if i < 0 {
			top = append(top, compWord{Name: under, Summary: "relay " + under + " <verb>"})
			i = len(top) - 1
		}
		top[i].Subs = append(top[i].Subs, w)
	}
	for _, c := range commands() {
		words := strings.Fields(c.name)
		w := compWord{Name: words[len(words)-1], Summary: c.summary}
		switch {
		case c.env != nil:
			w.Flags = []string{"--help"}
		case c.name == "completion":
			for _, sh := range c.verbs {
				w.Subs = append(w.Subs, compWord{Name: sh, Summary: "the " + sh + " script"})
			}
		case len(c.verbs) > 0:
			for _, v := range c.verbs {
				w.Subs = append(w.Subs, compWord{Name: v, Summary: "relay " + c.name + " " + v, Flags: toolFlags(ctx, c, v)})
			}
		case c.name != "version":
			w.Flags = toolFlags(ctx, c)
		}
		under := ""
		if len(words) > 1 {
			under = words[0]
		}
		add(w, under)
	}
	h := compWord{Name: "help", Summary: "list the commands, or show one's help", Subs: []compWord{
		{Name: "env", Summary: "every service's environment variables", Flags: []string{"--format"}}}}
	for _, t := range top {
		h.Subs = append(h.Subs, compWord{Name: t.Name, Summary: t.Summary})
	}
	return append(top, h)
}

// progName is the name relay was run as, the one a completion script
// registers for: relay once installed (go install ./cmd/relay, make
// install), whatever a copy of the template calls its binary. A test
// binary stands for relay.
func progName() string {
	name := filepath.Base(os.Args[0])
	if name == "" || strings.HasSuffix(name, ".test") || !validProg.MatchString(name) {
		return "relay"
	}
	return name
}

// validProg matches a name the scripts can register without quoting.
var validProg = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// flagLine matches a flag in the help the flag package prints.
var flagLine = regexp.MustCompile(`^ {1,4}-([A-Za-z0-9][A-Za-z0-9_.-]*)`)

// toolFlags runs the tool c (its verb words first) with -h and returns the
// flags its help lists, as --name. The context is cancelled beforehand,
// so a tool that did more than print its help would stop at once.
func toolFlags(ctx context.Context, c command, verbs ...string) []string {
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	var out bytes.Buffer
	_ = c.run(ctx, append(verbs, "-h"), func(string) string { return "" }, &out)
	var flags []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if m := flagLine.FindStringSubmatch(sc.Text()); m != nil && !slices.Contains(flags, "--"+m[1]) {
			flags = append(flags, "--"+m[1])
		}
	}
	return flags
}

var completionScripts = template.Must(template.New("").Funcs(template.FuncMap{
	"names": func(ws []compWord) string {
		names := make([]string, len(ws))
		for i, w := range ws {
			names[i] = w.Name
		}
		return strings.Join(names, " ")
	},
	"join": func(s []string) string { return strings.Join(s, " ") },
	// prog is the name the scripts complete: the one relay was run as.
	"prog": progName,
	// fishq quotes s for fish, in single quotes.
	"fishq": func(s string) string {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
	},
	"fishflags": func(flags []string) string {
		var b strings.Builder
		for _, f := range flags {
			b.WriteString(" -l " + strings.TrimPrefix(f, "--"))
		}
		return b.String()
	},
}).Parse(`{{define "bash"}}# bash completion for relay, written by ` + "`relay completion bash`" + `.
# Load it in this shell:  source <({{prog}} completion bash)
# or for every shell:     {{prog}} completion bash > /etc/bash_completion.d/{{prog}}
_relay() {
	local cur=${COMP_WORDS[COMP_CWORD]} words=""
	if [[ $COMP_CWORD -eq 1 ]]; then
		words="{{names .}}"
	else
		case "${COMP_WORDS[1]}" in
{{- range .}}
		{{.Name}})
{{- if .Subs}}
			if [[ $COMP_CWORD -eq 2 ]]; then
				words="{{names .Subs}}"
			else
				case "${COMP_WORDS[2]}" in
{{- range .Subs}}{{if .Flags}}
				{{.Name}}) words="{{join .Flags}}" ;;
{{- end}}{{end}}
				esac
			fi
			;;
{{- else}}
			words="{{join .Flags}}"
			;;
{{- end}}
{{- end}}
		esac
	fi
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _relay {{prog}}
{{end}}

{{- define "zsh"}}#compdef {{prog}}
# zsh completion for relay, written by ` + "`relay completion zsh`" + `.
# Load it in this shell:  source <({{prog}} completion zsh)
# or for every shell:     {{prog}} completion zsh > "${fpath[1]}/_{{prog}}"
_relay() {
	local -a opts
	if (( CURRENT == 2 )); then
		opts=({{names .}})
	else
		case ${words[2]} in
{{- range .}}
		{{.Name}})
{{- if .Subs}}
			if (( CURRENT == 3 )); then
				opts=({{names .Subs}})
			else
				case ${words[3]} in
{{- range .Subs}}{{if .Flags}}
				{{.Name}}) opts=({{join .Flags}}) ;;
{{- end}}{{end}}
				esac
			fi
			;;
{{- else}}
			opts=({{join .Flags}})
			;;
{{- end}}
{{- end}}
		esac
	fi
	compadd -- $opts
}
if [[ "${funcstack[1]}" == _relay ]]; then
	_relay "$@"
else
	compdef _relay {{prog}}
fi
{{end}}

{{- define "fish"}}# fish completion for relay, written by ` + "`relay completion fish`" + `.
# Load it in this shell:  {{prog}} completion fish | source
# or for every shell:     {{prog}} completion fish > ~/.config/fish/completions/{{prog}}.fish

# __relay_at succeeds when the words after relay, before the cursor, start
# with its arguments; with --only, when they are exactly its arguments.
function __relay_at
	set -l only 0
	if test "$argv[1]" = --only
		set only 1
		set -e argv[1]
	end
	set -l words (commandline -opc)
	set -e words[1]
	test (count $words) -ge (count $argv); or return 1
	test $only = 0; or test (count $words) -eq (count $argv); or return 1
	for i in (seq (count $argv))
		test "$words[$i]" = "$argv[$i]"; or return 1
	end
	return 0
end

complete -c {{prog}} -f
{{- range .}}
complete -c {{prog}} -n '__relay_at --only' -a {{.Name}} -d {{fishq .Summary}}
{{- $cmd := .Name}}
{{- range .Subs}}
complete -c {{prog}} -n '__relay_at --only {{$cmd}}' -a {{.Name}} -d {{fishq .Summary}}
{{- if .Flags}}
complete -c {{prog}} -n '__relay_at {{$cmd}} {{.Name}}'{{fishflags .Flags}}
{{- end}}
{{- end}}
{{- if .Flags}}
complete -c {{prog}} -n '__relay_at {{.Name}}'{{fishflags .Flags}}
{{- end}}
{{- end}}
{{end}}`))
