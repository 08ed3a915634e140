package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// templatePushTest is the test the template's push channel runs with,
// inside the copy of internal/channel it is built in: relay all's
// defaults open it, without PUSH_URL it refuses to start with the
// sentence relay all ends with, a part reaches a gateway as signed JSON,
// and a part without the title the schema requires is refused. The
// copy's schema_test.go holds Check to the schema for every channel,
// this one included.
const templatePushTest = `package channel

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/webhooks"
)

func TestTemplatePush(t *testing.T) {
	c, err := Builtin().Lookup("push")
	if err != nil {
		t.Fatalf("the template's line of builtin.go does not hold push: %v", err)
	}
	secret := webhooks.NewSecret()

	demo := c.Demo(Downstreams{SMTPHost: "127.0.0.1", SMTPPort: "2525", HTTP: "http://127.0.0.1:9090"})
	if demo["PUSH_URL"] == "" {
		t.Errorf("the push channel's Demo sets no PUSH_URL: relay all would not start")
	}
	demo["WEBHOOK_SECRET"], demo["WEBHOOK_ALLOW_CIDRS"] = secret, DemoAllowCIDRs
	if _, closeSend, err := c.Open(func(k string) string { return demo[k] }, nil); err != nil {
		t.Errorf("relay all's settings do not open the push channel: %v", err)
	} else {
		closeSend()
	}
	if _, _, err := c.Open(func(k string) string { return map[string]string{"WEBHOOK_SECRET": secret}[k] }, nil); err == nil || !strings.Contains(err.Error(), ` + "`" + `"PUSH_URL" is not set` + "`" + `) {
		t.Errorf("opened without PUSH_URL: %v, want it named", err)
	}

	type received struct {
		signed bool
		part   map[string]any
	}
	got := make(chan received, 1)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rec received
		rec.signed = r.Header.Get("webhook-signature") != ""
		_ = json.NewDecoder(r.Body).Decode(&rec.part)
		got <- rec
		w.WriteHeader(http.StatusNoContent)
	}))
	defer gateway.Close()
	env := map[string]string{"PUSH_URL": gateway.URL + "/push", "WEBHOOK_SECRET": secret, "WEBHOOK_ALLOW_CIDRS": DemoAllowCIDRs}
	send, closeSend, err := c.Open(func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSend()
	part := json.RawMessage(` + "`" + `{"token":"device-abc","title":"Hello"}` + "`" + `)
	n := &notification.Notification{ID: "ntf_template", Channel: "push", Parts: map[string]json.RawMessage{"push": part}}
	if err := send(context.Background(), n); err != nil {
		t.Fatalf("send: %v", err)
	}
	if rec := <-got; !rec.signed || rec.part["token"] != "device-abc" || rec.part["title"] != "Hello" {
		t.Errorf("the gateway received %+v, want the part, signed", rec)
	}

	untitled := &notification.Notification{Parts: map[string]json.RawMessage{"push": json.RawMessage(` + "`" + `{"token":"device-abc"}` + "`" + `)}}
	if err := Builtin().Check(untitled); err == nil || !strings.Contains(err.Error(), "push.title") {
		t.Errorf("a part without the title the schema requires: %v, want push.title refused", err)
	}
}
`

// TestTemplateChannelExample builds docs/template.md's push channel as
// the page shows it: its file and its line of builtin.go, in a copy of
// internal/channel inside the module, which go vet checks and whose tests
// run. The example cannot drift from the code it extends.
func TestTemplateChannelExample(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	page, err := os.ReadFile("template.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- template-test: push -->"
	_, rest, ok := strings.Cut(string(page), marker)
	if !ok {
		t.Fatalf("template.md has no %s", marker)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(rest, 2)
	if len(blocks) < 2 {
		t.Fatalf("template.md: want the channel's file and the line of builtin.go in two go blocks after %s", marker)
	}
	file, builtin := blocks[0][1], strings.TrimSpace(blocks[1][1])
	if !strings.HasPrefix(file, "package channel\n") || !strings.HasPrefix(builtin, "func Builtin() Set {") {
		t.Fatalf("template.md: want a whole file of package channel, then the line of builtin.go; got\n%s\n%s", file, builtin)
	}

	// A directory whose name starts with _ is left out of ./..., so no
	// other go command sees the copy while it exists.
	dir, err := os.MkdirTemp("../internal/channel", "_template-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sources, err := filepath.Glob("../internal/channel/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range sources {
		name := filepath.Base(src)
		if name == "builtin.go" || strings.HasSuffix(name, "_test.go") && name != "schema_test.go" {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{
		"builtin.go":            "package channel\n\n" + builtin + "\n",
		"push.go":               file,
		"template_push_test.go": templatePushTest,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	pkg := "./internal/channel/" + filepath.Base(dir)
	for _, args := range [][]string{{"vet", pkg}, {"test", "-count=1", pkg}} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s, with template.md's push channel: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestRetryStandsAlone holds docs/template.md's word that retry/ imports
// nothing from the rest of relay: neither retry nor retry/retrytest, nor
// their tests, need a package of relay's outside retry/, so the directory
// can be copied into another module as it is.
func TestRetryStandsAlone(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	const module = "github.com/relay-demo/relay/"
	cmd := exec.Command(goCmd, "list", "-deps", "-test", "-tags", "integration", "-f", "{{.ImportPath}}", "../retry/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		p, _, _ = strings.Cut(p, " ") // a test variant reads "p [p.test]"
		if strings.HasPrefix(p, module) && !strings.HasPrefix(p, module+"retry") {
			t.Errorf("retry/ needs %s", p)
		}
	}
	if !strings.Contains(string(out), module+"retry/retrytest") {
		t.Errorf("go list named no package of retry/ (%d bytes of output)", len(out))
	}
}
