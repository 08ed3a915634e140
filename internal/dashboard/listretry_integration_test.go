//go:build integration

package dashboard_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-demo/relay/internal/notification"
)

// TestListRetriesInBrowser makes the page's first two reads of the list
// fail, as a busy or restarting API would answer them, in a pipeline
// where nothing happens after: the page says so, asks again by itself,
// and shows the list once the API answers, with no event to bring a
// reload.
func TestListRetriesInBrowser(t *testing.T) {
	ctx := browser(t)
	r, store := startRelayWithHistory(t)
	const id = "ntf_retried"
	if err := store.Accept(t.Context(), []notification.Accepted{{ID: id, CreatedAt: time.Now(), Channels: []string{"webhook"},
		Recipients: []string{"https://hooks.example/retried"}}}); err != nil {
		t.Fatal(err)
	}

	run(t, ctx, "open the page",
		chromedp.Navigate(r.api+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	// The page's fetch answers the first two reads of the list with a
	// 503 problem, as the API does when it cannot answer.
	evaluate[bool](t, ctx, `window.refused = 0;
		const real = window.fetch;
		window.fetch = (url, opts) => {
			if (String(url).startsWith("/v1/notifications?") && window.refused < 2) {
				window.refused++;
				return Promise.resolve(new Response(JSON.stringify({title: "Service unavailable", status: 503, detail: "the history is busy"}),
					{status: 503, headers: {"Content-Type": "application/problem+json"}}));
			}
			return real(url, opts);
		};
		true`)
	run(t, ctx, "log in and see the list fail",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		waitFor(`!document.getElementById("app-error").hidden && document.getElementById("app-error").textContent.includes("the history is busy")`),
	)
	run(t, ctx, "see the list once the API answers",
		waitFor(`document.querySelector('#rows tr[data-id="`+id+`"]') !== null && document.getElementById("app-error").hidden`),
	)
	if n := evaluate[int](t, ctx, `window.refused`); n != 2 {
		t.Errorf("the page read the list %d times while refused, want 2", n)
	}
}
