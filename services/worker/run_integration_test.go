//go:build integration

package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
	"github.com/relay-demo/relay/webhooks"
)

// stack is the flaky downstreams, the retrier and both workers, running
// in-process on a private topology.
type stack struct {
	topo  retry.Topology
	conn  *amqp.Connection
	flaky *flaky.Server
	// stop stops the processes; a test that declares queues of its own
	// calls it before it deletes them, or the processes declare them again.
	stop func()
}

func start(t *testing.T, env map[string]string) *stack {
	t.Helper()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	prefix := retrytest.Prefix(t)
	base := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "200ms,400ms,800ms", "WEBHOOK_SECRET": "whsec_" + base64.StdEncoding.EncodeToString(secret),
		"SMS_SECRET":          webhooks.NewSecret(),
		"WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8,::1/128", "WEBHOOK_TIMEOUT": "2s", "SMTP_HOST": "127.0.0.1", "SMTP_TLS": "none",
		"EMAIL_FROM": "relay@example.com", "FLAKY_HTTP_ADDR": "127.0.0.1:0", "FLAKY_SMTP_ADDR": "127.0.0.1:0",
		"FLAKY_SEED": "7",
	}
	for k, v := range env {
		base[k] = v
	}
	getenv := func(k string) string { return base[k] }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// The processes stop before the topology goes (cleanups run last
	// first): a process still running when its queues go would declare
	// them again. The fake downstreams, started with ctx, stop with them.
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(stop)

	cfg, err := flaky.LoadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := flaky.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := cutPort(srv.SMTPAddr())
	base["SMTP_PORT"] = port
	base["SMS_URL"] = "http://" + srv.HTTPAddr() + "/webhooks/sms" + base["SMS_PATH"]

	conn := retrytest.Conn(t)
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}}}
	if max := base["RETRY_MAX"]; max != "" {
		fmt.Sscan(max, &topo.Policy.MaxRetries)
	}
	// Declare first so publishes cannot race the services' own declare.
	if err := topo.Declare(ctx, conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		// The events exchange the services publish their decisions on.
		if ch, err := conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(events.ExchangeName(topo), false, false)
			ch.Close()
		}
	})
	run := func(name string, f func(context.Context, func(string) string, io.Writer) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx, getenv, io.Discard); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	run("retrier", retrier.Run)
	for _, ch := range []string{"email", "webhook", "sms"} {
		run("worker "+ch, func(ctx context.Context, getenv func(string) string, w io.Writer) error {
			return worker.Run(ctx, ch, getenv, w)
		})
	}
	return &stack{topo: topo, conn: conn, flaky: srv, stop: stop}
}

func cutPort(addr string) (string, string, bool) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], true
		}
	}
	return "", "", false
}

