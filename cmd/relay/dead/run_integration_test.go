//go:build integration

package dead_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/cmd/relay/dead"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/api"
)

func TestDeadCommands(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Routes: channel.Routes(), Backend: retry.TTL})
	env := serveAPI(t, conn, topo)
	run := func(stdin string, args ...string) (string, error) {
		var out bytes.Buffer
		err := dead.Run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out)
		return out.String(), err
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, id := range []string{"one", "two"} {
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{MessageId: id,
			ContentType: "application/json", Body: []byte(`{"to":"ada@example.com"}`),
			Headers: amqp.Table{retry.HeaderDeadSource: topo.Name("email-queue"), retry.HeaderDeadReason: "permanent",
				retry.HeaderLastError: "550 mailbox\nunavailable", retry.HeaderRetryCount: int32(3),
				retry.HeaderFirstFailedAt: "2026-01-02T03:04:05Z"}}); err != nil {
			t.Fatal(err)
		}
	}
	retrytest.Eventually(t, 5*time.Second, func() bool {
		out, err := run("", "list", "--json")
		return err == nil && strings.Count(out, "\n") == 2
	}, "two parked messages never listed")

	out, err := run("", "list", "--json", "--source", "email-queue", "--limit", "1")
	if err != nil {
		t.Fatal(err)
	}
	var p retry.DeadLetter
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.ID != "one" || p.Reason != "permanent" {
		t.Fatalf("list --json = %q (%v)", out, err)
	}
	out, err = run("", "list")
	if err != nil || !strings.Contains(out, "550 mailbox unavailable") || !strings.Contains(out, "LAST ERROR") {
		t.Errorf("list table = %q, %v", out, err)
	}

	// show: every header, the history and the body, in full.
	out, err = run("", "show", "one")
	for _, want := range []string{"id             one", "reason         permanent", "last error     550 mailbox\n               unavailable",
		"x-dead-source: " + topo.Name("email-queue"), `"to": "ada@example.com"`, "body (JSON, "} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("show one = %q, %v; want it to contain %q", out, err, want)
		}
	}
	out, err = run("", "show", "one", "--json")
	var shown retry.DeadLetterDetail
	if err := json.Unmarshal([]byte(out), &shown); err != nil || shown.ID != "one" || string(shown.Body) != `{"to":"ada@example.com"}` ||
		shown.ContentType != "application/json" || shown.Headers[retry.HeaderDeadReason] != "permanent" {
		t.Errorf("show --json = %q (%v)", out, err)
	}
	// An id that matches nothing is an error for show, replay and purge,
	// which touches nothing; a usage error dials nothing.
	for _, args := range [][]string{{"show", "zzz"}, {"show", "one", "--source", "webhook-queue"}, {"replay", "--id", "zzz"},
		{"purge", "--id", "zzz"}, {"purge", "--id", "zzz", "--yes"}} {
		out, err := run("yes\n", args...)
		if !errors.Is(err, retry.ErrNotParked) || !strings.Contains(err.Error(), "relay dead list shows what is parked") {
			t.Errorf("%q = %v, want ErrNotParked with a hint", args, err)
		}
		if strings.Contains(out, "Type yes") || strings.Contains(out, "replayed") || strings.Contains(out, "purged") {
			t.Errorf("%q printed %q", args, out)
		}
	}
	if _, err := run("yes\n", "purge", "--all", "--source", "email-queue", "--yes"); err == nil || !strings.Contains(err.Error(), "--all selects") {
		t.Errorf("purge --all --source = %v, want a usage error", err)
	}
	if got := depth(t, ch, topo.Name(retry.DeadQueue)); got != 2 {
		t.Fatalf("after the refused commands, %d parked; want both still there", got)
	}

	if _, err := run("no\n", "purge", "--id", "one"); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("purge answered no = %v, want cancelled", err)
	}
	if out, err := run("yes\n", "purge", "--id", "one"); err != nil || !strings.Contains(out, "purged 1") {
		t.Errorf("purge answered yes = %q, %v", out, err)
	}
	if out, err := run("", "replay", "--all"); err != nil || !strings.Contains(out, "replayed 1") {
		t.Errorf("replay --all = %q, %v", out, err)
	}
	d, ok, err := ch.Get(topo.Name("email-queue"), true /* autoAck */)
	if err != nil || !ok {
		t.Fatalf("email-queue holds nothing after replay (%v)", err)
	}
	// A replay starts a fresh count and keeps the history.
	if _, has := d.Headers[retry.HeaderRetryCount]; has || d.MessageId != "two" || d.Headers[retry.HeaderReplays] != int32(1) ||
		d.Headers[retry.HeaderFirstFailedAt] != "2026-01-02T03:04:05Z" || d.Headers[retry.HeaderPriorRetries] != int32(3) ||
		d.Headers[retry.HeaderPriorError] != "550 mailbox\nunavailable" {
		t.Errorf("replayed %s with headers %v", d.MessageId, d.Headers)
	}
}

