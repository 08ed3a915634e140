// Package docs_test checks the documentation: every relative link in
// README.md and the pages under docs/ leads to a file that exists, and to
// a heading of that page where it names one.
package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestRelativeLinks follows every relative link of README.md and of the
// markdown pages under docs/: the file must exist and, for a link with a
// #fragment into a markdown page, the page must have that heading.
func TestRelativeLinks(t *testing.T) {
	pages := []string{"../README.md"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string][]string{} // by page, read once
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(raw)) {
			if err := resolve(page, l, anchors); err != nil {
				t.Errorf("%s: link %q: %v", page, l, err)
			}
		}
	}
	if len(pages) < 10 {
		t.Fatalf("found %d pages (%v): the test no longer sees the docs", len(pages), pages)
	}
}

// resolve checks one link of page; anchors caches each page's headings.
func resolve(page, link string, anchors map[string][]string) error {
	target, fragment, _ := strings.Cut(link, "#")
	path := page
	if target != "" {
		path = filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no file %s", path)
	}
	if fragment == "" || !strings.HasSuffix(path, ".md") {
		return nil
	}
	if _, ok := anchors[path]; !ok {
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		anchors[path] = headingAnchors(string(raw))
	}
	if !slices.Contains(anchors[path], fragment) {
		return fmt.Errorf("%s has no heading #%s (it has %v)", path, fragment, anchors[path])
	}
	return nil
}

var (
	// inlineLink is [text](target) and ![alt](target); the target ends
	// at a space (a title) or the closing parenthesis.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)[^)]*\)`)
	// codeSpan is `code`, whose brackets are no links.
	codeSpan = regexp.MustCompile("`[^`]*`")
	scheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links returns the relative link targets of a markdown page, outside
// fenced code blocks and code spans.
func links(md string) []string {
	var out []string
	for _, line := range prose(md) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			if !scheme.MatchString(m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// prose returns the lines of md outside fenced code blocks.
func prose(md string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of md:
// lower case, spaces as hyphens, other punctuation dropped, and -1, -2 …
// after a repeated one.
func headingAnchors(md string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range prose(md) {
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !strings.HasPrefix(line, "#") || !ok {
			continue
		}
		a := slug(text)
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}

// slug is a heading's anchor before repeats are numbered.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Schedule and cancel", "schedule-and-cancel"},
		{"The article's errata", "the-articles-errata"},
		{"Quorum queues: nack no longer counts (4.3)", "quorum-queues-nack-no-longer-counts-43"},
		{"Mail servers and SMS gateways: failover and rate limits", "mail-servers-and-sms-gateways-failover-and-rate-limits"},
		{"2. Keep or drop the demo parts", "2-keep-or-drop-the-demo-parts"},
		{"The compose demo, for real", "the-compose-demo-for-real"},
		{"`relay-lab workshop compare`", "relay-lab-workshop-compare"},
	}
	for _, tt := range tests {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

func TestLinksAndAnchors(t *testing.T) {
	md := "# Title\n\n## Title\n\nSee [a](b.md), ![c](img/d.png \"title\") and [e](#title-1).\n" +
		"`[not](code.md)` and [web](https://example.com) are no relative links.\n" +
		"```\n# not a heading\n[no](link.md)\n```\n"
	if got, want := links(md), []string{"b.md", "img/d.png", "#title-1"}; !slices.Equal(got, want) {
		t.Errorf("links = %q, want %q", got, want)
	}
	if got, want := headingAnchors(md), []string{"title", "title-1"}; !slices.Equal(got, want) {
		t.Errorf("headingAnchors = %q, want %q", got, want)
	}
}
