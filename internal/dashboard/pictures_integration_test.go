//go:build integration

package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestPicturesInBrowser loads the dashboard of a `relay all` whose
// webhook receiver fails three requests in four, with a schedule of 1s, 2s and
// 4s on the binary delay levels: the pipeline is drawn from the topology
// (the 32 levels in one wait box), a copy's attempts are marks on a time
// axis with its scheduled waits as bars as long as the schedule says,
// and every list row has its compact axis. Screenshots of the three go to
// DASHBOARD_SCREENSHOTS (docs/dashboard.md's come from here).
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
		"FLAKY_WEBHOOK_SCENARIO": "flaky", "FLAKY_RATE": "0.75", "FLAKY_SEED": "7"})

	// Notifications until one webhook copy has failed twice: two
	// scheduled waits, 1s then 2s. Whether an attempt fails is drawn from
	// the notification's id: at a rate of 0.75 a copy fails twice with
	// probability 0.56, so twenty notifications all missing it would take
	// odds of about one in 10^7.
	var retried string
	var ids []string
	retrytest.Eventually(t, 40*time.Second, func() bool {
		if len(ids) < 20 {
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
	}, "no webhook copy failed twice among the 20 notifications sent")

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

// startPictured runs relay all on a delay backend and a hand-off, with a
// webhook receiver that fails half the time and the schedule 1s, 2s, 3s
// (linear, as native retry needs), on the broker at url, and deletes its
// topology once it has stopped.
func startPictured(t *testing.T, url string, backend retry.Backend, handoff retry.Handoff) relay {
	t.Helper()
	prefix := retrytest.Prefix(t)
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: backend, Handoff: handoff, QueueType: durableFor(t, backend),
		Policy: retry.Policy{Delays: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}}}
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last registered first: this one after relay stopped.
	t.Cleanup(func() {
		defer conn.Close()
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(prefix+"history-queue", false, false, false)
			_ = ch.ExchangeDelete(prefix+"notification-events", false, false)
			ch.Close()
		}
	})
	return startRelay(t, map[string]string{"AMQP_URL": url, "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": string(backend),
		"RETRY_HANDOFF": handoff.String(), "QUEUE_TYPE": string(topo.QueueType), "RETRY_DELAYS": "1s,2s,3s", "RETRY_MAX": "3",
		"FLAKY_WEBHOOK_SCENARIO": "flaky", "FLAKY_RATE": "0.5", "FLAKY_SEED": "3"})
}

// TestPipelineLive runs the real pipeline on every delay backend the
// brokers at hand have, with each hand-off, and reads /dashboard/pipeline
// as the page does: the boxes are the backend's (a wait box, but none for
// native retry) and the arrows of a retry carry the retries.
func TestPipelineLive(t *testing.T) {
	tests := []struct {
		backend retry.Backend
		handoff retry.Handoff
		// retry are the arrows every retry takes.
		retry []string
	}{
		{retry.TTL, retry.ViaStages, []string{"webhook-queue>error-exchange", "error-queue>wait", "wait>requeue-queue", "requeue-queue>webhook-queue"}},
		{retry.TTL, retry.Direct, []string{"webhook-queue>wait", "wait>webhook-queue"}},
		{retry.Levels, retry.ViaStages, []string{"webhook-queue>error-exchange", "error-queue>wait", "wait>requeue-queue", "requeue-queue>webhook-queue"}},
		{retry.Levels, retry.Direct, []string{"webhook-queue>wait", "wait>webhook-queue"}},
		{retry.Plugin, retry.ViaStages, []string{"webhook-queue>error-exchange", "error-queue>wait", "wait>requeue-queue", "requeue-queue>webhook-queue"}},
		{retry.Plugin, retry.Direct, []string{"webhook-queue>wait", "wait>webhook-queue"}},
		{retry.Native, retry.ViaStages, []string{"webhook-queue>webhook-queue"}},
		{retry.Native, retry.Direct, []string{"webhook-queue>webhook-queue"}},
	}
	for _, tt := range tests {
		hand := "stages"
		if tt.handoff == retry.Direct {
			hand = "direct"
		}
		t.Run(string(tt.backend)+"/"+hand, func(t *testing.T) {
			url := retrytest.URL(t)
			switch tt.backend {
			case retry.Native:
				url = retrytest.NativeURL(t)
			case retry.Plugin:
				url = retrytest.PluginURL(t)
			}
			r := startPictured(t, url, tt.backend, tt.handoff)
			var p struct {
				Backend string `json:"backend"`
				Handoff string `json:"handoff"`
				Nodes   []struct {
					ID string `json:"id"`
				} `json:"nodes"`
				Edges []struct {
					ID   string  `json:"id"`
					Rate float64 `json:"rate"`
				} `json:"edges"`
			}
			sent := 0
			retrytest.Eventually(t, 40*time.Second, func() bool {
				if sent < 20 {
					r.post(t, fmt.Sprintf(`{"webhook":{"url":%q,"payload":{"n":%d}}}`, r.hooks+"/webhooks/live", sent))
					sent++
				}
				code, body := r.call(t, "GET", "/dashboard/pipeline", "", true)
				if code != 200 || json.Unmarshal(body, &p) != nil {
					return false
				}
				busy := map[string]bool{}
				for _, e := range p.Edges {
					busy[e.ID] = e.Rate > 0
				}
				for _, id := range tt.retry {
					if !busy[id] {
						return false
					}
				}
				return true
			}, "the arrows %v of a retry carried nothing within 40s", tt.retry)
			if p.Backend != string(tt.backend) || p.Handoff != hand {
				t.Errorf("drawn as %s, %s; want %s, %s", p.Backend, p.Handoff, tt.backend, hand)
			}
			wait := false
			for _, n := range p.Nodes {
				wait = wait || n.ID == "wait"
				if strings.HasPrefix(n.ID, "wait.") {
					t.Errorf("a box %q: every wait queue belongs in the wait box", n.ID)
				}
			}
			// Every backend has one: native's holds the delay levels its
			// deferrals wait in.
			if !wait {
				t.Errorf("no wait box; want one on every backend")
			}
		})
	}
}

// durableFor is the queue type that keeps most of what backend b waits.
func durableFor(t *testing.T, b retry.Backend) retry.QueueType {
	f, err := retry.FeaturesOf(b)
	if err != nil {
		t.Fatal(err)
	}
	return f.Durable()
}
