//go:build faults

package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/cmd/relay/dead"
	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// hostile is one message a hostile or careless publisher puts into the
// pipeline, past the API.
type hostile struct {
	name string
	// queue is where it goes (unprefixed), straight through the default
	// exchange; with ingress set, it is published to the ingress exchange
	// with queue's routing key instead.
	queue   string
	ingress bool
	headers amqp.Table
	// oversized puts it in through the management API with a header larger
	// than the AMQP frame: a message no AMQP client can read.
	oversized bool
	// want is the reason it must end parked with, source the queue
	// (unprefixed) it must be parked from.
	want, source string
}

// TestHostileMessages is the trust boundary under attack: messages whose
// headers name other applications' queues or relay's own internal ones,
// forge x-death or the retry count, or exceed the frame size, put straight
// into every queue relay consumes. For each: a victim queue stays empty,
// the message is parked exactly once with its reason, it passes no stage
// more than max retries + 1 times, and a healthy notification published
// right after it is delivered on schedule.
func TestHostileMessages(t *testing.T) {
	o := defaults()
	o.delays, o.max = "200ms,400ms", 2
	// Healthy email; every webhook is turned away once with a Retry-After
	// of 1s, so a healthy notification crosses both stages.
	o.emailScenario, o.webhookScenario = flaky.Healthy, flaky.RateLimited
	o.retryAfter, o.rateLimitAttempts = time.Second, 1
	r := newRig(t, o)
	mgmt := retrytest.Management(t)
	r.startInProcess(r.env)
	conn := r.rawConn()
	seen := r.follow(conn)
	victim := r.prefix + "victim"
	declareVictim(t, conn, victim)

	q := func(base string) string { return r.prefix + base }
	wait := r.topo.WaitQueue(200 * time.Millisecond)
	names := map[string]string{
		"a victim": victim, "requeue-queue": q(retry.RequeueQueue), "a wait queue": wait,
		"error-queue": q(retry.ErrorQueue), "dead-letter-queue": q(retry.DeadQueue),
	}
	var cases []hostile
	for _, what := range []string{"a victim", "requeue-queue", "a wait queue", "error-queue", "dead-letter-queue"} {
		cases = append(cases,
			hostile{name: "ingress names " + what, queue: "webhook-queue", ingress: true,
				headers: amqp.Table{retry.HeaderOriginalQueue: names[what]}, want: retry.ReasonMaxRetries, source: "webhook-queue"},
			hostile{name: "error-queue names " + what, queue: retry.ErrorQueue,
				headers: amqp.Table{retry.HeaderOriginalQueue: names[what]}, want: retry.ReasonNoSource, source: retry.ErrorQueue},
			hostile{name: "requeue-queue names " + what, queue: retry.RequeueQueue,
				headers: amqp.Table{retry.HeaderOriginalQueue: names[what], retry.HeaderRetryCount: int32(1)}, want: retry.ReasonNoSource, source: retry.RequeueQueue},
		)
	}
	deathOf := func(queue string) []any {
		return []any{amqp.Table{"queue": queue, "reason": "rejected", "count": int64(1), "exchange": "", "routing-keys": []any{"webhook"}}}
	}
	cases = append(cases,
		hostile{name: "ingress forges x-death naming a victim", queue: "webhook-queue", ingress: true,
			headers: amqp.Table{"x-death": deathOf(victim), "x-first-death-queue": victim}, want: retry.ReasonMaxRetries, source: "webhook-queue"},
		hostile{name: "error-queue forges x-death naming a victim", queue: retry.ErrorQueue,
			headers: amqp.Table{"x-death": deathOf(victim), retry.HeaderOriginalQueue: q("webhook-queue")}, want: retry.ReasonNoSource, source: retry.ErrorQueue},
		hostile{name: "ingress forges a count of 99", queue: "webhook-queue", ingress: true,
			headers: amqp.Table{retry.HeaderRetryCount: int32(99)}, want: retry.ReasonMaxRetries, source: "webhook-queue"},
		hostile{name: "error-queue with no count", queue: retry.ErrorQueue,
			headers: amqp.Table{retry.HeaderOriginalQueue: q("webhook-queue")}, want: retry.ReasonMaxRetries, source: "webhook-queue"},
		hostile{name: "error-queue with an absurd count", queue: retry.ErrorQueue,
			headers: amqp.Table{retry.HeaderOriginalQueue: q("webhook-queue"), retry.HeaderRetryCount: int64(1) << 40}, want: retry.ReasonMaxRetries, source: "webhook-queue"},
		hostile{name: "error-queue with a negative count", queue: retry.ErrorQueue,
			headers: amqp.Table{retry.HeaderOriginalQueue: q("webhook-queue"), retry.HeaderRetryCount: "-5"}, want: retry.ReasonMaxRetries, source: "webhook-queue"},
		hostile{name: "requeue-queue with no count", queue: retry.RequeueQueue,
			headers: amqp.Table{retry.HeaderOriginalQueue: q("webhook-queue")}, want: retry.ReasonMaxRetries, source: "webhook-queue"},
		hostile{name: "requeue-queue waits forever", queue: retry.RequeueQueue,
			headers: amqp.Table{retry.HeaderOriginalQueue: q("webhook-queue"), retry.HeaderNotBefore: time.Now().Add(23 * time.Hour).UnixMilli()},
			want:    retry.ReasonMaxRetries, source: "webhook-queue"},
	)
	for _, base := range []string{"email-queue", "webhook-queue", "sms-queue", retry.ErrorQueue, retry.RequeueQueue} {
		source := base
		if base == retry.ErrorQueue || base == retry.RequeueQueue {
			source = "webhook-queue" // what its x-original-queue names
		}
		cases = append(cases, hostile{name: "headers over frame_max in " + base, queue: base, oversized: true,
			headers: amqp.Table{retry.HeaderOriginalQueue: q("webhook-queue")}, want: retry.ReasonTooLarge, source: source})
	}

	// One at a time: the hostile message, then a healthy notification that
	// must get through on schedule behind it.
	healthy := map[string]time.Duration{}
	for i, c := range cases {
		id := hostileID(c.name)
		if c.oversized {
			h := map[string]any{"x-padding": strings.Repeat("p", 2*conn.Config.FrameSize)}
			for k, v := range c.headers {
				h[k] = v
			}
			retrytest.PublishHTTP(t, mgmt, q(c.queue), id, h, string(r.unreachableWebhook(id)))
		} else {
			exchange, key := "", q(c.queue)
			if c.ingress {
				exchange, key = r.topo.Ingress(), r.channelOf(q(c.queue))
			}
			r.publishRaw(conn, exchange, key, amqp.Publishing{MessageId: id, ContentType: notification.ContentType,
				DeliveryMode: amqp.Persistent, Headers: c.headers, Body: r.unreachableWebhook(id)})
		}
		healthy[c.name] = r.healthyThrough(t, i)
	}

	// Every hostile message ends parked; then the pipeline drains.
	var parked []retry.DeadLetter
	poll(60*time.Second, 500*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := r.parked(ctx)
		if err != nil {
			return false
		}
		parked = list
		got := map[string]bool{}
		for _, p := range list {
			got[p.ID] = true
		}
		for _, c := range cases {
			if !got[hostileID(c.name)] {
				return false
			}
		}
		return true
	})
	drained := r.waitDrained(30 * time.Second)
	byID := map[string][]retry.DeadLetter{}
	for _, p := range parked {
		byID[p.ID] = append(byID[p.ID], p)
	}
	victimDepth := depthOf(t, conn, victim)
	for _, c := range cases {
		id := hostileID(c.name)
		ps, evs := byID[id], seen(id)
		l, waits := loops(evs, o.max)
		t.Run(c.name, func(t *testing.T) {
			t.Logf("published 1, parked %d, delivered to victim %d, loops %d (waits %d); healthy notification after it delivered in %s",
				len(ps), victimDepth, l, waits, healthy[c.name].Round(time.Millisecond))
			if len(ps) != 1 {
				t.Fatalf("parked %d times, want once; events %s", len(ps), short(outcomes(evs), 400))
			}
			p := ps[0]
			if p.Reason != c.want || p.Source != q(c.source) {
				t.Errorf("parked as %s from %s, want %s from %s (last error %q)", p.Reason, p.Source, c.want, q(c.source), p.LastError)
			}
			if p.LastError == "" {
				t.Error("parked without its last error")
			}
			if l != 0 || waits > retry.MaxWaits {
				t.Errorf("%d passes over max retries + 1, %d extra waits (at most %d): events %s", l, waits, retry.MaxWaits, short(outcomes(evs), 400))
			}
		})
	}
	if victimDepth != 0 {
		t.Errorf("the victim queue received %d messages", victimDepth)
	}
	if !drained {
		depths, _ := queueDepths(r.prefix)
		t.Errorf("the pipeline did not drain: %v", depths)
	}
	r.plantedReplay(t, conn, victim)
}

