//go:build faults

package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// frameMax is the broker's default frame_max, which amqp091-go adopts: a
// message's properties and headers must fit in one frame of this size.
const frameMax = 131072

// poison is one bad message put straight into a queue of the pipeline.
type poison struct {
	name  string
	queue string // unprefixed
	// body defaults to an undecodable one, contentType to JSON's.
	body        []byte
	contentType string
	headers     amqp.Table
	// fill, if set, adds a header that leaves only fill bytes of the
	// frame free.
	fill int
	// want is "delivered" or the reason it must be parked with; source,
	// if set, the queue it must be parked from (unprefixed).
	want, source string
}

// TestPoisonMessages publishes bad messages straight into the work queues,
// error-queue and requeue-queue, bypassing the API, and checks that each
// ends parked exactly once with a reason (or, for a well-formed body,
// delivered), that none loops, and that every queue drains. The email
// downstream is healthy; the webhook downstream is down for the whole
// test, so every webhook attempt fails transiently and goes through the
// broker's dead-lettering and the retry stages.
func TestPoisonMessages(t *testing.T) {
	k := newPoisonKit(t)
	emailQ, webhookQ := "email-queue", "webhook-queue"
	nowhere := k.r.prefix + "no-such-queue"
	toEmail := k.r.prefix + emailQ
	k.run("poison messages", []poison{
		// Work queues: the worker decides.
		{name: "undecodable body", queue: emailQ, want: retry.ReasonPermanent, source: emailQ},
		{name: "binary body", queue: emailQ, body: []byte{0, 0xff, 0xfe, 1, 2}, contentType: "application/octet-stream", want: retry.ReasonPermanent, source: emailQ},
		// relay reads the body, not its label: a valid body is sent.
		{name: "wrong content type", queue: emailQ, body: k.email("wrong content type"), contentType: "text/plain", want: "delivered"},
		{name: "copy for another channel", queue: emailQ, body: k.webhook("copy for another channel"), want: retry.ReasonPermanent, source: emailQ},
		{name: "retry count huge string", queue: emailQ, headers: amqp.Table{retry.HeaderRetryCount: "99999999999999999999999"}, want: retry.ReasonPermanent, source: emailQ},
		{name: "retry count negative", queue: emailQ, headers: amqp.Table{retry.HeaderRetryCount: int32(-7)}, want: retry.ReasonPermanent, source: emailQ},
		{name: "x-death a string", queue: emailQ, headers: amqp.Table{"x-death": "garbage"}, want: retry.ReasonPermanent, source: emailQ},
		// The consumer hands a failure to the error exchange itself, without
		// x-death: the broker never reads this one (RabbitMQ before 3.13
		// would, and could crash its quorum dead-lettering on it).
		{name: "x-death garbage, transient", queue: webhookQ, body: k.webhook("x-death garbage, transient"),
			headers: amqp.Table{"x-death": []any{"junk", int32(5), amqp.Table{"count": "many", "queue": int32(3)}}}, want: retry.ReasonMaxRetries, source: webhookQ},
		{name: "retry count negative string, transient", queue: webhookQ, body: k.webhook("retry count negative string, transient"),
			headers: amqp.Table{retry.HeaderRetryCount: "-5"}, want: retry.ReasonMaxRetries, source: webhookQ},
		{name: "retry count huge, transient", queue: webhookQ, body: k.webhook("retry count huge, transient"),
			headers: amqp.Table{retry.HeaderRetryCount: int64(1) << 40}, want: retry.ReasonMaxRetries, source: webhookQ},
		// error-queue: the error stage decides.
		{name: "error, no source", queue: retry.ErrorQueue, want: retry.ReasonNoSource, source: retry.ErrorQueue},
		{name: "error, x-death a string", queue: retry.ErrorQueue, headers: amqp.Table{"x-death": "garbage"}, want: retry.ReasonNoSource, source: retry.ErrorQueue},
		{name: "error, names no work queue", queue: retry.ErrorQueue, headers: amqp.Table{retry.HeaderOriginalQueue: nowhere}, want: retry.ReasonNoSource, source: retry.ErrorQueue},
		{name: "error, count garbage", queue: retry.ErrorQueue, headers: amqp.Table{retry.HeaderOriginalQueue: toEmail, retry.HeaderRetryCount: "lots"},
			want: retry.ReasonPermanent, source: emailQ},
		// x-first-death-queue is never read: RabbitMQ before 3.13 keeps a
		// producer's value of it.
		{name: "error, source a number", queue: retry.ErrorQueue, headers: amqp.Table{retry.HeaderOriginalQueue: int32(42), "x-first-death-queue": toEmail},
			want: retry.ReasonNoSource, source: retry.ErrorQueue},
		{name: "error, retry-after absurd", queue: retry.ErrorQueue, headers: amqp.Table{retry.HeaderOriginalQueue: toEmail, retry.HeaderRetryAfter: int64(1e15)},
			want: retry.ReasonPermanent, source: emailQ},
		// requeue-queue: the requeue stage decides.
		{name: "requeue, no source", queue: retry.RequeueQueue, want: retry.ReasonNoSource, source: retry.RequeueQueue},
		{name: "requeue, names no work queue", queue: retry.RequeueQueue, headers: amqp.Table{retry.HeaderOriginalQueue: nowhere}, want: retry.ReasonNoSource, source: retry.RequeueQueue},
		{name: "requeue, not-before garbage", queue: retry.RequeueQueue, headers: amqp.Table{retry.HeaderOriginalQueue: toEmail, retry.HeaderNotBefore: "soon"},
			want: retry.ReasonPermanent, source: emailQ},
		{name: "requeue, not-before far future", queue: retry.RequeueQueue, headers: amqp.Table{retry.HeaderOriginalQueue: toEmail, retry.HeaderNotBefore: int64(1) << 50},
			want: retry.ReasonPermanent, source: emailQ},
	})
	k.r.tooLargeForTheBroker()
}

