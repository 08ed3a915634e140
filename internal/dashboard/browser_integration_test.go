//go:build integration

package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-demo/relay/demo/all"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// chromium finds a Chromium to drive, or ends the test: skipped normally,
// failed in CI, where a missing browser is a broken build
// (testenv.Unavailable).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "no chromium binary found (apt-get install chromium to run the browser test)")
	return ""
}

// browser starts a headless Chromium for the test and returns a tab's
// context, closed (browser and all) when the test ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	// Cleanups run last-registered first: the browser is gone before
	// TempDir removes its profile.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

const token = "browser-token-0123456789abcdef"

// outage is how long the flaky webhook receiver fails everything after it
// starts: long enough for a webhook copy to run out of retries and park.
const outage = 4 * time.Second

// relay is a running `relay all` with a webhook downstream in an outage;
// its topology's names start with prefix.
type relay struct {
	api, hooks, prefix string
}

// startRelay runs every service in-process, its webhook receiver in an
// outage for the first few seconds, with its topology deleted when the
// test ends; extra is added to the environment.
func startRelay(t *testing.T, extra map[string]string) relay {
	t.Helper()
	prefix := retrytest.Prefix(t)
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "100ms,200ms", "RETRY_MAX": "2", "API_TOKENS": token, "DATA_DIR": t.TempDir(),
		// Ports the system chooses as relay all binds them, read back
		// from its log: a port found free and closed again may be
		// another test's by the time relay all binds it.
		"HTTP_ADDR": "127.0.0.1:0", "FLAKY_HTTP_ADDR": "127.0.0.1:0", "FLAKY_SMTP_ADDR": "127.0.0.1:0",
		"FLAKY_WEBHOOK_SCENARIO": "outage", "FLAKY_OUTAGE": outage.String(), "FLAKY_EMAIL_SCENARIO": "healthy",
	}
	for k, v := range extra {
		env[k] = v
	}
	conn := retrytest.Conn(t)
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, MaxRetries: 2}}
	t.Cleanup(func() {
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(prefix+"history-queue", false, false, false)
			_ = ch.ExchangeDelete(prefix+"notification-events", false, false)
			ch.Close()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var logs retrytest.Buffer
	done := make(chan error, 1)
	go func() { done <- all.Run(ctx, func(k string) string { return env[k] }, &logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("relay all: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("relay all did not stop within 30s")
		}
		if t.Failed() {
			t.Logf("relay all's log:\n%s", logs.String())
		}
	})
	var r relay
	retrytest.Eventually(t, 15*time.Second, func() bool {
		addrs, ok := all.Listening(logs.String())
		if !ok {
			return false
		}
		r = relay{api: "http://" + addrs.API, hooks: "http://" + addrs.FlakyHTTP, prefix: prefix}
		resp, err := http.Get(r.api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "relay all never listened or its API never became ready; log:\n%s", &logs)
	return r
}

// call asks the API, with the token when auth is set, and returns the
// status and body.
func (r relay) call(t *testing.T, method, path, body string, auth bool) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.api+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// post sends a notification and returns its id.
func (r relay) post(t *testing.T, body string) string {
	t.Helper()
	code, b := r.call(t, http.MethodPost, "/v1/notifications", body, true)
	var res struct{ ID string }
	if err := json.Unmarshal(b, &res); code != http.StatusAccepted || err != nil || res.ID == "" {
		t.Fatalf("POST /v1/notifications = %d %s", code, b)
	}
	return res.ID
}

// copyState is a copy as the API shows it.
type copyState struct {
	Channel   string `json:"channel"`
	Recipient string `json:"recipient"`
	Status    string `json:"status"`
	Attempts  []struct {
		N       int       `json:"n"`
		At      time.Time `json:"at"`
		Outcome string    `json:"outcome"`
		Error   string    `json:"error"`
	} `json:"attempts"`
}

// copies reads a notification's copies from the API, by channel.
func (r relay) copies(t *testing.T, id string) map[string]copyState {
	t.Helper()
	code, b := r.call(t, http.MethodGet, "/v1/notifications/"+id, "", true)
	if code != http.StatusOK {
		return nil
	}
	var n struct{ Copies []copyState }
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	out := map[string]copyState{}
	for _, c := range n.Copies {
		out[c.Channel] = c
	}
	return out
}

// recipients reads the statuses of a notification's copies that have a
// recipient, by recipient.
func (r relay) recipients(t *testing.T, id string) map[string]string {
	t.Helper()
	code, b := r.call(t, http.MethodGet, "/v1/notifications/"+id, "", true)
	if code != http.StatusOK {
		return nil
	}
	var n struct{ Copies []copyState }
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range n.Copies {
		if c.Recipient != "" {
			out[c.Recipient] = c.Status
		}
	}
	return out
}

// run runs chromedp actions, failing the test with what.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	// A deadline, not a measure: under make test's load on 2 cores a
	// first navigation has taken over 30 s (alone, 3).
	actx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(actx, actions...); err != nil {
		t.Fatalf("%s: %v%s", what, err, pageError(ctx))
	}
}

// pageError is the error the page shows its user, if any, for a failure
// message: what a test that timed out waiting was up against.
func pageError(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const e = document.getElementById("app-error");
		return e && !e.hidden ? e.textContent : "";
	})()`))
	if err != nil || text == "" {
		return ""
	}
	return " (the page says: " + text + ")"
}

// clickEnabled clicks the button id once it is enabled: a button the page
// disables while its request is under way ignores a click.
func clickEnabled(id string) chromedp.Action[chromedp.Void] {
	enabled, click := waitFor(`!document.getElementById(`+strconv.Quote(id)+`).disabled`), chromedp.Click(chromedp.ID(id))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := enabled(ctx, t); err != nil {
			return chromedp.Void{}, err
		}
		return click(ctx, t)
	}
}

// waitFor polls a JavaScript condition in the page.
func waitFor(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(25*time.Second))
}

// evaluate runs a JavaScript expression in the page and decodes its value.
func evaluate[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// watchPolicy counts the page's Content-Security-Policy violations from
// now on; checkPolicy fails the test on any.
func watchPolicy(t *testing.T, ctx context.Context) {
	t.Helper()
	evaluate[bool](t, ctx, `window.violations = [];
		document.addEventListener("securitypolicyviolation", e => window.violations.push(e.violatedDirective + " " + e.blockedURI));
		true`)
}

func checkPolicy(t *testing.T, ctx context.Context) {
	t.Helper()
	if v := evaluate[[]string](t, ctx, `window.violations`); len(v) > 0 {
		t.Errorf("the page broke its Content-Security-Policy: %q", v)
	}
}

// clear empties the input with the given id.
func clear(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	evaluate[bool](t, ctx, `(document.getElementById(`+strconv.Quote(id)+`).value = "", true)`)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 makes a PNG
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	dir := os.Getenv("DASHBOARD_SCREENSHOTS")
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("save screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// parkedWebhook posts a notification with an email and a webhook copy
// and waits until the webhook copy, sent during the outage, is parked.
func (r relay) parkedWebhook(t *testing.T, recipient string) (string, map[string]copyState) {
	t.Helper()
	id := r.post(t, fmt.Sprintf(`{"email":{"to":[%q],"subject":"Your order","text":"shipped"},"webhook":{"url":%q,"payload":{"order":42}}}`,
		recipient, r.hooks+"/webhooks/browser"))
	var copies map[string]copyState
	retrytest.Eventually(t, 20*time.Second, func() bool {
		copies = r.copies(t, id)
		return copies["webhook"].Status == "parked" && copies["email"].Status == "delivered"
	}, "the webhook copy of %s was not parked (copies %+v)", id, copies)
	return id, copies
}

// TestDashboardInBrowser drives the dashboard of a real `relay all` in
// headless Chromium: the log-in, a refused token, search, the status
// filter, a notification's detail with every attempt's error text, the
// replay of a parked copy, followed live until it is delivered, and an
// email with a copy per recipient, two of them refused for good, one of
// which is replayed alone.
func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	// The fake SMTP server refuses for good the addresses with "reject"
	// in them, and takes the others.
	r := startRelay(t, map[string]string{"FLAKY_EMAIL_SCENARIO": "permanent", "FLAKY_PERMANENT_MATCH": "reject"})
	recipient := fmt.Sprintf("grace+%d@example.com", time.Now().UnixNano())
	id, copies := r.parkedWebhook(t, recipient)
	decoy := r.post(t, `{"email":{"to":["linus@example.com"],"subject":"Other","text":"other"}}`)

	t.Run("data needs the token", func(t *testing.T) {
		for _, rq := range []struct{ method, path, body string }{
			{"GET", "/dashboard/events", ""},
			{"GET", "/dashboard/queues", ""},
			{"GET", "/v1/notifications", ""},
			{"GET", "/v1/notifications/" + id, ""},
			{"GET", "/v1/dead-letters?id=" + id, ""},
			{"POST", "/v1/dead-letters/replay", `{"id":"` + id + `","source":"webhook-queue"}`},
			{"POST", "/v1/dead-letters/" + id + "/replay", ""},
		} {
			code, body := r.call(t, rq.method, rq.path, rq.body, false)
			if code != http.StatusUnauthorized || strings.Contains(string(body), "503") {
				t.Errorf("%s %s without a token = %d %s, want 401 and no error text", rq.method, rq.path, code, body)
			}
		}
		resp, err := http.Get(r.api + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET / without a token = %d, want the page (it asks for the token)", resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("the page's Content-Security-Policy = %q", csp)
		}
	})

	run(t, ctx, "open the page",
		chromedp.Navigate(r.api+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	// Whatever the page does from here on stays within its
	// Content-Security-Policy, which the browser enforces.
	watchPolicy(t, ctx)
	if evaluate[bool](t, ctx, `!document.getElementById("app").hidden`) {
		t.Fatal("the notifications show before a log-in")
	}
	run(t, ctx, "log in with a wrong token",
		chromedp.SendKeys(chromedp.ID("token"), "not-the-token-0123456789"),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("login-error")),
	)
	if msg := evaluate[string](t, ctx, `document.getElementById("login-error").textContent`); !strings.Contains(msg, "not one the API accepts") {
		t.Errorf("log-in error %q, want it to say the token is not accepted", msg)
	}
	clear(t, ctx, "token")
	run(t, ctx, "log in",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.WaitNotVisible(chromedp.ID("login")),
		waitFor(`document.querySelector('#conn[data-state="live"]') !== null`),
	)
	if got := evaluate[string](t, ctx, `sessionStorage.getItem("relay.token")`); got != token {
		t.Errorf("sessionStorage holds %q, want the token", got)
	}

	run(t, ctx, "search by recipient",
		chromedp.SendKeys(chromedp.ID("search"), strings.TrimSuffix(recipient, "@example.com")),
		chromedp.Click(chromedp.ID("search-submit")),
		waitFor(`document.querySelectorAll("#rows tr[data-id]").length === 1 &&
			document.querySelector('#rows tr[data-id="`+id+`"]') !== null`),
	)
	clear(t, ctx, "search")
	run(t, ctx, "filter parked copies",
		chromedp.SetValue(chromedp.ID("status"), "parked"),
		chromedp.Click(chromedp.ID("search-submit")),
		waitFor(`document.querySelector('#rows tr[data-id="`+id+`"] .chip[data-channel="webhook"][data-status="parked"]') !== null &&
			document.querySelector('#rows tr[data-id="`+decoy+`"]') === null`),
	)

	run(t, ctx, "open the detail",
		chromedp.Click(chromedp.CSS(`#rows tr[data-id="`+id+`"] button.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail section.copy[data-channel="webhook"][data-status="parked"]`)),
	)
	type attemptRow struct{ Outcome, N, Error string }
	rows := evaluate[[]attemptRow](t, ctx, `[...document.querySelectorAll('#detail section.copy[data-channel="webhook"] tr.attempt')].map(tr => ({
		Outcome: tr.dataset.outcome, N: tr.dataset.n,
		Error: (tr.querySelector(".error-text") || {textContent: ""}).textContent}))`)
	want := copies["webhook"].Attempts
	if len(rows) != len(want) || len(want) < 3 {
		t.Fatalf("the detail shows %d attempts %+v, the API %d", len(rows), rows, len(want))
	}
	for i, a := range want {
		if rows[i].Outcome != a.Outcome || rows[i].N != fmt.Sprint(a.N) || rows[i].Error != a.Error || a.Error == "" {
			t.Errorf("attempt %d shows %+v, want %s #%d with the full error %q", i+1, rows[i], a.Outcome, a.N, a.Error)
		}
	}
	if !evaluate[bool](t, ctx, `document.querySelector("#payload").textContent.includes('"order": 42')`) {
		t.Error("the detail does not show the payload")
	}
	run(t, ctx, "the parked message's headers",
		waitFor(`[...document.querySelectorAll('#detail section.copy[data-channel="webhook"] .headers dt')].some(dt => dt.textContent === "x-dead-reason")`))
	screenshot(t, ctx, "relay-dashboard-parked.png")

	// The outage began when the receiver started, before it failed the
	// first attempt, so it is over outage after that attempt.
	over := want[0].At.Add(outage)
	retrytest.Eventually(t, outage+10*time.Second, func() bool { return time.Now().After(over) }, "the outage is not over")
	run(t, ctx, "replay the parked copy and see it delivered",
		chromedp.Click(chromedp.CSS(`#detail section.copy[data-channel="webhook"] button.replay`)),
		waitFor(`document.querySelector('#detail section.copy[data-channel="webhook"][data-status="delivered"]') !== null`),
		waitFor(`document.querySelector('#detail section.copy[data-channel="webhook"] tr.attempt[data-outcome="replayed"][data-round="1"]') !== null`),
		// The list follows the live events: its row shows the copy delivered.
		waitFor(`document.querySelector('#rows tr[data-id="`+id+`"] .chip[data-channel="webhook"][data-status="delivered"]') !== null`),
	)
	screenshot(t, ctx, "relay-dashboard-replayed.png")
	if got := r.copies(t, id)["webhook"].Status; got != "delivered" {
		t.Errorf("the API says the webhook copy is %s after the replay, want delivered", got)
	}

	stamp := time.Now().UnixNano()
	ok, reject := fmt.Sprintf("ok1+%d@example.com", stamp), fmt.Sprintf("reject+%d@example.com", stamp)
	reject2 := fmt.Sprintf("reject2+%d@example.com", stamp)
	split := r.post(t, fmt.Sprintf(`{"email":{"to":[%q,%q,%q],"subject":"Three","text":"three"}}`, ok, reject, reject2))
	var st map[string]string
	retrytest.Eventually(t, 20*time.Second, func() bool {
		st = r.recipients(t, split)
		return st[ok] == "delivered" && st[reject] == "parked" && st[reject2] == "parked"
	}, "the copies of %s never ended delivered, parked and parked: %v", split, st)
	clear(t, ctx, "search")
	section := func(recipient, status string) string {
		return `document.querySelector('#detail section.copy[data-channel="email"][data-recipient=` + strconv.Quote(recipient) +
			`][data-status="` + status + `"]')`
	}
	run(t, ctx, "an email with a copy per recipient in the list",
		// The open detail covers the search button.
		chromedp.Click(chromedp.ID("detail-close")),
		chromedp.WaitNotVisible(chromedp.ID("detail")),
		chromedp.SetValue(chromedp.ID("status"), ""),
		chromedp.SendKeys(chromedp.ID("search"), split),
		chromedp.Click(chromedp.ID("search-submit")),
		waitFor(`document.querySelectorAll("#rows tr[data-id]").length === 1 && (c => c !== null && c.dataset.status === "parked" && c.textContent === "email · 2 of 3 parked" &&
			c.title.includes(`+strconv.Quote(reject+": parked")+`))(
			document.querySelector('#rows tr[data-id="`+split+`"] .chip[data-channel="email"]'))`),
	)
	run(t, ctx, "each recipient's copy in the detail",
		chromedp.Click(chromedp.CSS(`#rows tr[data-id="`+split+`"] button.open`)),
		waitFor(section(ok, "delivered")+` !== null && `+section(reject, "parked")+` !== null`),
		// The parked message's headers are the refused recipient's.
		waitFor(`[...`+section(reject, "parked")+`.querySelectorAll(".headers dt")].some(dt => dt.textContent === "x-dead-reason")`),
	)
	if got := evaluate[string](t, ctx, section(reject, "parked")+`.querySelector("h3").textContent`); got != "email "+reject {
		t.Errorf("the refused copy's heading is %q, want %q", got, "email "+reject)
	}
	if evaluate[bool](t, ctx, section(ok, "delivered")+`.querySelector(".headers") !== null`) {
		t.Error("the delivered copy shows a parked message's headers")
	}
	screenshot(t, ctx, "relay-dashboard-recipients.png")

	// Each parked recipient's copy has a replay of its own, which says so.
	bar := evaluate[string](t, ctx, section(reject, "parked")+`.querySelector(".replay-bar").textContent`)
	if !strings.Contains(bar, "Replay this copy") || !strings.Contains(bar, "the parked copy for "+reject) ||
		!strings.Contains(bar, "the other recipients' copies stay as they are") {
		t.Errorf("the refused copy's replay bar says %q, want it to replay that recipient's copy alone", bar)
	}
	// The SMTP server refuses the address again, so the replayed copy is
	// parked again in round 1; the other refused copy was never touched.
	run(t, ctx, "replay one recipient's copy",
		chromedp.Click(chromedp.CSS(`#detail section.copy[data-channel="email"][data-recipient=`+strconv.Quote(reject)+`] button.replay`)),
		waitFor(section(reject, "parked")+` !== null && `+section(reject, "parked")+
			`.querySelector('tr.attempt[data-outcome="replayed"][data-round="1"]') !== null`),
	)
	if evaluate[bool](t, ctx, `document.querySelector('#detail section.copy[data-channel="email"][data-recipient=`+strconv.Quote(reject2)+
		`] tr.attempt[data-outcome="replayed"]') !== null`) {
		t.Errorf("the page shows a replay of %s's copy too", reject2)
	}
	parked := func(recipient string) []retry.DeadLetter {
		t.Helper()
		code, b := r.call(t, http.MethodGet, "/v1/dead-letters?id="+split+"&recipient="+url.QueryEscape(recipient), "", true)
		var res struct {
			DeadLetters []retry.DeadLetter `json:"dead_letters"`
		}
		if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil {
			t.Fatalf("GET /v1/dead-letters for %s = %d %s", recipient, code, b)
		}
		return res.DeadLetters
	}
	retrytest.Eventually(t, 20*time.Second, func() bool {
		p := parked(reject)
		return len(p) == 1 && p[0].Replays == 1
	}, "%s's replayed copy was not parked again in round 1: %+v", reject, parked(reject))
	if p := parked(reject2); len(p) != 1 || p[0].Replays != 0 {
		t.Errorf("%s's copy is %+v, want it parked once and never replayed", reject2, p)
	}
	if got := r.recipients(t, split); got[ok] != "delivered" || got[reject2] != "parked" {
		t.Errorf("after replaying %s's copy, the others are %v", reject, got)
	}
	screenshot(t, ctx, "relay-dashboard-recipient-replayed.png")
	checkPolicy(t, ctx)
}

