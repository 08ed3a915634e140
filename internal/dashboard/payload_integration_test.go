//go:build integration

package dashboard_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// TestDeepPayloadInBrowser opens, in headless Chromium, the detail of a
// notification whose payload nests 9,997 levels deep, the deepest the
// history can read back: what an API without a limit on nesting took and
// stored. The page shows the payload, indented near the top and on one
// line further down, throws nothing, and goes on following the copy until
// it is delivered.
func TestDeepPayloadInBrowser(t *testing.T) {
	ctx := browser(t)
	// The test writes to the history relay reads, as relay's feed would.
	r, store := startRelayWithHistory(t)
	const depth = 9997
	payload := `{"webhook":{"url":"https://hooks.example/deep","payload":{"order":42,"tree":` +
		strings.Repeat("[", depth) + `"bottom"` + strings.Repeat("]", depth) + `}}}`
	const id = "ntf_deep"
	err := store.Accept(t.Context(), []notification.Accepted{{ID: id, CreatedAt: time.Now(), Channels: []string{"webhook"},
		Recipients: []string{"https://hooks.example/deep"}, Payload: json.RawMessage(payload)}})
	if err != nil {
		t.Fatal(err)
	}

	run(t, ctx, "open the page",
		chromedp.Navigate(r.api+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	watchPolicy(t, ctx)
	// Every error the page throws, caught or in a promise.
	evaluate[bool](t, ctx, `window.thrown = [];
		window.addEventListener("error", e => window.thrown.push(String(e.message)));
		window.addEventListener("unhandledrejection", e => window.thrown.push(String(e.reason)));
		true`)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the page threw %q", evaluate[[]string](t, ctx, `window.thrown`))
		}
	})
	run(t, ctx, "log in and open the detail",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="`+id+`"]`)),
		chromedp.Click(chromedp.CSS(`#rows tr[data-id="`+id+`"] button.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail section.copy[data-channel="webhook"][data-status="queued"]`)),
		waitFor(`document.querySelector("#payload").textContent.includes('"bottom"')`),
	)
	text := evaluate[string](t, ctx, `document.querySelector("#payload").textContent`)
	top := "{\n  \"webhook\": {\n    \"url\": \"https://hooks.example/deep\",\n    \"payload\": {\n      \"order\": 42,\n      \"tree\": [\n        [\n"
	if !strings.HasPrefix(text, top) {
		t.Errorf("the payload is not indented at the top: %.200q", text)
	}
	if !strings.Contains(text, `"order": 42`) || !strings.Contains(text, strings.Repeat("[", 100)+`"bottom"`+strings.Repeat("]", 100)) {
		t.Errorf("the payload does not show its top and its bottom: %.200q … %.200q", text, text[max(0, len(text)-200):])
	}
	if len(text) > 100_000 {
		t.Errorf("the payload takes %d characters on the page, for %d in JSON", len(text), len(payload))
	}

	// The detail goes on following the copy.
	err = store.Record(t.Context(), []notification.Event{{Type: "attempt", ID: id, Channel: "webhook", Queue: "webhook-queue", Attempt: 1,
		Outcome: retry.Delivered, At: time.Now(), Service: "worker"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "see the copy delivered",
		waitFor(`document.querySelector('#detail section.copy[data-channel="webhook"][data-status="delivered"]') !== null`))
	if thrown := evaluate[[]string](t, ctx, `window.thrown`); len(thrown) > 0 {
		t.Errorf("the page threw %q", thrown)
	}
	checkPolicy(t, ctx)
}