// TestPoisonHeadersFillTheFrame publishes messages whose headers fill an
// AMQP frame but for 100 bytes: the broker takes them, but neither the
// headers relay adds when it parks a message nor the x-death the broker
// adds when it dead-letters one fit any more.
func TestPoisonHeadersFillTheFrame(t *testing.T) {
	k := newPoisonKit(t)
	k.run("poison headers", []poison{
		{name: "headers fill the frame, permanent", queue: "email-queue", fill: 100, want: retry.ReasonTooLarge, source: "email-queue"},
		{name: "headers fill the frame, transient", queue: "webhook-queue", body: k.webhook("headers fill the frame, transient"), fill: 100,
			want: retry.ReasonTooLarge, source: "webhook-queue"},
	})
}

// poisonKit runs poison messages through `relay all` (in-process) with a
// short schedule: two retries, 100ms then 200ms.
type poisonKit struct {
	t    *testing.T
	r    *rig
	max  int
	conn *amqp.Connection
	seen func(id string) []notification.Event
}

func newPoisonKit(t *testing.T) *poisonKit {
	o := defaults()
	o.delays, o.max = "100ms,200ms", 2
	o.emailScenario, o.webhookScenario = flaky.Healthy, flaky.Outage
	r := newRig(t, o)
	r.startInProcess(r.env)
	conn := r.rawConn()
	return &poisonKit{t: t, r: r, max: o.max, conn: conn, seen: r.follow(conn)}
}

func poisonID(name string) string { return "poison-" + strings.ReplaceAll(name, " ", "-") }

// email is a valid email copy with the id of the case name.
func (k *poisonKit) email(name string) []byte {
	b, _ := json.Marshal(notification.Notification{V: notification.Version, ID: poisonID(name), Channel: channel.Email.Name(),
		CreatedAt: time.Now().UTC(), Parts: map[string]json.RawMessage{
			channel.Email.Name(): mustJSON(channel.EmailPart{To: []string{"ada@example.com"}, Subject: name, Text: "poison"})}})
	return b
}