// TestPublicDashboard runs relay with DASHBOARD_PUBLIC=true: visitors
// without a token get the list, the detail and the live events with no
// error text, no payload and no webhook URL past its host, and cannot
// find a notification by what they do not see; the page says it is
// public, and replay still needs the token.
func TestPublicDashboard(t *testing.T) {
	r := startRelay(t, map[string]string{"DASHBOARD_PUBLIC": "true"})
	id, copies := r.parkedWebhook(t, "public@example.com")
	secret := copies["webhook"].Attempts[0].Error
	if secret == "" {
		t.Fatal("the API shows no error text for the failed attempt")
	}

	for _, path := range []string{"/v1/notifications", "/v1/notifications/" + id, "/dashboard/queues",
		"/v1/notifications?attempts=true", "/v1/notifications?q=127.0.0.1"} {
		code, body := r.call(t, http.MethodGet, path, "", false)
		if code != http.StatusOK || !strings.Contains(string(body), "{") {
			t.Errorf("GET %s without a token = %d %s, want 200 on a public dashboard", path, code, body)
		}
		// The error text itself, and its status code as an error would
		// carry it (a bare "503" can be part of a timestamp); the
		// webhook URL's path.
		for _, leak := range []string{secret, "status 503", `"error"`, `"order"`, "payload", "/webhooks/"} {
			if strings.Contains(string(body), leak) {
				t.Errorf("GET %s without a token shows %q:\n%s", path, leak, body)
			}
		}
	}
	if code, _ := r.call(t, http.MethodGet, "/v1/notifications/"+id, "", true); code != http.StatusOK {
		t.Errorf("GET the detail with the token = %d", code)
	}
	// A search for the URL's path finds the notification with the token
	// only: without one, the answer is the answer to a search for nothing.
	if _, body := r.call(t, http.MethodGet, "/v1/notifications?limit=1&q=webhooks/browser", "", false); string(body) != "{\"notifications\":[]}\n" {
		t.Errorf("a search for the URL's path without a token = %s, want nothing", body)
	}
	if _, body := r.call(t, http.MethodGet, "/v1/notifications?limit=1&q=webhooks/browser", "", true); !strings.Contains(string(body), id) {
		t.Errorf("a search for the URL's path with the token = %s, want %s", body, id)
	}
	for _, path := range []string{"/v1/dead-letters?id=" + id, "/v1/endpoints"} {
		if code, _ := r.call(t, http.MethodGet, path, "", false); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token = %d, want 401: only the notifications are public", path, code)
		}
	}
	if code, _ := r.call(t, http.MethodPost, "/v1/dead-letters/replay", `{"id":"`+id+`","source":"webhook-queue"}`, false); code != http.StatusUnauthorized {
		t.Errorf("replay without a token = %d, want 401", code)
	}

	t.Run("the event stream without a token is redacted", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.api+"/dashboard/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /dashboard/events without a token = %d, want 200", resp.StatusCode)
		}
		// A second notification fails during the outage, or is delivered
		// after it: either way, events flow.
		r.post(t, `{"webhook":{"url":"`+r.hooks+`/webhooks/public","payload":{"n":2}}}`)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct{ Error string }
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			if ev.Error != "" || strings.Contains(data, "503") {
				t.Fatalf("event without a token holds an error text: %s", data)
			}
			return
		}
		t.Fatalf("the stream ended without an event: %v", sc.Err())
	})

	t.Run("the page says it is public", func(t *testing.T) {
		ctx := browser(t)
		run(t, ctx, "open the public page",
			chromedp.Navigate(r.api+"/"),
			chromedp.WaitVisible(chromedp.ID("public-note")),
			chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="`+id+`"]`)),
			chromedp.Click(chromedp.CSS(`#rows tr[data-id="`+id+`"] button.open`)),
			chromedp.WaitVisible(chromedp.CSS(`#detail section.copy[data-channel="webhook"][data-status="parked"]`)),
			chromedp.WaitVisible(chromedp.ID("detail-redacted")),
			// The endpoints and providers come from the API, which is
			// never public.
			chromedp.WaitVisible(chromedp.ID("endpoints-locked")),
			chromedp.WaitVisible(chromedp.ID("providers-locked")),
		)
		if !evaluate[bool](t, ctx, `document.getElementById("providers-table").hidden && document.querySelector("#providers tr") === null`) {
			t.Error("the public page shows providers without a token")
		}
		if !evaluate[bool](t, ctx, `document.getElementById("endpoints-table").hidden && document.querySelector("#endpoints tr") === null`) {
			t.Error("the public page shows endpoints without a token")
		}
		if !evaluate[bool](t, ctx, `document.getElementById("login").hidden && document.getElementById("mode").textContent.includes("public")`) {
			t.Error("the public page does not say it is public, or asks for a log-in")
		}
		if evaluate[bool](t, ctx, `document.body.innerText.includes(`+fmt.Sprintf("%q", secret)+`)`) {
			t.Error("the public page shows an error text")
		}
		if !evaluate[bool](t, ctx, `document.querySelector('#detail section.copy[data-channel="webhook"] button.replay').disabled`) {
			t.Error("replay is enabled without a token")
		}
		// The dead-letters panel is the token's: no panel, and not a
		// request for it.
		if !evaluate[bool](t, ctx, `document.getElementById("dead").hidden && document.getElementById("dead").offsetParent === null`) {
			t.Error("the public page offers the dead-letters panel without a token")
		}
		if asked := evaluate[[]string](t, ctx, `performance.getEntriesByType("resource").map(e => e.name).filter(n => n.includes("/v1/dead-letters"))`); len(asked) > 0 {
			t.Errorf("the public page asked for dead letters without a token: %q", asked)
		}
		screenshot(t, ctx, "relay-dashboard-public.png")
		run(t, ctx, "log in on the public page and see the dead-letters panel",
			chromedp.Click(chromedp.ID("detail-close")),
			chromedp.Click(chromedp.ID("public-login")),
			chromedp.WaitVisible(chromedp.ID("login")),
			chromedp.SendKeys(chromedp.ID("token"), token),
			chromedp.Click(chromedp.ID("login-submit")),
			chromedp.WaitVisible(chromedp.ID("dead")),
		)
	})
}

