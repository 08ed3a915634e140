//go:build integration

package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// parkedCopy is a parked copy as GET /v1/dead-letters lists it.
type parkedCopy struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// deadLetters lists every parked copy the query selects, from the API.
func (r relay) deadLetters(t *testing.T, query string) []parkedCopy {
	t.Helper()
	code, b := r.call(t, http.MethodGet, "/v1/dead-letters?limit=0&"+query, "", true)
	var res struct {
		DeadLetters []parkedCopy `json:"dead_letters"`
	}
	if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/dead-letters?%s = %d %s", query, code, b)
	}
	return res.DeadLetters
}

// jobState is a dead-letter job as the API answers it.
type jobState struct {
	State                 string
	Matched, Done, Failed int64
}

// job reads a dead-letter job from the API.
func (r relay) job(t *testing.T, id string) jobState {
	t.Helper()
	code, b := r.call(t, http.MethodGet, "/v1/dead-letters/jobs/"+id, "", true)
	var j jobState
	if err := json.Unmarshal(b, &j); code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/dead-letters/jobs/%s = %d %s", id, code, b)
	}
	return j
}

// pageJob is the job the dead-letters panel shows.
type pageJob struct {
	ID, State, Matched, Done, Failed string
}

func shownJob(t *testing.T, ctx context.Context) pageJob {
	t.Helper()
	return evaluate[pageJob](t, ctx, `(j => ({ID: j.dataset.id, State: j.dataset.state, Matched: j.dataset.matched,
		Done: j.dataset.done, Failed: j.dataset.failed}))(document.getElementById("dead-job"))`)
}