// webhook is a valid webhook copy with the id of the case name.
func (k *poisonKit) webhook(name string) []byte {
	b, _ := json.Marshal(notification.Notification{V: notification.Version, ID: poisonID(name), Channel: channel.Webhook.Name(),
		CreatedAt: time.Now().UTC(), Parts: map[string]json.RawMessage{
			channel.Webhook.Name(): mustJSON(channel.WebhookPart{URL: k.r.hook, Payload: json.RawMessage(`{"poison":true}`)})}})
	return b
}

// publishing builds the case's message: an undecodable body unless one is
// given, and with fill, a header that leaves only fill bytes of the frame
// free.
func (c poison) publishing() amqp.Publishing {
	m := amqp.Publishing{MessageId: poisonID(c.name), ContentType: c.contentType, DeliveryMode: amqp.Persistent, Headers: c.headers, Body: c.body}
	if m.ContentType == "" {
		m.ContentType = notification.ContentType
	}
	if m.Body == nil {
		m.Body = []byte("not json {")
	}
	if c.fill > 0 {
		// class, weight, body size, flags, and each field's prefix
		used := 36 + len(m.ContentType) + len(m.MessageId)
		m.Headers = amqp.Table{"x-padding": strings.Repeat("p", frameMax-8-used-c.fill)}
	}
	return m
}

// run publishes the cases, waits until each has ended and the queues have
// drained, and checks each case, then prints the summary line.
func (k *poisonKit) run(name string, cases []poison) {
	t, r := k.t, k.r
	live := cases
	k.publish(live)

	rep := func() flaky.StatsReport { return r.down.Stats().Report() }
	var parked []retry.DeadLetter
	var missing []string
	check := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		if parked, err = r.parked(ctx); err != nil {
			missing = []string{err.Error()}
			return false
		}
		got := map[string]bool{}
		for _, p := range parked {
			got[p.ID] = true
		}
		email := rep().Email
		missing = nil
		for _, c := range live {
			if !got[poisonID(c.name)] && (c.want != "delivered" || email.Attempts[poisonID(c.name)] == nil) {
				missing = append(missing, c.name)
			}
		}
		return len(missing) == 0
	}
	poll(30*time.Second, 250*time.Millisecond, check)
	drained := r.waitDrained(15 * time.Second)
	check()

	copies := map[string][]retry.DeadLetter{}
	for _, p := range parked {
		copies[p.ID] = append(copies[p.ID], p)
	}
	sum := tally{duplicates: rep().Email.Duplicates + rep().Webhook.Duplicates}
	for _, c := range live {
		id := poisonID(c.name)
		evs, ps := k.seen(id), copies[id]
		sum.accepted++
		switch {
		case c.want == "delivered" && len(ps) == 0 && len(rep().Email.Attempts[id]) > 0:
			sum.delivered++
		case c.want != "delivered" && len(ps) > 0:
			sum.parked++
			sum.duplicates += len(ps) - 1
		default:
			sum.lost++
		}
		t.Run(c.name, func(t *testing.T) {
			t.Logf("%d events %s; parked %d times %s", len(evs), short(outcomes(evs), 300), len(ps), short(describe(ps), 300))
			if c.want == "delivered" {
				if n := len(rep().Email.Attempts[id]); n != 1 || len(ps) != 0 {
					t.Errorf("want delivered once: %d deliveries, parked %d times", n, len(ps))
				}
				return
			}
			if len(ps) == 0 {
				t.Fatalf("never parked (want %s): it is still in the pipeline", c.want)
			}
			if len(ps) > 1 {
				t.Errorf("parked %d times, want once", len(ps))
			}
			if p := ps[0]; p.Reason != c.want {
				t.Errorf("parked with reason %q, want %q", p.Reason, c.want)
			}
			if p := ps[0]; c.source != "" && p.Source != r.prefix+c.source {
				t.Errorf("parked from %q, want %q", p.Source, r.prefix+c.source)
			}
			// An attempt is a delivery to a worker; there are k.max
			// retries at most.
			if n := attempts(evs); n > k.max+1 {
				t.Errorf("%d attempts, want at most %d: it looped", n, k.max+1)
			}
		})
	}
	t.Logf("%s: %s", name, sum)
	if len(missing) > 0 {
		t.Errorf("not ended after 30s: %s", strings.Join(missing, "; "))
	}
	if !drained {
		depths, _ := queueDepths(r.prefix)
		t.Errorf("the queues did not drain: %v", depths)
	}
}

