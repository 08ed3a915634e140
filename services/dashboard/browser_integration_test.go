//go:build integration

package dashboard

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/events"
)

// chromium finds a Chromium to drive, or ends the test: skipped normally,
// failed in CI, where a missing browser is a broken build.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium binary for the browser test in CI (apt-get install chromium)")
	}
	t.Skip("no chromium binary found (apt-get install chromium to run the browser test)")
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
		chromedp.WindowSize(1280, 900),
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

// story is a realistic run: two notifications that fail once, wait and
// are delivered on the second attempt, and one that fails every attempt
// and is parked.
func story(start time.Time) (before, after []events.Event) {
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	e := func(id, channel, outcome string, attempt, ms int, delay int64, service string) events.Event {
		return events.Event{Type: "attempt", Outcome: retry.Outcome(outcome), ID: id, Channel: channel, Queue: channel + "-queue",
			Attempt: attempt, DelayMS: delay, At: at(ms), AgeMS: int64(ms + 15), Service: service}
	}
	failed := func(ev events.Event, err string) events.Event { ev.Error = err; return ev }
	parked := e("ntf_3c19", "webhook", "parked", 3, 6240, 0, "retrier")
	parked.Reason, parked.Error = "max-retries", "POST https://hooks.example/orders: 503 Service Unavailable"
	before = []events.Event{
		failed(e("ntf_0a7f", "email", "failed", 1, 0, 500, "worker"), "smtp: 451 4.3.0 try again later"),
		e("ntf_0a7f", "email", "retrying", 1, 12, 520, "retrier"),
		failed(e("ntf_3c19", "webhook", "failed", 1, 80, 500, "worker"), "POST https://hooks.example/orders: 503 Service Unavailable"),
		e("ntf_3c19", "webhook", "retrying", 1, 95, 480, "retrier"),
		e("ntf_0a7f", "email", "requeued", 2, 540, 0, "retrier"),
		e("ntf_0a7f", "email", "delivered", 2, 610, 0, "worker"),
		e("ntf_3c19", "webhook", "requeued", 2, 580, 0, "retrier"),
		failed(e("ntf_3c19", "webhook", "failed", 2, 650, 5000, "worker"), "POST https://hooks.example/orders: 503 Service Unavailable"),
		e("ntf_3c19", "webhook", "retrying", 2, 660, 5000, "retrier"),
	}
	after = []events.Event{
		failed(e("ntf_b812", "email", "failed", 1, 1200, 500, "worker"), "smtp: 421 4.7.0 rate limited"),
		e("ntf_b812", "email", "retrying", 1, 1210, 510, "retrier"),
		e("ntf_b812", "email", "requeued", 2, 1725, 0, "retrier"),
		e("ntf_b812", "email", "delivered", 2, 1790, 0, "worker"),
		e("ntf_3c19", "webhook", "requeued", 3, 5670, 0, "retrier"),
		failed(e("ntf_3c19", "webhook", "failed", 3, 6230, 60000, "worker"), "POST https://hooks.example/orders: 503 Service Unavailable"),
		parked,
	}
	return before, after
}

// rowView is what the test reads back from a table row.
type rowView struct {
	ID, Channel, Outcome string
	Marks                []string
	Badge, Detail        string
}

const readRows = `[...document.querySelectorAll("#rows tr[data-id]")].map(tr => ({
	ID: tr.dataset.id,
	Channel: tr.dataset.channel,
	Outcome: tr.dataset.outcome || "",
	Marks: [...tr.querySelectorAll(".mark.point[data-outcome]")].map(m => m.dataset.outcome),
	Badge: tr.querySelector(".badge").textContent,
	Detail: tr.querySelector(".detail").textContent,
}))`

const readTotals = `Object.fromEntries([...document.querySelectorAll("[data-total]")].map(
	el => [el.dataset.total, el.querySelector(".value").textContent.trim()]))`

