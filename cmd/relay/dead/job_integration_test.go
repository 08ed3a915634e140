//go:build integration

package dead_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/cmd/relay/dead"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/api"
)

// TestDeadJobCommands: relay dead replay --dry-run counts a filter's
// selection and touches nothing; --job replays it as a job and waits for
// its end; relay dead job shows the job.
func TestDeadJobCommands(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Routes: channel.Routes(), Backend: retry.TTL})
	const token = "dead-letter-cli-token-0123456789"
	jobs := &api.DeadLetterJobs{Store: storetest.Open(t, storetest.SQLite), Topology: topo, Owner: "test",
		Dial: func() (retry.DeadLetters, func(), error) {
			return retry.DeadLetters{Conn: conn, Topology: topo}, func() {}, nil
		}}
	srv := httptest.NewServer(api.NewServer(api.Deps{Topology: topo, Tokens: []string{token}, DeadLetterJobs: jobs,
		DeadLetters: func() api.DeadLetterStore { return retry.DeadLetters{Conn: conn, Topology: topo} }}))
	defer srv.Close()
	env := map[string]string{"RELAY_API": srv.URL, "API_TOKENS": token}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := dead.Run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out)
		return out.String(), err
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for i := range 40 {
		reason := retry.ReasonPermanent
		if i%2 == 1 {
			reason = retry.ReasonMaxRetries
		}
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{MessageId: fmt.Sprintf("m%02d", i),
			Headers: amqp.Table{retry.HeaderDeadSource: topo.Name("email-queue"), retry.HeaderDeadReason: reason}}); err != nil {
			t.Fatal(err)
		}
	}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, ch, topo.Name(retry.DeadQueue)) == 40 }, "not parked")

	if out, err := run("replay", "--reason", "permanent", "--channel", "email", "--dry-run"); err != nil ||
		out != "20 parked message(s) match; dry run: nothing was replayed\n" {
		t.Errorf("replay --dry-run = %q, %v", out, err)
	}
	if _, err := run("replay", "--reason", "bored", "--dry-run"); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Errorf("replay --reason bored = %v, want the API's 422 naming reason", err)
	}
	out, err := run("replay", "--reason", "permanent", "--job")
	m := regexp.MustCompile(`^job (job_\w+) done: replayed 20 of 20 matched message\(s\), 0 left parked\n$`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("replay --job = %q, %v", out, err)
	}
	if got := depth(t, ch, topo.Name("email-queue")); got != 20 {
		t.Errorf("email-queue holds %d, want the 20 replayed", got)
	}
	if got := depth(t, ch, topo.Name(retry.DeadQueue)); got != 20 {
		t.Errorf("%d parked, want the 20 max-retries ones", got)
	}
	if out, err := run("job", m[1]); err != nil || !strings.Contains(out, "state       done") || !strings.Contains(out, `{"reason":"permanent"}`) {
		t.Errorf("job %s = %q, %v", m[1], out, err)
	}
	if _, err := run("job", "job_nope"); err == nil {
		t.Error("job job_nope: no error")
	}
	if _, err := run("job", m[1], "--cancel"); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("job %s --cancel of a job that ended = %v, want the API's 409", m[1], err)
	}
}