// publish puts each case's message straight into its queue, confirmed.
func (k *poisonKit) publish(cases []poison) {
	t := k.t
	ch, err := k.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false /* noWait */); err != nil {
		t.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range cases {
		// A queue just declared may refuse a publish (a negative
		// confirm) for a moment: try again, as a producer would.
		for try := 1; ; try++ {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", k.r.prefix+c.queue, true /* mandatory */, false /* immediate */, c.publishing())
			if err != nil {
				t.Fatalf("%s: publish: %v", c.name, err)
			}
			ok, err := dc.WaitContext(ctx)
			if ok && err == nil {
				break
			}
			if try == 5 || ch.IsClosed() {
				var why *amqp.Error
				select {
				case why = <-closed:
				default:
				}
				t.Fatalf("%s: the broker did not confirm the poison message: %v %v (channel closed: %v)", c.name, ok, err, why)
			}
			t.Logf("%s: negative confirm, publishing again", c.name)
		}
	}
}

// tooLargeForTheBroker checks that a message with a 1 MiB header never
// enters the pipeline: it cannot fit in a frame, and the broker refuses
// the publish by closing the publisher's connection.
func (r *rig) tooLargeForTheBroker() {
	r.t.Helper()
	conn, err := retry.Dial(r.url, "relay faults oversized")
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := ch.Confirm(false /* noWait */); err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := amqp.Publishing{MessageId: "poison-1MiB-header", Headers: amqp.Table{"x-huge": strings.Repeat("h", 1<<20)}, Body: []byte("{}")}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", r.topo.Name("email-queue"), true /* mandatory */, false /* immediate */, m)
	if err == nil {
		var ok bool
		ok, err = dc.WaitContext(ctx)
		if ok && err == nil {
			r.t.Errorf("the broker confirmed a message with a 1 MiB header")
			return
		}
	}
	r.t.Logf("a 1 MiB header is refused: %v (connection closed: %v)", err, conn.IsClosed())
}

// follow records the pipeline's events from now on and returns a function
// that lists those of one message.
func (r *rig) follow(conn *amqp.Connection) func(id string) []notification.Event {
	ctx, cancel := context.WithCancel(context.Background())
	r.t.Cleanup(cancel)
	in, err := events.Subscribe(ctx, conn, r.topo)
	if err != nil {
		r.t.Fatal(err)
	}
	var mu sync.Mutex
	byID := map[string][]notification.Event{}
	go func() {
		for ev := range in {
			mu.Lock()
			byID[ev.ID] = append(byID[ev.ID], ev)
			mu.Unlock()
		}
	}()
	return func(id string) []notification.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]notification.Event(nil), byID[id]...)
	}
}

// attempts counts the deliveries to a worker among evs.
func attempts(evs []notification.Event) int {
	n := 0
	for _, ev := range evs {
		if strings.HasPrefix(ev.Service, "worker") {
			n++
		}
	}
	return n
}

func outcomes(evs []notification.Event) string {
	parts := make([]string, len(evs))
	for i, ev := range evs {
		parts[i] = ev.Service + ":" + string(ev.Outcome)
		if ev.Reason != "" {
			parts[i] += "(" + ev.Reason + ")"
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describe(ps []retry.DeadLetter) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("%s from %s after %d retries (%s)", p.Reason, p.Source, p.Retries, short(p.LastError, 80))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// mustJSON encodes a part that always encodes.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
