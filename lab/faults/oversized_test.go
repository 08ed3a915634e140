//go:build faults

package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// oversizedBound is how long a normal message behind the oversized ones
// may take to be delivered: docs/guarantees.md promises the next message within
// seconds, and a stalled queue takes minutes.
const oversizedBound = 30 * time.Second

// TestOversizedHeadersInAWorkQueue puts five messages whose headers are
// far over the AMQP frame straight into webhook-queue through the
// management API, then sends a normal notification through the API. Each
// oversized message closes the connection it is delivered to, often
// without the frame error reaching the consumer; the quarantine must
// still find them one after the other, park each once as
// headers-too-large, and let the normal webhook through within
// oversizedBound. The broker is never stopped or restarted.
func TestOversizedHeadersInAWorkQueue(t *testing.T) {
	o := defaults()
	o.emailScenario, o.webhookScenario = flaky.Healthy, flaky.Healthy
	// relay's default queue type: a classic queue returns the culprit to
	// its head forever, where a quorum queue's delivery limit would
	// dead-letter it after a while.
	o.queueType = "classic"
	r := newRig(t, o)
	mgmt := retrytest.Management(t)
	if v := os.Getenv("MANAGEMENT_URL"); v != "" {
		// A broker whose management API is not where relay derives it.
		r.env["MANAGEMENT_URL"] = v
	}
	r.startInProcess(r.env)

	const n, size = 5, 300_000
	queue := r.prefix + "webhook-queue"
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("oversized-%d", i)
		retrytest.PublishHTTP(t, mgmt, queue, ids[i], map[string]any{"x-padding": strings.Repeat("p", size)},
			string(r.unreachableWebhook(ids[i])))
	}

	start := time.Now()
	body := fmt.Sprintf(`{"webhook":{"url":%q,"payload":{"behind":"oversized"}}}`, r.hook)
	req, _ := http.NewRequest(http.MethodPost, r.api+"/v1/notifications", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: clientTimeout}).Do(req)
	if err != nil {
		t.Fatalf("post the normal notification: %v", err)
	}
	var res struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || res.ID == "" {
		t.Fatalf("post the normal notification: %s", resp.Status)
	}
	delivered := poll(oversizedBound, 100*time.Millisecond, func() bool {
		got, _, err := r.delivered()
		return err == nil && got[copyKey{res.ID, "webhook"}]
	})
	took := time.Since(start)

	var parked map[string][]retry.DeadLetter
	poll(oversizedBound, 500*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := r.parked(ctx)
		if err != nil {
			return false
		}
		parked = map[string][]retry.DeadLetter{}
		for _, p := range list {
			parked[p.ID] = append(parked[p.ID], p)
		}
		for _, id := range ids {
			if len(parked[id]) == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("published %d messages with %d-byte headers, then a normal webhook: delivered %t after %s; parked %d of %d",
		n, size, delivered, took.Round(time.Millisecond), len(parked), n)
	if !delivered {
		depths, _ := queueDepths(r.prefix)
		t.Errorf("the normal webhook behind %d oversized messages was not delivered within %s: queues %v", n, oversizedBound, depths)
	}
	for _, id := range ids {
		ps := parked[id]
		if len(ps) != 1 {
			t.Errorf("%s parked %d times, want once", id, len(ps))
			continue
		}
		if ps[0].Reason != retry.ReasonTooLarge || ps[0].Source != queue {
			t.Errorf("%s parked as %s from %s, want %s from %s", id, ps[0].Reason, ps[0].Source, retry.ReasonTooLarge, queue)
		}
	}
}
