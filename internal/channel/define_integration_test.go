//go:build integration

package channel_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
)

// TestDefinedChannelEndToEnd runs a channel defined outside relay, added
// to relay's own in a Set, through the real API, retrier and worker: the API accepts and
// checks its part, the worker's first send fails and the pipeline retries
// it, and the history says delivered after two attempts.
func TestDefinedChannelEndToEnd(t *testing.T) {
	p := newProbe(1)
	channels := channel.Builtin().With(p.Channel)

	const token = "probe-token-0123456789abcdef"
	prefix := retrytest.Prefix(t)
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "200ms,400ms", "HTTP_ADDR": "127.0.0.1:0", "API_TOKENS": token, "DATA_DIR": t.TempDir(),
		"SHUTDOWN_TIMEOUT": "5s",
	}
	getenv := func(k string) string { return env[k] }
	topo := retry.Topology{Prefix: prefix, Routes: channels.Routes(), Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}}}
	conn := retrytest.Conn(t)
	t.Cleanup(func() {
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(topo.Name(events.HistoryQueue), false, false, false)
			_ = ch.ExchangeDelete(events.ExchangeName(topo), false, false)
			ch.Close()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var logs retrytest.Buffer
	run := func(name string, f func(context.Context, func(string) string, io.Writer) error) {
		wg.Go(func() {
			if err := f(ctx, getenv, &logs); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	run("api", func(ctx context.Context, getenv func(string) string, w io.Writer) error {
		return api.RunWith(ctx, channels, getenv, w)
	})
	run("retrier", func(ctx context.Context, getenv func(string) string, w io.Writer) error {
		return retrier.RunWith(ctx, channels, getenv, w)
	})
	run("worker probe", func(ctx context.Context, getenv func(string) string, w io.Writer) error {
		return worker.RunWith(ctx, channels, "probe", getenv, w)
	})

	listening := regexp.MustCompile(`"msg":"listening",.*?"addr":"([^"]+)"`)
	var base string
	retrytest.Eventually(t, 15*time.Second, func() bool {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			base = "http://" + m[1]
		}
		return base != ""
	}, "the API never listened")
	call := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	retrytest.Eventually(t, 15*time.Second, func() bool {
		code, _ := call(http.MethodGet, "/readyz", "")
		return code == http.StatusOK
	}, "/readyz never answered 200")

	code, body := call(http.MethodPost, "/v1/notifications", `{"probe":{"code":"12"}}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"probe.code"`) {
		t.Errorf("a short code: %d %s, want 422 naming probe.code", code, body)
	}
	code, body = call(http.MethodPost, "/v1/notifications", `{"probe":{"code":"1234"}}`)
	if code != http.StatusAccepted {
		t.Fatalf("a good probe: %d %s, want 202", code, body)
	}
	var accepted struct {
		ID       string   `json:"id"`
		Channels []string `json:"channels"`
	}
	if err := json.Unmarshal(body, &accepted); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(accepted.Channels, []string{"probe"}) {
		t.Errorf("channels %v, want [probe]", accepted.Channels)
	}

	var view struct {
		Recipients []string `json:"recipients"`
		Copies     []struct {
			Channel      string `json:"channel"`
			Status       string `json:"status"`
			AttemptCount int    `json:"attempt_count"`
		} `json:"copies"`
	}
	retrytest.Eventually(t, 20*time.Second, func() bool {
		code, body := call(http.MethodGet, "/v1/notifications/"+accepted.ID, "")
		if code != http.StatusOK || json.Unmarshal(body, &view) != nil {
			return false
		}
		return len(view.Copies) == 1 && view.Copies[0].Status == "delivered"
	}, "the probe copy was never delivered")
	if c := view.Copies[0]; c.Channel != "probe" || c.AttemptCount != 2 {
		t.Errorf("copy %+v, want the probe copy delivered at its second attempt", c)
	}
	if !slices.Equal(view.Recipients, []string{"probe:1234"}) {
		t.Errorf("recipients %v, want [probe:1234]", view.Recipients)
	}
	want := []string{accepted.ID + " 1234", accepted.ID + " 1234"}
	if got := p.calls(); !slices.Equal(got, want) {
		t.Errorf("sends %v, want %v: one failure, one retry", got, want)
	}
}