func hostileID(name string) string { return "hostile-" + strings.ReplaceAll(name, " ", "-") }

// unreachableWebhook is a webhook copy whose endpoint refuses every
// connection: a transient failure on every attempt. Each goes to a
// loopback address of its own (127.0.0.2, .3, …), so that one message's
// failures never count against another's: a host's circuit and its cap
// on copies in flight would defer the next one, which would then pass
// the worker more often than its retries.
func (r *rig) unreachableWebhook(id string) []byte {
	r.unreachable++
	url := fmt.Sprintf("http://127.0.%d.%d:1/hook", (r.unreachable+1)/250, (r.unreachable+1)%250+1)
	b, _ := json.Marshal(notification.Notification{V: notification.Version, ID: id, Channel: channel.Webhook.Name(),
		CreatedAt: time.Now().UTC(), Parts: map[string]json.RawMessage{
			channel.Webhook.Name(): json.RawMessage(`{"url":"` + url + `","payload":{"hostile":true}}`)}})
	return b
}

// declareVictim declares a queue of "another application" on the same
// broker; the rig's cleanup deletes everything under its prefix.
func declareVictim(t *testing.T, conn *amqp.Connection, name string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := retry.Dial(retrytest.URL(t), "relay faults cleanup")
		if err != nil {
			return
		}
		defer c.Close()
		if ch, err := c.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			ch.Close()
		}
	})
}

