package workshop

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/lab/strategy"
)

const chapters = "../../docs/workshop"

func TestRenderRewritesEveryBlock(t *testing.T) {
	in := "# Title\n\n<!-- relay-lab workshop topology a --format mermaid -->\nstale\n<!-- end -->\n\ntext\n\n" +
		"<!-- relay-lab workshop run b -->\n<!-- end -->\n\n<!-- relay-lab workshop compare --format markdown -->\nold\n<!-- end -->\n"
	var ran []string
	got, err := render([]byte(in), func(args []string, w io.Writer) error {
		ran = append(ran, strings.Join(args, " "))
		if args[0] == "run" {
			io.WriteString(w, "partial output\n")
			return errors.New("the broker cannot run this strategy")
		}
		_, err := io.WriteString(w, "out of "+args[1]+"\n")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\n<!-- relay-lab workshop topology a --format mermaid -->\n```mermaid\nout of a\n```\n<!-- end -->\n\ntext\n\n" +
		"<!-- relay-lab workshop run b -->\n```text\npartial output\nrelay: the broker cannot run this strategy\n```\n<!-- end -->\n\n" +
		"<!-- relay-lab workshop compare --format markdown -->\nout of --format\n<!-- end -->\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("render (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"topology a --format mermaid", "run b", "compare --format markdown"}, ran); diff != "" {
		t.Errorf("commands run (-want +got):\n%s", diff)
	}
	// Rendering twice changes nothing more: the marks survive.
	again, _ := render(got, func(args []string, w io.Writer) error {
		_, err := io.WriteString(w, "out of "+args[1]+"\n")
		return err
	})
	if n := len(commands(again)); n != 3 {
		t.Errorf("%d blocks after a second render, want 3", n)
	}
}

func TestRenderStopsWhenInterrupted(t *testing.T) {
	_, err := render([]byte("<!-- relay-lab workshop run a -->\n<!-- end -->\n"), func([]string, io.Writer) error {
		return context.Canceled
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func chapterFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chapters, "*.md"))
	if err != nil || len(files) < 10 {
		t.Fatalf("chapters: %v, %v", files, err)
	}
	return files
}

// TestChaptersNameRealCommands keeps every mark in the chapters runnable.
func TestChaptersNameRealCommands(t *testing.T) {
	seen := map[string]bool{}
	for _, path := range chapterFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range commands(b) {
			switch args[0] {
			case "run", "topology":
				if len(args) < 2 || !strategy.Known(args[1]) {
					t.Errorf("%s: %v names no strategy", path, args)
					continue
				}
				seen[args[1]] = true
			case "compare", "list":
			default:
				t.Errorf("%s: unknown verb in %v", path, args)
			}
		}
	}
	for _, name := range strategy.Names() {
		if !seen[name] {
			t.Errorf("no chapter runs or draws %s", name)
		}
	}
}

// TestChapterDiagramsAreCurrent fails when a chapter's diagram and the
// strategy's declaration disagree: run make workshop-docs.
func TestChapterDiagramsAreCurrent(t *testing.T) {
	for _, path := range chapterFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatch(b, -1) {
			args := strings.Fields(string(m[1]))
			if args[0] != "topology" {
				continue
			}
			var out bytes.Buffer
			if err := Run(context.Background(), args, func(string) string { return "" }, &out); err != nil {
				t.Fatal(err)
			}
			shown := out.String()
			if file, ok := picture(args); ok {
				// The picture is a file beside the chapter; the block
				// shows it.
				got, err := os.ReadFile(filepath.Join(filepath.Dir(path), filepath.FromSlash(file)))
				if err != nil || string(got) != out.String() {
					t.Errorf("%s: the picture %s of %q is stale or missing: run make workshop-docs", path, file, strings.Join(args, " "))
				}
				shown = pictureLink(args, file)
			}
			want := "<!-- relay-lab workshop " + string(m[1]) + " -->\n" + fence(args, shown) + "<!-- end -->"
			if string(m[0]) != want {
				t.Errorf("%s: the diagram of %q is stale: run make workshop-docs", path, strings.Join(args, " "))
			}
		}
	}
}