// send publishes each channel's copy of n notifications, as the API does.
func (s *stack) send(t *testing.T, n int, webhookURL string) []string {
	t.Helper()
	pub, err := retry.NewPublisher(s.conn, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var ids []string
	for i := range n {
		note := &notification.Notification{V: 1, ID: fmt.Sprintf("ntf_%s_%d", s.topo.Prefix[len(s.topo.Prefix)-9:len(s.topo.Prefix)-1], i),
			CreatedAt: time.Now().UTC(), Parts: map[string]json.RawMessage{
				"email":   json.RawMessage(`{"to":["ada@example.com"],"subject":"Hi","text":"hello"}`),
				"webhook": json.RawMessage(`{"url":` + strconv.Quote(webhookURL) + `,"payload":{"n":1}}`),
			}}
		for _, ch := range note.Channels() {
			body, _ := json.Marshal(note.For(ch))
			if err := pub.Publish(context.Background(), s.topo.Ingress(), ch, amqp.Publishing{
				MessageId: note.ID, ContentType: notification.ContentType, DeliveryMode: amqp.Persistent,
				Timestamp: time.Now(), Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, note.ID)
	}
	return ids
}

func (s *stack) parked(t *testing.T) []retry.DeadLetter {
	t.Helper()
	list, err := (retry.DeadLetters{Conn: s.conn, Topology: s.topo}).List(context.Background(), retry.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func TestWorkersAgainstFlakyDownstreams(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		path       string
		wantParked int // webhook copies parked; emails are always delivered
	}{
		// Twenty retries: a copy failing every attempt at even odds,
		// which would park it, is one run in a hundred thousand.
		{"flaky at 50 percent", map[string]string{"FLAKY_EMAIL_SCENARIO": "flaky", "FLAKY_WEBHOOK_SCENARIO": "flaky",
			"FLAKY_RATE": "0.5", "RETRY_MAX": "20"}, "/webhooks/orders", 0},
		{"outage shorter than the schedule", map[string]string{"FLAKY_EMAIL_SCENARIO": "outage", "FLAKY_WEBHOOK_SCENARIO": "outage",
			"FLAKY_OUTAGE": "1s"}, "/webhooks/orders", 0},
		{"permanent failure parks once", map[string]string{"FLAKY_WEBHOOK_SCENARIO": "permanent"}, "/webhooks/fail", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, tt.env)
			const n = 5
			ids := s.send(t, n, "http://"+s.flaky.HTTPAddr()+tt.path)
			var report flaky.StatsReport
			// The listing comes before the report: a copy is parked only
			// after the receiver recorded its attempt, so every parked copy
			// the listing finds is in the report taken after it.
			var parked []retry.DeadLetter
			retrytest.Eventually(t, 20*time.Second, func() bool {
				parked = s.parked(t)
				report = s.flaky.Stats().Report()
				return report.Email.Accepted == n && report.Webhook.Accepted+len(parked) == n
			}, "not every copy ended delivered or parked")

			if report.Email.Duplicates != 0 || report.Webhook.Duplicates != 0 {
				t.Errorf("duplicates: email %d, webhook %d", report.Email.Duplicates, report.Webhook.Duplicates)
			}
			if len(parked) != tt.wantParked {
				t.Fatalf("parked %d, want %d: %+v", len(parked), tt.wantParked, parked)
			}
			for _, p := range parked {
				if p.Reason != retry.ReasonPermanent || p.Retries != 0 || p.LastError == "" {
					t.Errorf("parked %+v: want a permanent failure after one attempt, with its error", p)
				}
				if got := len(report.Webhook.Attempts[p.ID]); got != 1 {
					t.Errorf("%s reached the receiver %d times, want once", p.ID, got)
				}
			}
			// The schedule's last delay repeats past its end.
			schedule := []time.Duration{200, 400, 800}
			for _, id := range ids {
				for ch, at := range map[string][]time.Time{"email": report.Email.Attempts[id], "webhook": report.Webhook.Attempts[id]} {
					for i := 1; i < len(at); i++ {
						gap, want := at[i].Sub(at[i-1]), schedule[min(i-1, len(schedule)-1)]*time.Millisecond
						if gap < want-20*time.Millisecond {
							t.Errorf("%s %s attempt %d came %s after the one before, want at least %s", ch, id, i+1, gap, want)
						}
					}
				}
			}
			t.Logf("email: %d attempts for %d; webhook: %d attempts, failures %v", report.Email.Received, n,
				report.Webhook.Received, report.Webhook.FailedByCode)
		})
	}
}

// TestPoisonMessagesParkOnce puts messages no worker can read straight into
// the queues: each is parked once with the reason, never looped.
func TestPoisonMessagesParkOnce(t *testing.T) {
	s := start(t, nil)
	ch, err := s.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	poison := []amqp.Publishing{
		{MessageId: "p-garbage", Body: []byte("\x00\xffnot json")},
		{MessageId: "p-version", Body: []byte(`{"v":9,"id":"p-version"}`), ContentType: "text/plain"},
		{MessageId: "p-headers", Body: []byte(`{"v":1}`), Headers: amqp.Table{retry.HeaderRetryCount: "lots", "x-death": "junk"}},
		{MessageId: "p-wrong-channel", Body: []byte(`{"v":1,"id":"p-wrong-channel","channel":"sms","email":{"to":["a@b.c"],"subject":"s","text":"t"}}`)},
	}
	for _, route := range s.topo.WorkRoutes() {
		for _, p := range poison {
			if err := ch.Publish("", route.Queue, false, false, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := len(s.topo.WorkRoutes()) * len(poison)
	retrytest.Eventually(t, 10*time.Second, func() bool { return len(s.parked(t)) >= want }, "poison not parked")
	// Parking is once per copy: give a wrongly retried copy time to show.
	retrytest.Eventually(t, 5*time.Second, func() bool {
		return depthOf(t, s, retry.ErrorQueue)+depthOf(t, s, retry.RequeueQueue) == 0
	}, "messages still moving through the pipeline")
	if got := len(s.parked(t)); got != want {
		t.Errorf("parked %d, want exactly %d", got, want)
	}
	for _, p := range s.parked(t) {
		if p.Reason != retry.ReasonPermanent || p.LastError == "" {
			t.Errorf("%s parked as %q (%q), want a permanent failure with its reason", p.ID, p.Reason, p.LastError)
		}
	}
}

func depthOf(t *testing.T, s *stack, base string) int {
	t.Helper()
	ch, err := s.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(s.topo.Name(base), true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// TestSMSChannel: the sms channel rides the same pipeline: transient
// failures are retried until delivered, permanent ones parked once.
func TestSMSChannel(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		wantParked int
	}{
		{"flaky gateway", map[string]string{"FLAKY_WEBHOOK_SCENARIO": "flaky", "FLAKY_RATE": "0.5", "RETRY_MAX": "8"}, 0},
		{"gateway refuses for good", map[string]string{"FLAKY_WEBHOOK_SCENARIO": "permanent", "SMS_PATH": "-fail"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, tt.env)
			pub, err := retry.NewPublisher(s.conn, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			const n = 3
			for i := range n {
				note := &notification.Notification{V: 1, ID: fmt.Sprintf("sms-%d", i), CreatedAt: time.Now().UTC(),
					Parts: map[string]json.RawMessage{"sms": json.RawMessage(`{"to":"+15551234567","text":"your code is 1234"}`)}}
				body, _ := json.Marshal(note.For(channel.SMS.Name()))
				if err := pub.Publish(context.Background(), s.topo.Ingress(), channel.SMS.Name(), amqp.Publishing{
					MessageId: note.ID, ContentType: notification.ContentType, DeliveryMode: amqp.Persistent, Body: body}); err != nil {
					t.Fatal(err)
				}
			}
			// The listing comes before the report (see
			// TestWorkersAgainstFlakyDownstreams).
			var report flaky.StatsReport
			var parked []retry.DeadLetter
			retrytest.Eventually(t, 20*time.Second, func() bool {
				parked = s.parked(t)
				report = s.flaky.Stats().Report()
				return report.Webhook.Accepted+len(parked) == n
			}, "not every sms ended delivered or parked")
			if got := len(parked); got != tt.wantParked {
				t.Errorf("parked %d, want %d", got, tt.wantParked)
			}
			if report.Webhook.Duplicates != 0 {
				t.Errorf("%d duplicates at the gateway", report.Webhook.Duplicates)
			}
			for _, p := range parked {
				if p.Reason != retry.ReasonPermanent || len(report.Webhook.Attempts[p.ID]) != 1 {
					t.Errorf("parked %+v after %d attempts, want permanent after one", p, len(report.Webhook.Attempts[p.ID]))
				}
			}
		})
	}
}
