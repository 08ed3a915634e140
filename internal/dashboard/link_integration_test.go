//go:build integration

package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-demo/relay/retry/retrytest"
)

// TestLinkInBrowser: relay dashboard's one-time link logs the page in and
// opens the notification it names; the code leaves the address bar and
// works once; a detail's address opens it, and the page shows it while it
// is open; the log-in form says where a token comes from.
func TestLinkInBrowser(t *testing.T) {
	ctx := browser(t)
	r := startRelay(t, nil)
	id := r.post(t, `{"email":{"to":["ada@example.com"],"subject":"Linked","text":"hello"}}`)
	link := func(body string) string {
		t.Helper()
		code, b := r.call(t, http.MethodPost, "/v1/dashboard/links", body, true)
		var l struct{ Path string }
		if err := json.Unmarshal(b, &l); code != http.StatusCreated || err != nil || !strings.Contains(l.Path, "code=") {
			t.Fatalf("POST /v1/dashboard/links = %d %s", code, b)
		}
		if strings.Contains(l.Path, token) {
			t.Fatalf("the link %q holds the token", l.Path)
		}
		return r.api + l.Path
	}
	detailOf := func(id string) string {
		return `!document.getElementById("detail").hidden && document.getElementById("detail-title").textContent === "` + id + `"`
	}

	url := link(`{"id":"` + id + `"}`)
	run(t, ctx, "open the link",
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("app")),
		waitFor(detailOf(id)),
	)
	watchPolicy(t, ctx)
	if got := evaluate[string](t, ctx, `sessionStorage.getItem("relay.token")`); got != token {
		t.Errorf("sessionStorage holds %q after the link, want the token", got)
	}
	if got := evaluate[string](t, ctx, `location.hash`); got != "#/n/"+id {
		t.Errorf("the address's fragment is %q after the link, want #/n/%s and no code", got, id)
	}
	if evaluate[int](t, ctx, `history.length`) > 2 {
		t.Errorf("the history holds %d entries: the code must not stay in one", evaluate[int](t, ctx, `history.length`))
	}

	run(t, ctx, "close the detail",
		chromedp.Click(chromedp.ID("detail-close")),
		waitFor(`document.getElementById("detail").hidden && location.hash === ""`),
	)
	run(t, ctx, "open the detail from the list",
		waitFor(`document.querySelector('#rows tr[data-id="`+id+`"] button.open') !== null`),
		chromedp.Click(chromedp.CSS(`#rows tr[data-id="`+id+`"] button.open`)),
		waitFor(detailOf(id)+` && location.hash === "#/n/`+id+`"`),
	)

	// The same link again, in a tab that holds no token: the code is
	// spent, and the page asks for the token, saying where it comes from.
	run(t, ctx, "forget the token",
		chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`),
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("login")),
		waitFor(`!document.getElementById("login-error").hidden`),
	)
	if msg := evaluate[string](t, ctx, `document.getElementById("login-error").textContent`); !strings.Contains(msg, "used already") {
		t.Errorf("log-in error after a spent link: %q, want it to say the code was used", msg)
	}
	if help := evaluate[string](t, ctx, `document.getElementById("login-help").textContent`); !strings.Contains(help, "API_TOKENS") || !strings.Contains(help, "relay dashboard") {
		t.Errorf("the log-in form says %q: want where a token comes from (API_TOKENS) and relay dashboard", help)
	}
	if got := evaluate[string](t, ctx, `location.hash`); strings.Contains(got, "code") {
		t.Errorf("the address keeps the code: %q", got)
	}
	// Logged in by hand, the page opens the detail the address named.
	run(t, ctx, "log in",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("app")),
		waitFor(detailOf(id)),
	)

	// A detail's address, pasted into a tab already logged in: a
	// notification scheduled for later and cancelled, whose copy was
	// never attempted.
	other := r.post(t, `{"send_at":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`","email":{"to":["grace@example.com"],"subject":"Later","text":"hello"}}`)
	// The history records the notification shortly after the 202.
	var code int
	var b []byte
	retrytest.Eventually(t, 10*time.Second, func() bool {
		code, b = r.call(t, http.MethodDelete, "/v1/notifications/"+other, "", true)
		return code != http.StatusNotFound
	}, "the history never recorded %s", other)
	if code != http.StatusOK {
		t.Fatalf("DELETE /v1/notifications/%s = %d %s", other, code, b)
	}
	run(t, ctx, "paste a detail's address",
		chromedp.Navigate(r.api+"/#/n/"+other),
		waitFor(detailOf(other)+` && document.querySelector('#detail tr.attempt[data-outcome="cancelled"]') !== null`),
	)
	if got := evaluate[string](t, ctx, `document.querySelector('#detail tr.attempt[data-outcome="cancelled"] td.num:nth-child(2)').textContent`); got != "before 1" {
		t.Errorf("the cancelled copy's attempt reads %q, want \"before 1\": nothing was attempted", got)
	}
	checkPolicy(t, ctx)
}

// TestDeferralInBrowser: a webhook answered 429 with a Retry-After is
// deferred, not failed: the detail's table says "deferred" on that attempt
// and the axis draws it as a deferral, as the API marks it.
func TestDeferralInBrowser(t *testing.T) {
	ctx := browser(t)
	r := startRelay(t, map[string]string{"FLAKY_WEBHOOK_SCENARIO": "rate-limited", "FLAKY_RETRY_AFTER": "1s", "FLAKY_RATE_LIMIT_ATTEMPTS": "1"})
	id := r.post(t, fmt.Sprintf(`{"webhook":{"url":%q,"payload":{"order":7}}}`, r.hooks+"/webhooks/browser"))
	var deferred bool
	retrytest.Eventually(t, 20*time.Second, func() bool {
		code, b := r.call(t, http.MethodGet, "/v1/notifications/"+id, "", true)
		var n struct {
			Copies []struct {
				Status   string
				Attempts []struct {
					Outcome  string
					Deferred bool
				}
			}
		}
		if code != http.StatusOK || json.Unmarshal(b, &n) != nil || len(n.Copies) != 1 || n.Copies[0].Status != "delivered" {
			return false
		}
		a := n.Copies[0].Attempts
		deferred = len(a) == 2 && a[0].Outcome == "failed" && a[0].Deferred
		return true
	}, "the webhook copy of %s was not delivered", id)
	if !deferred {
		t.Fatalf("the API does not mark the 429's attempt deferred")
	}
	run(t, ctx, "log in and open the detail",
		chromedp.Navigate(r.api+"/#/n/"+id),
		chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		waitFor(`document.querySelectorAll('#detail tr.attempt').length === 2`),
	)
	type row struct{ Outcome, Shown, Deferred string }
	rows := evaluate[[]row](t, ctx, `[...document.querySelectorAll('#detail tr.attempt')].map(tr => ({
		Outcome: tr.dataset.outcome, Shown: tr.querySelector("td.outcome").textContent, Deferred: tr.dataset.deferred || ""}))`)
	want := []row{{"failed", "deferred", "true"}, {"delivered", "delivered", ""}}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("the detail's attempts %+v, want %+v", rows, want)
	}
	if n := evaluate[int](t, ctx, `document.querySelectorAll('#detail svg.axis .mark.deferred').length`); n != 1 {
		t.Errorf("the axis draws %d deferrals, want 1", n)
	}
}