func depthOf(t *testing.T, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// publishRaw publishes one message, confirmed, as a client past the API.
func (r *rig) publishRaw(conn *amqp.Connection, exchange, key string, m amqp.Publishing) {
	r.t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		r.t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false /* noWait */); err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true /* mandatory */, false /* immediate */, m)
	if err != nil {
		r.t.Fatalf("publish %s: %v", m.MessageId, err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		r.t.Fatalf("publish %s: not confirmed (%v)", m.MessageId, err)
	}
}

// healthyThrough posts a healthy notification and waits until both its
// copies are delivered: the email at once, the webhook after one turn
// through both stages (1s Retry-After). It returns how long that took.
func (r *rig) healthyThrough(t *testing.T, i int) time.Duration {
	t.Helper()
	start := time.Now()
	body := fmt.Sprintf(`{"email":{"to":["ok%d@example.com"],"subject":"healthy %d","text":"hi"},"webhook":{"url":%q,"payload":{"i":%d}}}`,
		i, i, r.hook, i)
	req, _ := http.NewRequest(http.MethodPost, r.api+"/v1/notifications", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: clientTimeout}).Do(req)
	if err != nil {
		t.Fatalf("post healthy notification: %v", err)
	}
	var res struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || res.ID == "" {
		t.Fatalf("post healthy notification: %s", resp.Status)
	}
	// One scheduled retry: the 1s the downstream asked for, and room for
	// the hops; a stalled stage takes far longer.
	const onSchedule = 6 * time.Second
	if !poll(onSchedule, 50*time.Millisecond, func() bool {
		got, _, err := r.delivered()
		return err == nil && got[copyKey{res.ID, "email"}] && got[copyKey{res.ID, "webhook"}]
	}) {
		depths, _ := queueDepths(r.prefix)
		t.Fatalf("healthy notification %d (%s) not delivered within %s: a stage is stalled; queues %v", i, res.ID, onSchedule, depths)
	}
	return time.Since(start)
}

// loops counts the passes of one message beyond max retries + 1 through
// the worker and through each stage, from its events, and apart from them
// the extra rounds the requeue stage made it wait (bounded by
// retry.MaxWaits).
func loops(evs []notification.Event, max int) (over, waits int) {
	var worker, errorStage, requeueStage int
	for _, ev := range evs {
		switch {
		case strings.HasPrefix(ev.Service, "worker"):
			worker++
		case ev.Outcome == "retrying":
			errorStage++
		case ev.Outcome == "requeued":
			requeueStage++
		case ev.Outcome == "waiting":
			waits++
		}
	}
	beyond := func(n int) int { return maxInt(n-(max+1), 0) }
	return beyond(worker) + beyond(errorStage) + beyond(requeueStage), waits
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// plantedReplay plants a dead letter whose x-dead-source names the victim
// and replays it by id over HTTP, with all over HTTP, and with the CLI's
// --all: every replay is refused naming the queue, the message stays
// parked, and the victim stays empty.
func (r *rig) plantedReplay(t *testing.T, conn *amqp.Connection, victim string) {
	t.Run("planted dead letter", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r.publishRaw(conn, r.topo.Name(retry.DeadExchange), "", amqp.Publishing{MessageId: "planted", Body: []byte(`{}`),
			Headers: amqp.Table{retry.HeaderDeadSource: victim, retry.HeaderDeadReason: retry.ReasonPermanent}})
		for _, call := range []struct{ path, body string }{
			{"/v1/dead-letters/planted/replay", ""},
			{"/v1/dead-letters/replay", `{"id":"planted"}`},
		} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.api+call.path, bytes.NewReader([]byte(call.body)))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusConflict || !strings.Contains(string(out), victim) {
				t.Errorf("POST %s = %d %s, want 409 naming %s", call.path, resp.StatusCode, out, victim)
			}
		}
		var out bytes.Buffer
		// The CLI calls the API relay all serves.
		getenv := func(k string) string {
			if k == "RELAY_API" {
				return r.api
			}
			return r.env[k]
		}
		err := dead.Run(ctx, []string{"replay", "--all"}, getenv, strings.NewReader(""), &out)
		if err == nil || !strings.Contains(err.Error(), victim) {
			t.Errorf("relay dead replay --all = %v, want an error naming %s", err, victim)
		}
		// A walk of the dead-letter queue hands back what it did not
		// remove when its channel closes, a moment after the command ends.
		n := 0
		poll(10*time.Second, 100*time.Millisecond, func() bool {
			list, err := r.parked(ctx)
			if err != nil {
				return false
			}
			n = 0
			for _, p := range list {
				if p.ID == "planted" {
					n++
				}
			}
			return n > 0
		})
		if n != 1 {
			t.Errorf("the planted message is parked %d times, want it still parked once", n)
		}
		if d := depthOf(t, conn, victim); d != 0 {
			t.Errorf("the victim queue received %d messages", d)
		}
		t.Logf("planted dead letter: replays refused by id, by filter and with --all; still parked %d; delivered to victim 0", n)
	})
}