// shownIDs are the notification ids of the panel's list, sorted.
func shownIDs(t *testing.T, ctx context.Context) []string {
	t.Helper()
	ids := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#dead-rows tr.dead-letter")].map(tr => tr.dataset.id)`)
	slices.Sort(ids)
	return ids
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// TestDeadLettersInBrowser parks three webhook copies (out of retries in
// the receiver's outage) and two email copies (refused for good), then
// works the dashboard's dead-letters panel: a filter the API refuses
// shows the API's words; a filter by channel and reason counts and lists
// the copies it selects; a replay job of the webhook copies is followed to
// its end with the API's counts, and they leave the dead-letter queue; a
// purge of the email copies asks for a confirmation naming how many, does
// nothing when it is declined, and purges them when it is given.
func TestDeadLettersInBrowser(t *testing.T) {
	ctx := browser(t)
	r := startRelay(t, map[string]string{"FLAKY_EMAIL_SCENARIO": "permanent", "FLAKY_PERMANENT_MATCH": "reject"})
	stamp := time.Now().UnixNano()
	var hooks, mails []string
	for i := range 3 {
		hooks = append(hooks, r.post(t, fmt.Sprintf(`{"webhook":{"url":%q,"payload":{"n":%d}}}`, r.hooks+"/webhooks/dead", i)))
	}
	for i := range 2 {
		mails = append(mails, r.post(t, fmt.Sprintf(`{"email":{"to":["reject%d+%d@example.com"],"subject":"Refused","text":"refused"}}`, i, stamp)))
	}
	// The history says when each copy is parked; then the dead-letter
	// queue holds the five (each look at it dials the broker: not every
	// 10 ms).
	for _, id := range append(slices.Clone(hooks), mails...) {
		var copies map[string]copyState
		retrytest.Eventually(t, 20*time.Second, func() bool {
			copies = r.copies(t, id)
			return copies["webhook"].Status == "parked" || copies["email"].Status == "parked"
		}, "%s was not parked: %+v", id, &copies)
	}
	var parked []parkedCopy
	retrytest.Eventually(t, 10*time.Second, func() bool {
		parked = r.deadLetters(t, "")
		return len(parked) == 5
	}, "the dead-letter queue holds %+v, want the 5 parked copies", &parked)

	run(t, ctx, "open the page",
		chromedp.Navigate(r.api+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	watchPolicy(t, ctx)
	if evaluate[bool](t, ctx, `!document.getElementById("dead").hidden`) {
		t.Fatal("the dead-letters panel shows before a log-in")
	}
	run(t, ctx, "log in and see the panel",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("dead")),
	)

	// A range that ends before it starts: the page sends it as picked,
	// and the API says what is wrong with it.
	evaluate[bool](t, ctx, `document.getElementById("dead-since").value = "2026-01-02T10:00:00";
		document.getElementById("dead-until").value = "2026-01-01T10:00:00";
		document.getElementById("dead-until").value !== ""`)
	run(t, ctx, "a filter the API refuses",
		clickEnabled("dead-count"),
		chromedp.WaitVisible(chromedp.ID("dead-problem")),
	)
	if msg := evaluate[string](t, ctx, `document.getElementById("dead-problem").textContent`); !strings.Contains(msg, "until: must be after since") {
		t.Errorf("the panel says %q, want the API's word on until", msg)
	}
	if evaluate[bool](t, ctx, `!document.getElementById("dead-actions").hidden`) {
		t.Error("the panel offers to act on a filter the API refused")
	}

	count := func(what string, want int, fields map[string]string) {
		t.Helper()
		actions := []chromedp.Action[chromedp.Void]{chromedp.Click(chromedp.ID("dead-clear"))}
		for id, v := range fields {
			actions = append(actions, chromedp.SetValue(chromedp.ID(id), v))
		}
		actions = append(actions,
			clickEnabled("dead-count"),
			waitFor(fmt.Sprintf(`document.getElementById("dead-result").dataset.matched === "%d" &&
				document.querySelectorAll("#dead-rows tr.dead-letter").length === %d`, want, want)),
		)
		wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, actions...); err != nil {
			t.Fatalf("%s: %v; the panel says %q, %q and lists %v", what, err, evaluate[string](t, ctx, `document.getElementById("dead-result").textContent`),
				evaluate[string](t, ctx, `document.getElementById("dead-problem").textContent`), shownIDs(t, ctx))
		}
		if evaluate[bool](t, ctx, `!document.getElementById("dead-problem").hidden`) {
			t.Errorf("%s: the panel shows a problem: %s", what, evaluate[string](t, ctx, `document.getElementById("dead-problem").textContent`))
		}
	}
	count("count the refused email copies", 2, map[string]string{"dead-channel": "email", "dead-reason": "permanent"})
	if got, want := shownIDs(t, ctx), sorted(mails); !slices.Equal(got, want) {
		t.Errorf("the panel lists %v, want the email notifications %v", got, want)
	}
	if reasons := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#dead-rows tr.dead-letter")].map(tr => tr.dataset.reason)`); !slices.Equal(reasons, []string{"permanent", "permanent"}) {
		t.Errorf("the listed copies' reasons are %v", reasons)
	}
	count("count every parked copy", 5, nil)
	count("count the webhook copies out of retries", 3, map[string]string{"dead-channel": "webhook", "dead-reason": "max-retries"})
	if got, want := shownIDs(t, ctx), sorted(hooks); !slices.Equal(got, want) {
		t.Errorf("the panel lists %v, want the webhook notifications %v", got, want)
	}

	// The outage began when the receiver started, before it failed the
	// first attempt, so it is over outage after that attempt.
	first := r.copies(t, hooks[0])["webhook"].Attempts
	if len(first) == 0 {
		t.Fatal("the API shows no attempt of the first webhook copy")
	}
	over := first[0].At.Add(outage)
	retrytest.Eventually(t, outage+10*time.Second, func() bool { return time.Now().After(over) }, "the outage is not over")

	// The job's first answer says it runs: the Cancel button shows then.
	evaluate[bool](t, ctx, `window.sawCancel = false;
		new MutationObserver(() => {
			if (document.getElementById("dead-job").dataset.state === "running" && !document.getElementById("dead-cancel").hidden) window.sawCancel = true;
		}).observe(document.getElementById("dead-job"), {attributes: true, subtree: true});
		true`)
	run(t, ctx, "replay all matching",
		clickEnabled("dead-replay"),
		waitFor(`document.getElementById("dead-job").dataset.state === "done"`),
		// Once the job ends, the filter is counted again.
		waitFor(`document.getElementById("dead-result").dataset.matched === "0"`),
	)
	if !evaluate[bool](t, ctx, `window.sawCancel`) {
		t.Error("the panel never offered to cancel the running job")
	}
	if !evaluate[bool](t, ctx, `document.getElementById("dead-cancel").hidden`) {
		t.Error("the panel offers to cancel a job that ended")
	}
	shown := shownJob(t, ctx)
	if want := (pageJob{ID: shown.ID, State: "done", Matched: "3", Done: "3", Failed: "0"}); shown != want || !strings.HasPrefix(shown.ID, "job_") {
		t.Errorf("the panel shows the replay job as %+v, want %+v", shown, want)
	}
	if got := r.job(t, shown.ID); got != (jobState{State: "done", Matched: 3, Done: 3, Failed: 0}) {
		t.Errorf("the API says the replay job is %+v", got)
	}
	if left := r.deadLetters(t, "channel=webhook"); len(left) != 0 {
		t.Errorf("after the replay job, webhook copies still parked: %+v", left)
	}
	if left := r.deadLetters(t, "channel=email"); len(left) != 2 {
		t.Errorf("after the replay of the webhook copies, %d email copies are parked, want 2: %+v", len(left), left)
	}
	for _, id := range hooks {
		retrytest.Eventually(t, 20*time.Second, func() bool { return r.copies(t, id)["webhook"].Status == "delivered" },
			"the replayed webhook copy of %s was not delivered", id)
	}
	screenshot(t, ctx, "relay-dashboard-dead-replayed.png")

	count("count the email copies to purge", 2, map[string]string{"dead-channel": "email"})
	run(t, ctx, "purge asks for a confirmation",
		clickEnabled("dead-purge"),
		chromedp.WaitVisible(chromedp.ID("dead-confirm")),
	)
	if text := evaluate[string](t, ctx, `document.getElementById("dead-confirm").textContent`); !strings.Contains(text, "2 parked copies") || !strings.Contains(text, "cannot be undone") {
		t.Errorf("the confirmation says %q, want it to name the 2 copies and that a purge cannot be undone", text)
	}
	screenshot(t, ctx, "relay-dashboard-dead-purge.png")
	if left := r.deadLetters(t, "channel=email"); len(left) != 2 {
		t.Errorf("before the confirmation, %d email copies are parked, want 2", len(left))
	}
	run(t, ctx, "decline the purge",
		chromedp.Click(chromedp.ID("dead-confirm-no")),
		chromedp.WaitNotVisible(chromedp.ID("dead-confirm")),
	)
	if shownJob(t, ctx).ID != shown.ID {
		t.Error("a declined purge started a job")
	}
	if left := r.deadLetters(t, "channel=email"); len(left) != 2 {
		t.Errorf("after the purge was declined, %d email copies are parked, want 2", len(left))
	}
	run(t, ctx, "confirm the purge",
		clickEnabled("dead-purge"),
		chromedp.WaitVisible(chromedp.ID("dead-confirm")),
		chromedp.Click(chromedp.ID("dead-confirm-yes")),
		waitFor(`(j => j.dataset.id !== `+fmt.Sprintf("%q", shown.ID)+` && j.dataset.state === "done")(document.getElementById("dead-job"))`),
		waitFor(`document.getElementById("dead-result").dataset.matched === "0"`),
	)
	purge := shownJob(t, ctx)
	if want := (pageJob{ID: purge.ID, State: "done", Matched: "2", Done: "2", Failed: "0"}); purge != want {
		t.Errorf("the panel shows the purge job as %+v, want %+v", purge, want)
	}
	if got := r.job(t, purge.ID); got != (jobState{State: "done", Matched: 2, Done: 2, Failed: 0}) {
		t.Errorf("the API says the purge job is %+v", got)
	}
	if left := r.deadLetters(t, ""); len(left) != 0 {
		t.Errorf("after the purge, parked: %+v", left)
	}
	checkPolicy(t, ctx)

	// The tab keeps the address of the job it follows while it runs: a
	// reload then reads the job there and draws it as the API answers.
	// The job that ended stands in for one still running.
	evaluate[bool](t, ctx, `sessionStorage.setItem("relay.deadJob", "/v1/dead-letters/jobs/`+purge.ID+`"), true`)
	run(t, ctx, "reload and see the job followed",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("dead")),
		waitFor(`(j => j.dataset.id === `+fmt.Sprintf("%q", purge.ID)+` && j.dataset.state === "done" && j.dataset.done === "2")(document.getElementById("dead-job"))`),
	)
	if evaluate[bool](t, ctx, `sessionStorage.getItem("relay.deadJob") !== null`) {
		t.Error("the tab still keeps the address of a job that ended")
	}
}

