//go:build integration

package dead_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/internal/channel"
	"github.com/relay-demo/relay/services/internal/events"
	"github.com/relay-demo/relay/services/tools/dead"
)

func TestDeadCommands(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Routes: channel.Routes(), Backend: retry.TTL})
	t.Cleanup(func() { deleteEvents(t, topo) })
	env := map[string]string{"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": topo.Prefix, "DELAY_BACKEND": "ttl"}
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
			Headers: amqp.Table{retry.HeaderDeadSource: topo.Name("email-queue"), retry.HeaderDeadReason: "permanent",
				retry.HeaderLastError: "550 mailbox\nunavailable"}}); err != nil {
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

	if _, err := run("no\n", "purge", "--id", "one"); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("purge answered no = %v, want cancelled", err)
	}
	if out, err := run("yes\n", "purge", "--id", "one"); err != nil || !strings.Contains(out, "purged 1") {
		t.Errorf("purge answered yes = %q, %v", out, err)
	}
	if out, err := run("", "replay", "--all"); err != nil || !strings.Contains(out, "replayed 1") {
		t.Errorf("replay --all = %q, %v", out, err)
	}
	if got := func() int {
		q, err := ch.QueueDeclarePassive(topo.Name("email-queue"), true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return q.Messages
	}(); got != 1 {
		t.Errorf("email-queue holds %d after replay, want 1", got)
	}
}

// TestReplayRefusesForeignSources: a parked message whose x-dead-source
// names a queue that is not relay's (forged, or another application's) is
// never replayed there: the command fails naming the queue, by id and with
// --all, and the message stays parked.
func TestReplayRefusesForeignSources(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Routes: channel.Routes(), Backend: retry.TTL})
	t.Cleanup(func() { deleteEvents(t, topo) })
	env := map[string]string{"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": topo.Prefix, "DELAY_BACKEND": "ttl"}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	victim := topo.Prefix + "victim"
	if _, err := ch.QueueDeclare(victim, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	defer ch.QueueDelete(victim, false, false, false)
	if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{MessageId: "planted",
		Headers: amqp.Table{retry.HeaderDeadSource: victim, retry.HeaderDeadReason: "permanent"}}); err != nil {
		t.Fatal(err)
	}
	depth := func(q string) int {
		d, err := ch.QueueDeclarePassive(q, q != victim, q == victim, false, false, nil)
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

func TestDeadUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"bury"}, "unknown verb"},
		{[]string{"replay"}, "needs --id, --source or --all"},
		{[]string{"purge", "--yes"}, "needs --id, --source or --all"},
		{[]string{"list", "--limit", "-1"}, "--limit"},
		{[]string{"list", "extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			err := dead.Run(context.Background(), tt.args, func(string) string { return "" }, strings.NewReader(""), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run(%v) = %v, want %q", tt.args, err, tt.want)
			}
		})
	}
}

// deleteEvents removes the events exchange a replay declared.
func deleteEvents(t *testing.T, topo retry.Topology) {
	conn, err := retry.Dial(retrytest.URL(t), "relay test cleanup")
	if err != nil {
		return
	}
	defer conn.Close()
	if ch, err := conn.Channel(); err == nil {
		_ = ch.ExchangeDelete(events.ExchangeName(topo), false, false)
		ch.Close()
	}
}