// depth is how many messages queue holds.
func depth(t *testing.T, ch *amqp.Channel, queue string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// TestReplayRefusesForeignSources: a parked message whose x-dead-source
// names a queue that is not relay's (forged, or another application's) is
// never replayed there: the command fails naming the queue, by id and with
// --all, and the message stays parked.
func TestReplayRefusesForeignSources(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Routes: channel.Routes(), Backend: retry.TTL})
	env := serveAPI(t, conn, topo)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	victim := topo.Prefix + "victim"
	// Durable: RabbitMQ 4.3 refuses transient queues that are not exclusive.
	if _, err := ch.QueueDeclare(victim,
		true,  // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		nil); err != nil {
		t.Fatal(err)
	}
	defer ch.QueueDelete(victim, false, false, false)
	if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{MessageId: "planted",
		Headers: amqp.Table{retry.HeaderDeadSource: victim, retry.HeaderDeadReason: "permanent"}}); err != nil {
		t.Fatal(err)
	}
	depth := func(q string) int {
		d, err := ch.QueueDeclarePassive(q, true /* durable */, false /* autoDelete */, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return d.Messages
	}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(topo.Name(retry.DeadQueue)) == 1 }, "not parked")
	for _, args := range [][]string{{"replay", "--id", "planted"}, {"replay", "--all"}} {
		var out bytes.Buffer
		err := dead.Run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out)
		if err == nil || !strings.Contains(err.Error(), victim) {
			t.Errorf("%v = %v, want an error naming %s", args, err, victim)
		}
		if !strings.Contains(out.String(), "replayed 0") {
			t.Errorf("%v printed %q", args, out.String())
		}
	}
	if n := depth(victim); n != 0 {
		t.Errorf("the victim queue holds %d", n)
	}
	if n := depth(topo.Name(retry.DeadQueue)); n != 1 {
		t.Errorf("dead-letter-queue holds %d, want the planted message still parked", n)
	}
}

// serveAPI serves the API's dead-letter routes on topo's dead-letter
// queue, and returns the environment that points relay dead at them.
func serveAPI(t *testing.T, conn *amqp.Connection, topo retry.Topology) map[string]string {
	const token = "dead-letter-cli-token-0123456789"
	srv := httptest.NewServer(api.NewServer(api.Deps{Topology: topo, Tokens: []string{token},
		DeadLetters: func() api.DeadLetterStore { return retry.DeadLetters{Conn: conn, Topology: topo} }}))
	t.Cleanup(srv.Close)
	return map[string]string{"RELAY_API": srv.URL, "API_TOKENS": token}
}

// TestDeadNeedsTheAPI: without an API to call, relay dead says where it
// looked and how to point it elsewhere, and touches no broker.
func TestDeadNeedsTheAPI(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	var out bytes.Buffer
	err := dead.Run(context.Background(), []string{"list"}, func(k string) string { return map[string]string{"RELAY_API": url}[k] }, strings.NewReader(""), &out)
	if err == nil || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "--api") {
		t.Errorf("relay dead list with no API = %v; want an error naming %s and --api", err, url)
	}
}