// TestCancelDeadLetterJobInBrowser parks many copies straight into the
// dead-letter queue, starts a purge of them from the panel and cancels
// it while it runs: the page shows the job cancelled, as the API says,
// and what the job did not purge stays parked.
func TestCancelDeadLetterJobInBrowser(t *testing.T) {
	ctx := browser(t)
	r := startRelay(t, map[string]string{"FLAKY_WEBHOOK_SCENARIO": "healthy"})
	// Enough copies that the job is still walking them when the cancel
	// comes: it notices at its next lease renewal, a second after it
	// starts, and it has purged 1,500 to 2,500 a second here.
	const n = 8000
	ch, err := retrytest.Conn(t).Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for i := range n {
		if err := ch.Publish(r.prefix+retry.DeadExchange, "",
			false, // mandatory
			false, // immediate
			amqp.Publishing{MessageId: fmt.Sprintf("c%05d", i), Body: []byte(`{}`), DeliveryMode: amqp.Persistent,
				Headers: amqp.Table{retry.HeaderDeadSource: r.prefix + "sms-queue", retry.HeaderDeadReason: retry.ReasonExpired,
					retry.HeaderParkedAt: time.Now().UTC().Format(time.RFC3339Nano), retry.HeaderLastError: "gateway busy"}}); err != nil {
			t.Fatal(err)
		}
	}
	var parked int
	retrytest.Eventually(t, 20*time.Second, func() bool {
		q, err := ch.QueueDeclarePassive(r.prefix+retry.DeadQueue, true, false, false, false, nil)
		parked = q.Messages
		return err == nil && parked == n
	}, "the dead-letter queue holds %d, want %d", &parked, n)

	run(t, ctx, "open the page and log in",
		chromedp.Navigate(r.api+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("dead")),
	)
	watchPolicy(t, ctx)
	run(t, ctx, "count the expired copies",
		chromedp.SetValue(chromedp.ID("dead-reason"), "expired"),
		chromedp.SetValue(chromedp.ID("dead-error"), "BUSY"),
		clickEnabled("dead-count"),
		waitFor(fmt.Sprintf(`document.getElementById("dead-result").dataset.matched === "%d" &&
			document.querySelectorAll("#dead-rows tr.dead-letter").length === 10`, n)),
	)
	run(t, ctx, "purge them, and cancel the job while it runs",
		clickEnabled("dead-purge"),
		chromedp.WaitVisible(chromedp.ID("dead-confirm")),
		chromedp.Click(chromedp.ID("dead-confirm-yes")),
		chromedp.WaitVisible(chromedp.ID("dead-cancel")),
		chromedp.Click(chromedp.ID("dead-cancel")),
		waitFor(`document.getElementById("dead-job").dataset.state !== "running"`),
	)
	shown := shownJob(t, ctx)
	if shown.State != "cancelled" {
		t.Fatalf("the panel shows the purge job %+v, want it cancelled (the page says %q, %q)", shown,
			evaluate[string](t, ctx, `document.getElementById("dead-job").textContent`), evaluate[string](t, ctx, `document.getElementById("dead-problem").textContent`))
	}
	api := r.job(t, shown.ID)
	if api.State != "cancelled" || fmt.Sprint(api.Done) != shown.Done || fmt.Sprint(api.Matched) != shown.Matched {
		t.Errorf("the API says the job is %+v, the panel %+v", api, shown)
	}
	if !evaluate[bool](t, ctx, `document.getElementById("dead-cancel").hidden`) {
		t.Error("the panel offers to cancel a cancelled job")
	}
	// The page counts the filter again once the job ends: what the job
	// did not purge is still parked, and the count says how much.
	run(t, ctx, "see what is left counted", waitFor(`document.getElementById("dead-result").dataset.matched !== undefined`))
	left := evaluate[string](t, ctx, `document.getElementById("dead-result").dataset.matched`)
	q, err := ch.QueueDeclarePassive(r.prefix+retry.DeadQueue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "relay-dashboard-dead-cancelled.png")
	t.Logf("the job stopped with %d of %d purged by its last progress write, %d left parked", api.Done, n, q.Messages)
	if q.Messages == 0 || q.Messages > n-int(api.Done) || left != fmt.Sprint(q.Messages) {
		t.Errorf("after the cancel, %d copies are parked and the panel counts %s; the job purged %d of %d", q.Messages, left, api.Done, n)
	}
	checkPolicy(t, ctx)
}
