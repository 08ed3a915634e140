//go:build integration

package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/internal/channel"
)

// TestPicturesInBrowser loads the dashboard of a `relay all` whose
// webhook receiver fails half its requests, with a schedule of 1s, 2s and
// 4s on the binary delay levels: the pipeline is drawn from the topology
// (the 32 levels in one wait box), a copy's attempts are marks on a time
// axis with its scheduled waits as bars as long as the schedule says,
// and every list row has its compact axis. Screenshots of the three go to
// DASHBOARD_SCREENSHOTS (the README's come from here).
func TestPicturesInBrowser(t *testing.T) {
	ctx := browser(t)
	delays := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	// The topology is deleted once relay has stopped (cleanups run last
	// registered first): startRelay deletes only the one it declares.
	prefix := retrytest.Prefix(t)
	conn := retrytest.Conn(t)
	t.Cleanup(func() {
		topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.Levels, Policy: retry.Policy{Delays: delays}}
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(prefix+"history-queue", false, false, false)
			_ = ch.ExchangeDelete(prefix+"notification-events", false, false)
			ch.Close()
		}
	})
	r := startRelay(t, map[string]string{"TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "levels", "RETRY_DELAYS": "1s,2s,4s", "RETRY_MAX": "3",
		"FLAKY_WEBHOOK_SCENARIO": "flaky", "FLAKY_RATE": "0.5", "FLAKY_SEED": "7"})

	// Notifications until one webhook copy has failed twice: two
	// scheduled waits, 1s then 2s.
	var retried string
	var ids []string
	retrytest.Eventually(t, 40*time.Second, func() bool {
		if len(ids) < 12 {
			ids = append(ids, r.post(t, fmt.Sprintf(`{"email":{"to":["pic%d@example.com"],"subject":"s","text":"t"},"webhook":{"url":%q,"payload":{"n":%d}}}`,
				len(ids), r.hooks+"/webhooks/pictures", len(ids))))
		}
		for _, id := range ids {
			failed := 0
			for _, a := range r.copies(t, id)["webhook"].Attempts {
				if a.Outcome == "failed" {
					failed++
				}
			}
			if failed >= 2 {
				retried = id
				return true
			}
		}
		return false
	}, "no webhook copy failed twice among %d notifications", len(ids))

	run(t, ctx, "log in",
		chromedp.Navigate(r.api+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	watchPolicy(t, ctx)
	run(t, ctx, "log in",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("app")),
		waitFor(`document.querySelector("#pipeline-svg [data-node='wait']") !== null`),
		waitFor(`document.querySelectorAll("#rows svg.axis.compact").length > 0`),
	)

	t.Run("pipeline", func(t *testing.T) {
		for _, id := range []string{"notification-exchange", "email-queue", "webhook-queue", "error-queue", "wait", "requeue-queue", "dead-letter-queue"} {
			if !evaluate[bool](t, ctx, `document.querySelector("#pipeline-svg [data-node='`+id+`']") !== null`) {
				t.Errorf("the pipeline has no box %q", id)
			}
		}
		if n := evaluate[int](t, ctx, `document.querySelectorAll("#pipeline-svg [data-node^='wait.']").length`); n != 0 {
			t.Errorf("%d boxes of single wait levels, want them all in the wait box", n)
		}
		if d := evaluate[string](t, ctx, `document.querySelector("#pipeline-svg [data-node='wait'] .detail").textContent`); !strings.HasPrefix(d, "32 queues") {
			t.Errorf("wait box says %q, want its 32 level queues", d)
		}
		// The arrows of a retry carry traffic within the window.
		run(t, ctx, "traffic on the retry path",
			waitFor(`document.querySelector("#pipeline-svg [data-edge='error-queue>wait'].busy") !== null`))
		run(t, ctx, "the table view",
			chromedp.Click(chromedp.ID("pipeline-table-toggle")),
			waitFor(`document.querySelector("#pipeline-boxes tr[data-node='wait']") !== null`))
		if got := evaluate[string](t, ctx, `document.getElementById("pipeline-table-toggle").getAttribute("aria-expanded")`); got != "true" {
			t.Errorf("the table toggle says aria-expanded=%q once open", got)
		}
		run(t, ctx, "close the table", chromedp.Click(chromedp.ID("pipeline-table-toggle")))
		shoot(t, ctx, "#pipeline", "dashboard-pipeline.png")
	})

	t.Run("list", func(t *testing.T) {
		if n := evaluate[int](t, ctx, `document.querySelectorAll("#rows tr[data-id='`+retried+`'] svg.axis.compact .mark.failed").length`); n < 2 {
			t.Errorf("the row of %s shows %d failed marks, want 2 or more", retried, n)
		}
		shoot(t, ctx, ".board", "dashboard-list.png")
	})

	t.Run("detail", func(t *testing.T) {
		run(t, ctx, "open the retried notification",
			chromedp.Click(chromedp.CSS(`#rows tr[data-id="`+retried+`"] button.open`)),
			waitFor(`document.querySelector("#copies .copy[data-channel='webhook'] svg.axis .mark.failed") !== null`),
		)
		waits := evaluate[[]int](t, ctx, `[...document.querySelectorAll("#copies .copy[data-channel='webhook'] svg.axis .wait-bar")].map(b => Number(b.dataset.waitMs))`)
		if len(waits) < 2 || waits[0] != 1000 || waits[1] != 2000 {
			t.Errorf("the webhook copy's waits on its axis are %v ms, want 1000 then 2000 (the schedule)", waits)
		}
		// The bars are as long as their waits: the second twice the first.
		widths := evaluate[[]float64](t, ctx, `[...document.querySelectorAll("#copies .copy[data-channel='webhook'] svg.axis .wait-bar")].map(b => Number(b.getAttribute("width")))`)
		if len(widths) >= 2 && (widths[1] < 1.9*widths[0] || widths[1] > 2.1*widths[0]) {
			t.Errorf("wait bars %v wide, want the 2s one twice the 1s one", widths)
		}
		label := evaluate[string](t, ctx, `document.querySelector("#copies .copy[data-channel='webhook'] svg.axis").getAttribute("aria-label")`)
		if !strings.Contains(label, "waits 1s, 2s") {
			t.Errorf("the axis reads %q to a screen reader, want its waits", label)
		}
		shoot(t, ctx, "#detail", "dashboard-detail.png")
	})
	checkPolicy(t, ctx)
}

// shoot saves a screenshot of the element sel.
func shoot(t *testing.T, ctx context.Context, sel, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		t.Logf("screenshot %s: %v", sel, err)
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