func TestPageInBrowser(t *testing.T) {
	hub := NewHub(0)
	before, after := story(time.Now().Add(-30 * time.Second).UTC())
	for _, ev := range before {
		hub.Publish(ev)
	}
	queues := func(context.Context) (map[string]int, error) {
		return map[string]int{"email-queue": 0, "webhook-queue": 2, "error-queue": 0, "wait.500ms": 1,
			"wait.5s": 0, "requeue-queue": 0, "dead-letter-queue": 1}, nil
	}
	srv := httptest.NewServer(New(Deps{Hub: hub, Queues: queues}))
	t.Cleanup(srv.Close)
	t.Cleanup(hub.Close) // ends the page's event stream, so srv.Close can return
	ctx := browser(t)

	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="ntf_3c19"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
	); err != nil {
		t.Fatalf("load page: %v", err)
	}
	for _, ev := range after {
		hub.Publish(ev)
	}
	if err := chromedp.Do(ctx,
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#rows tr[data-id]").length === 3 &&
			document.querySelector('#rows tr[data-id="ntf_3c19"]').dataset.outcome === "parked"`,
			chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.WaitVisible(chromedp.CSS(`#queues .queue[data-queue="dead-letter-queue"]`)),
	); err != nil {
		t.Fatalf("wait for the live events: %v", err)
	}

	rows := evaluate[[]rowView](ctx, t, readRows)
	totals := evaluate[map[string]string](ctx, t, readTotals)
	parkedTitle := evaluate[string](ctx, t, `document.querySelector('#rows tr[data-id="ntf_3c19"] .mark[data-outcome="parked"]').title`)
	waits := evaluate[int](ctx, t, `document.querySelectorAll('#rows .mark.wait[data-outcome="retrying"]').length`)

	wantRows := []rowView{
		{ID: "ntf_b812", Channel: "email", Outcome: "delivered", Marks: []string{"failed", "delivered"}, Badge: "delivered", Detail: "on attempt 2"},
		{ID: "ntf_3c19", Channel: "webhook", Outcome: "parked", Marks: []string{"failed", "failed", "failed", "parked"}, Badge: "parked", Detail: "max-retries"},
		{ID: "ntf_0a7f", Channel: "email", Outcome: "delivered", Marks: []string{"failed", "delivered"}, Badge: "delivered", Detail: "on attempt 2"},
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	wantTotals := map[string]string{"accepted": "3", "delivered": "2", "parked": "1", "inflight": "0", "attempts": "7"}
	if diff := cmp.Diff(wantTotals, totals); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	if want := "parked after attempt 3: max-retries (POST https://hooks.example/orders: 503 Service Unavailable) · +6.2s"; parkedTitle != want {
		t.Errorf("parked mark title = %q, want %q", parkedTitle, want)
	}
	// One wait for each delivered copy, two for the parked one (its last
	// failure was parked, not retried).
	if waits != 4 {
		t.Errorf("%d wait bars, want 4", waits)
	}

	// A fourth notification, still waiting for its second attempt.
	pending := []events.Event{
		{Type: "attempt", Outcome: "failed", ID: "ntf_5d02", Channel: "webhook", Queue: "webhook-queue", Attempt: 1,
			DelayMS: 500, Error: "POST https://hooks.example/crm: timeout after 10s", At: time.Now().UTC(), Service: "worker"},
		{Type: "attempt", Outcome: "retrying", ID: "ntf_5d02", Channel: "webhook", Queue: "webhook-queue", Attempt: 1,
			DelayMS: 4800, At: time.Now().UTC(), Service: "retrier"},
	}
	for _, ev := range pending {
		hub.Publish(ev)
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="ntf_5d02"][data-outcome="retrying"] .mark.wait.pending`)),
	); err != nil {
		t.Fatalf("wait for the pending retry: %v", err)
	}
	rows = evaluate[[]rowView](ctx, t, readRows)
	want := rowView{ID: "ntf_5d02", Channel: "webhook", Outcome: "retrying", Marks: []string{"failed"}, Badge: "waiting", Detail: "next try after 4.8s"}
	if diff := cmp.Diff(want, rows[0]); diff != "" {
		t.Errorf("newest row (-want +got):\n%s", diff)
	}
	totals = evaluate[map[string]string](ctx, t, readTotals)
	wantTotals = map[string]string{"accepted": "4", "delivered": "2", "parked": "1", "inflight": "1", "attempts": "8"}
	if diff := cmp.Diff(wantTotals, totals); diff != "" {
		t.Errorf("totals with one in flight (-want +got):\n%s", diff)
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := os.Getenv("DASHBOARD_SCREENSHOT")
	if path == "" {
		path = filepath.Join(os.TempDir(), "relay-dashboard.png")
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)
}

// evaluate runs a JavaScript expression in the page and decodes its value.
func evaluate[T any](ctx context.Context, t *testing.T, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}
