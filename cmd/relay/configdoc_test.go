package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the tables of docs/configuration.md from the code")

const configDoc = "../../docs/configuration.md"

// TestConfigurationDoc checks that the tables of docs/configuration.md
// are what the configuration structs say; -update (make docs) rewrites
// them.
func TestConfigurationDoc(t *testing.T) {
	raw, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := configTables()
	if err != nil {
		t.Fatal(err)
	}
	got, err := replaceEnvBlocks(string(raw), tables)
	if err != nil {
		t.Fatal(err)
	}
	updateOrDiff(t, configDoc, string(raw), got, "docs/configuration.md's tables differ from the code")
}

// updateOrDiff rewrites the generated parts of the doc at path with -update
// (make docs), and otherwise fails the test with what differs between the
// doc as it is and as the code writes it.
func updateOrDiff(t *testing.T, path, doc, want, what string) {
	t.Helper()
	if *update {
		if want != doc {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote the tables of %s", path)
		}
		return
	}
	if diff := cmp.Diff(doc, want); diff != "" {
		t.Errorf("%s (-doc +code):\n%s\nRewrite them with: make docs", what, diff)
	}
}

var envMarker = regexp.MustCompile(`<!-- (/?)env:([a-z0-9-]+) -->`)

// replaceEnvBlocks returns doc with the text between each table's
// markers, <!-- env:id --> and <!-- /env:id -->, replaced by the table. A
// table without its markers, or a marker without its table, is an error.
func replaceEnvBlocks(doc string, tables []envTable) (string, error) {
	byID := map[string]envTable{}
	for _, t := range tables {
		byID[t.id] = t
	}
	for _, m := range envMarker.FindAllStringSubmatch(doc, -1) {
		if _, ok := byID[m[2]]; !ok {
			return "", fmt.Errorf("docs/configuration.md has a marker %s, but the code has no table %q", m[0], m[2])
		}
	}
	var errs []error
	for _, t := range tables {
		open, end := "<!-- env:"+t.id+" -->\n", "<!-- /env:"+t.id+" -->\n"
		i := strings.Index(doc, open)
		j := strings.Index(doc, end)
		if i < 0 || j < i || strings.Count(doc, open) != 1 || strings.Count(doc, end) != 1 {
			errs = append(errs, fmt.Errorf("docs/configuration.md needs the markers %q and %q, once each and in that order, around the table of %s",
				strings.TrimSpace(open), strings.TrimSpace(end), t.title))
			continue
		}
		doc = doc[:i] + markdownBlock(t) + doc[j+len(end):]
	}
	return doc, errors.Join(errs...)
}

func TestReplaceEnvBlocks(t *testing.T) {
	tables := []envTable{{id: "a", title: "A"}, {id: "b", title: "B"}}
	tests := []struct {
		name, in string
		want     string // "" when an error is wanted
		wantErr  string
	}{
		{"replaces", "x\n<!-- env:a -->\nold\n<!-- /env:a -->\ny\n<!-- env:b -->\n<!-- /env:b -->\n",
			"x\n" + markdownBlock(tables[0]) + "y\n" + markdownBlock(tables[1]), ""},
		{"missing table markers", "<!-- env:a -->\n<!-- /env:a -->\n", "", `markers "<!-- env:b -->"`},
		{"unknown marker", "<!-- env:a -->\n<!-- /env:a -->\n<!-- env:b -->\n<!-- /env:b -->\n<!-- env:c -->\n", "", "no table \"c\""},
		{"reversed", "<!-- /env:a -->\n<!-- env:a -->\n<!-- env:b -->\n<!-- /env:b -->\n", "", "in that order"},
		{"twice", "<!-- env:a -->\n<!-- /env:a -->\n<!-- env:a -->\n<!-- /env:a -->\n<!-- env:b -->\n<!-- /env:b -->\n", "", "once each"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := replaceEnvBlocks(tt.in, tables)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("replaceEnvBlocks error = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("replaceEnvBlocks (-want +got):\n%s", diff)
			}
		})
	}
}
