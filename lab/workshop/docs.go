package workshop

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A chapter marks each generated block with the command that makes it:
//
//	<!-- relay-lab workshop run ttl-tiers --n 20 -->
//	...output...
//	<!-- end -->
//
// docs reruns every such command and rewrites what lies between the marks.
var block = regexp.MustCompile(`(?s)<!-- relay-lab workshop ([^>]*?) -->\n.*?<!-- end -->`)

// commands lists the workshop commands a chapter's marks name, in order.
func commands(chapter []byte) [][]string {
	var out [][]string
	for _, m := range block.FindAllSubmatch(chapter, -1) {
		out = append(out, strings.Fields(string(m[1])))
	}
	return out
}

// picture is the file, beside the chapters, that a block drawing a
// strategy's topology as SVG ("topology NAME --format svg") writes its
// drawing to; the chapter shows it as an image.
func picture(args []string) (string, bool) {
	if len(args) < 2 || args[0] != "topology" || !slices.Contains(args, "svg") {
		return "", false
	}
	return "images/" + args[1] + ".svg", true
}

// pictureLink is what a picture's block holds: the image.
func pictureLink(args []string, file string) string {
	return fmt.Sprintf("![%s: the topology it declares, drawn as the dashboard draws the pipeline](%s)\n", args[1], file)
}

// fence wraps a command's output the way the chapter shows it: Mermaid
// diagrams and plain output in code fences, Markdown (and a picture's
// link) as it is.
func fence(args []string, out string) string {
	out = strings.TrimRight(out, "\n") + "\n"
	switch {
	case slices.Contains(args, "markdown"):
		return out
	case slices.Contains(args, "svg"):
		return out
	case slices.Contains(args, "mermaid"):
		return "```mermaid\n" + out + "```\n"
	default:
		return "```text\n" + out + "```\n"
	}
}

// render rewrites every generated block of chapter by running its command
// with run. A command that fails shows its error, as relay would print it.
func render(chapter []byte, run func(args []string, w io.Writer) error) ([]byte, error) {
	var failed error
	out := block.ReplaceAllFunc(chapter, func(m []byte) []byte {
		cmd := strings.TrimSpace(string(block.FindSubmatch(m)[1]))
		args := strings.Fields(cmd)
		var b bytes.Buffer
		if err := run(args, &b); err != nil {
			if ctxErr(err) {
				failed = err
			}
			fmt.Fprintf(&b, "relay: %v\n", err)
		}
		return []byte("<!-- relay-lab workshop " + cmd + " -->\n" + fence(args, b.String()) + "<!-- end -->")
	})
	return out, failed
}

// ctxErr tells an interrupted docs run (stop everything) from a command
// whose failure is the output the chapter shows.
func ctxErr(err error) bool {
	return err == context.Canceled || err == context.DeadlineExceeded ||
		strings.Contains(err.Error(), context.Canceled.Error())
}

func docsCmd(ctx context.Context, args []string, getenv func(string) string, w io.Writer) error {
	fs := flag.NewFlagSet("relay-lab workshop docs", flag.ContinueOnError)
	fs.SetOutput(w)
	dir := fs.String("out", "docs/workshop", "the `directory` of the chapters")
	only := fs.String("chapter", "", "regenerate only the chapter files whose name contains this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(*dir, "*.md"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no chapters (*.md) in %s", *dir)
	}
	slices.Sort(files)
	for _, path := range files {
		if *only != "" && !strings.Contains(filepath.Base(path), *only) {
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if len(commands(old)) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", path)
		updated, err := render(old, func(args []string, out io.Writer) error {
			fmt.Fprintf(w, "  relay-lab workshop %s\n", strings.Join(args, " "))
			file, ok := picture(args)
			if !ok {
				return Run(ctx, args, getenv, out)
			}
			var svg bytes.Buffer
			if err := Run(ctx, args, getenv, &svg); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(*dir, "images"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(*dir, filepath.FromSlash(file)), svg.Bytes(), 0o644); err != nil {
				return err
			}
			_, err := io.WriteString(out, pictureLink(args, file))
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := os.WriteFile(path, updated, 0o644); err != nil {
			return err
		}
	}
	return nil
}