// endpoint registers a webhook endpoint and returns its id.
func (r relay) endpoint(t *testing.T, url, description string) string {
	t.Helper()
	code, b := r.call(t, http.MethodPost, "/v1/endpoints", fmt.Sprintf(`{"url":%q,"description":%q}`, url, description), true)
	var res struct{ ID string }
	if err := json.Unmarshal(b, &res); code != http.StatusCreated || err != nil || res.ID == "" {
		t.Fatalf("POST /v1/endpoints %s = %d %s", url, code, b)
	}
	return res.ID
}

// circuit reads an endpoint's circuit state from the API.
func (r relay) circuit(t *testing.T, id string) string {
	t.Helper()
	code, b := r.call(t, http.MethodGet, "/v1/endpoints/"+id, "", true)
	var res struct{ Circuit struct{ State string } }
	if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/endpoints/%s = %d %s", id, code, b)
	}
	return res.Circuit.State
}

// TestEndpointsInBrowser registers two endpoints on the flaky receiver,
// one healthy and one always answering 503, and watches the page's
// endpoints panel follow the sick one's circuit from closed to open while
// the healthy one's stays closed; the panel shows each URL's host only.
func TestEndpointsInBrowser(t *testing.T) {
	ctx := browser(t)
	r := startRelay(t, map[string]string{
		// Two failures in a row open a circuit, which stays open for the
		// rest of the test: no probe half-opens it.
		"WEBHOOK_BREAKER_FAILURES": "2", "WEBHOOK_BREAKER_COOLDOWN": "5m",
	})
	okID := r.endpoint(t, r.hooks+"/webhooks/ok?tenant=secret-query", "orders")
	downID := r.endpoint(t, r.hooks+"/webhooks/down", "sick receiver")
	row := func(id, state string) string {
		return `document.querySelector('#endpoints tr[data-endpoint="` + id + `"][data-circuit="` + state + `"]') !== null`
	}

	run(t, ctx, "open the page and log in",
		chromedp.Navigate(r.api+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	watchPolicy(t, ctx)
	run(t, ctx, "log in and see both endpoints closed",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("endpoints-table")),
		waitFor(row(okID, "closed")+" && "+row(downID, "closed")),
	)
	if !evaluate[bool](t, ctx, `document.getElementById("endpoints-locked").hidden`) {
		t.Error("the endpoints panel asks for a token after the log-in")
	}

	delivered := r.post(t, `{"webhook":{"endpoint":"`+okID+`","payload":{"order":1}}}`)
	for i := range 3 {
		r.post(t, fmt.Sprintf(`{"webhook":{"endpoint":%q,"payload":{"order":%d}}}`, downID, i))
	}
	// The page refreshes the panel by itself: no reload.
	run(t, ctx, "see the sick endpoint's circuit open",
		waitFor(row(downID, "open")),
	)
	retrytest.Eventually(t, 20*time.Second, func() bool {
		return r.copies(t, delivered)["webhook"].Status == "delivered"
	}, "the notification to the healthy endpoint was not delivered")
	// The healthy endpoint's copy was taken as soon as it was published:
	// its backlog, and the webhook queue's, are a second or two at most
	// (the AMQP timestamp counts whole seconds). The API says so, and the
	// page shows what the API says.
	var backlog struct {
		Queues    map[string]float64 `json:"backlog_seconds"`
		Endpoints map[string]float64 `json:"endpoint_backlog_seconds"`
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		code, b := r.call(t, http.MethodGet, "/dashboard/queues", "", true)
		if code == http.StatusOK && json.Unmarshal(b, &backlog) == nil {
			if _, ok := backlog.Endpoints[okID]; ok {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /dashboard/queues never gave the healthy endpoint's backlog: %d %s", code, b)
		}
		time.Sleep(50 * time.Millisecond) // polling the API, not waiting for the broker
	}
	if q, ok := backlog.Queues["webhook-queue"]; !ok || q >= 5 || backlog.Endpoints[okID] >= 5 {
		t.Errorf("backlog: webhook-queue %v (reported %t), the healthy endpoint %v; want both under 5 s", q, ok, backlog.Endpoints[okID])
	}
	run(t, ctx, "see the backlog of the healthy endpoint and of the webhook queue",
		waitFor(`(() => {
			const ep = document.querySelector('#endpoints tr[data-endpoint="`+okID+`"][data-backlog]');
			const q = document.querySelector('#queues .queue[data-queue="webhook-queue"][data-backlog]');
			return ep !== null && q !== null && Number(ep.dataset.backlog) < 5 && Number(q.dataset.backlog) < 5;
		})()`),
	)
	if got := r.circuit(t, downID); got != "open" {
		t.Errorf("the API says the sick endpoint's circuit is %q while the page says open", got)
	}
	if !evaluate[bool](t, ctx, row(okID, "closed")) {
		t.Errorf("the healthy endpoint is not shown closed (the API says %q)", r.circuit(t, okID))
	}

	type endpointRow struct{ Host, Description, Enabled, Circuit, Error, FailingSince, Text string }
	rows := evaluate[map[string]endpointRow](t, ctx, `Object.fromEntries([...document.querySelectorAll("#endpoints tr[data-endpoint]")].map(tr => [tr.dataset.endpoint, {
		Host: tr.querySelector(".host").textContent, Description: tr.querySelector(".description").textContent,
		Enabled: tr.querySelector(".enabled").textContent, Circuit: tr.querySelector(".circuit .badge").textContent,
		Error: tr.querySelector(".error").textContent, FailingSince: tr.querySelector(".when").textContent,
		Text: tr.textContent + " " + [...tr.querySelectorAll("[title]")].map(e => e.title).join(" ")}]))`)
	if len(rows) != 2 {
		t.Fatalf("the panel shows %d endpoints, want 2: %+v", len(rows), rows)
	}
	host := strings.TrimPrefix(r.hooks, "http://")
	for id, want := range map[string]endpointRow{
		okID:   {Host: host, Description: "orders", Enabled: "yes", Circuit: "closed", FailingSince: "—"},
		downID: {Host: host, Description: "sick receiver", Enabled: "yes", Circuit: "open"},
	} {
		got := rows[id]
		if got.Host != want.Host || got.Description != want.Description || got.Enabled != want.Enabled || got.Circuit != want.Circuit {
			t.Errorf("endpoint %s shows %+v, want %+v", id, got, want)
		}
		for _, leak := range []string{"/webhooks", "secret-query", "whsec_"} {
			if strings.Contains(got.Text, leak) {
				t.Errorf("endpoint %s's row shows %q: %q", id, leak, got.Text)
			}
		}
	}
	if down := rows[downID]; !strings.Contains(down.Error, "503") || down.FailingSince == "—" || down.FailingSince == "" {
		t.Errorf("the sick endpoint shows last error %q, failing since %q; want its 503 and a time", down.Error, down.FailingSince)
	}
	if ok := rows[okID]; ok.Error != "" {
		t.Errorf("the healthy endpoint shows last error %q", ok.Error)
	}
	screenshot(t, ctx, "relay-dashboard-endpoints.png")
	checkPolicy(t, ctx)
}

// TestProvidersInBrowser runs the sms worker with two gateways, the first
// refusing connections: one failure opens its circuit, and the copy goes
// through the second, which has a limit. The page's providers panel shows
// the first open with its error, the second closed with its limit.
func TestProvidersInBrowser(t *testing.T) {
	ctx := browser(t)
	dead := "http://" + testenv.RefusedAddr(t) + "/sms" // refuses every connection
	backup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(backup.Close)
	r := startRelay(t, map[string]string{
		"FLAKY_WEBHOOK_SCENARIO": "healthy", "SMS_PROVIDERS": "2", "SMS_1_NAME": "gone", "SMS_1_URL": dead,
		"SMS_2_NAME": "backup", "SMS_2_URL": backup.URL + "/sms",
		"SMS_2_RATE": "20", "SMS_2_BURST": "3", "SMS_BREAKER_FAILURES": "1", "SMS_BREAKER_COOLDOWN": "5m",
	})
	row := func(key, state string) string {
		return `document.querySelector('#providers tr[data-provider="` + key + `"][data-circuit="` + state + `"]') !== null`
	}
	run(t, ctx, "open the page",
		chromedp.Navigate(r.api+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	watchPolicy(t, ctx)
	// The worker declares its gateways when it starts: both show closed
	// before anything is sent.
	run(t, ctx, "log in and see both gateways closed",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("providers-table")),
		waitFor(row("sms/gone", "closed")+" && "+row("sms/backup", "closed")),
	)
	id := r.post(t, `{"sms":{"to":"+15551230000","text":"hello"}}`)
	retrytest.Eventually(t, 20*time.Second, func() bool {
		return r.copies(t, id)["sms"].Status == "delivered"
	}, "the sms was not delivered through the second gateway")
	run(t, ctx, "see the first gateway's circuit open", waitFor(row("sms/gone", "open")))

	type providerRow struct{ Provider, Circuit, Error, Limit string }
	rows := evaluate[map[string]providerRow](t, ctx, `Object.fromEntries([...document.querySelectorAll("#providers tr[data-provider]")].map(tr => [tr.dataset.provider, {
		Provider: tr.children[1].textContent, Circuit: tr.querySelector(".circuit .badge").textContent,
		Error: tr.querySelector(".error").textContent, Limit: tr.children[4].textContent}]))`)
	want := map[string]providerRow{
		"sms/gone":   {Provider: "1. gone", Circuit: "open", Limit: "no limit"},
		"sms/backup": {Provider: "2. backup", Circuit: "closed", Limit: "20/s, burst 3"},
	}
	for key, w := range want {
		got := rows[key]
		if got.Provider != w.Provider || got.Circuit != w.Circuit || got.Limit != w.Limit {
			t.Errorf("provider %s shows %+v, want %+v", key, got, w)
		}
	}
	if e := rows["sms/gone"].Error; !strings.Contains(e, "refused") {
		t.Errorf("the open gateway shows last error %q, want its refused connection", e)
	}
	screenshot(t, ctx, "relay-dashboard-providers.png")
	checkPolicy(t, ctx)
}

// startRelayWithHistory starts relay all on a history of its own, its
// webhook receiver healthy, and opens that history for the test to write
// to, as relay's feed would.
func startRelayWithHistory(t *testing.T) (relay, *store.Store) {
	t.Helper()
	dir := t.TempDir()
	r := startRelay(t, map[string]string{"DATA_DIR": dir, "FLAKY_WEBHOOK_SCENARIO": "healthy"})
	st, err := store.Open(t.Context(), filepath.Join(dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return r, st
}

// TestTenantsInBrowser: an operator's list holds every tenant's
// notifications, a named tenant's marked with its name; a tenant's token
// lists its own only.
func TestTenantsInBrowser(t *testing.T) {
	const (
		acme     = "browser-acme-token-0123456789"
		operator = "browser-operator-token-0123456789"
	)
	ctx := browser(t)
	r := startRelay(t, map[string]string{"FLAKY_WEBHOOK_SCENARIO": "healthy",
		"API_TENANT_TOKENS": "acme:" + acme, "API_OPERATOR_TOKENS": operator})
	postAs := func(tok, to string) string {
		req, err := http.NewRequest(http.MethodPost, r.api+"/v1/notifications",
			strings.NewReader(`{"email":{"to":["`+to+`"],"subject":"Hi","text":"hello"}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res struct{ ID string }
		if err := json.NewDecoder(resp.Body).Decode(&res); resp.StatusCode != http.StatusAccepted || err != nil {
			t.Fatalf("POST as %s = %d, %v", tok[:12], resp.StatusCode, err)
		}
		return res.ID
	}
	mine := postAs(acme, "ada@example.com")
	theirs := postAs(token, "grace@example.com")
	rowOf := func(id string) string { return `document.querySelector('#rows tr[data-id="` + id + `"]')` }

	run(t, ctx, "log in as an operator and see both tenants' notifications",
		chromedp.Navigate(r.api+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("token"), operator),
		chromedp.Click(chromedp.ID("login-submit")),
		waitFor(rowOf(mine)+" !== null && "+rowOf(theirs)+" !== null"),
	)
	tags := evaluate[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll("#rows tr[data-id]")].map(tr => [tr.dataset.id, (tr.querySelector(".tenant") || {}).textContent || ""]))`)
	if tags[mine] != "acme" || tags[theirs] != "" {
		t.Errorf("the operator's rows are marked %q, want %s marked acme and %s unmarked", tags, mine, theirs)
	}

	run(t, ctx, "log in as acme and see its own notification only",
		chromedp.Click(chromedp.ID("logout")),
		chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("token"), acme),
		chromedp.Click(chromedp.ID("login-submit")),
		waitFor(rowOf(mine)+" !== null"),
	)
	if ids := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#rows tr[data-id]")].map(tr => tr.dataset.id)`); slices.Contains(ids, theirs) {
		t.Errorf("acme's list holds the default tenant's %s: %q", theirs, ids)
	}
}
