//go:build integration

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/cmd/relay/dead"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

const deadLetterToken = "integration-token-0123456789"

// defaultWait bounds the wait for a message to be parked.
const defaultWait = 10 * time.Second

// park publishes a parked copy of id from the work queue named queue
// (without prefix) straight into p's dead-letter exchange.
func (p *apiProcess) park(t *testing.T, id, queue string, body []byte, contentType string) {
	t.Helper()
	p.parkFor(t, id, queue, "", body, contentType)
}

// parkFor is park for the copy of id for one recipient (x-recipient; none
// when empty).
func (p *apiProcess) parkFor(t *testing.T, id, queue, recipient string, body []byte, contentType string) {
	t.Helper()
	ch, err := p.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	h := amqp.Table{retry.HeaderDeadSource: p.topo.Name(queue), retry.HeaderDeadReason: retry.ReasonMaxRetries,
		retry.HeaderRetryCount: int32(5), retry.HeaderFirstFailedAt: "2026-01-02T03:04:05Z",
		retry.HeaderParkedAt: "2026-01-02T03:09:05Z", retry.HeaderLastError: "503 busy", "tenant": "acme"}
	if recipient != "" {
		h[notification.HeaderRecipient] = recipient
	}
	if err := ch.Publish(p.topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{
		MessageId: id, ContentType: contentType, Body: body, DeliveryMode: amqp.Persistent, Headers: h,
	}); err != nil {
		t.Fatal(err)
	}
}

// depth is how many messages queue (without prefix) holds.
func (p *apiProcess) depth(t *testing.T, queue string) int {
	t.Helper()
	ch, err := p.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(p.topo.Name(queue), true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// do sends a request with the default tenant's token and returns the
// status and body.
func (p *apiProcess) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	return p.doAs(t, deadLetterToken, method, path, body)
}

// doAs sends a request with token and returns the status and body.
func (p *apiProcess) doAs(t *testing.T, token, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, p.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// cli runs `relay dead` against p's API.
func (p *apiProcess) cli(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	env := map[string]string{"RELAY_API": p.base, "API_TOKENS": deadLetterToken}
	var out bytes.Buffer
	err := dead.Run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out)
	return out.String(), err
}

// TestDeadLetterRoutesOnTheBroker runs the dead-letter routes of the real
// `relay api` against parked messages on the broker: show, delete, purge
// and replay, and an unknown id on each.
func TestDeadLetterRoutesOnTheBroker(t *testing.T) {
	p := startAPI(t, deadLetterToken)
	p.park(t, "n1", "email-queue", []byte(`{"to":"ada@example.com"}`), "application/json")
	p.park(t, "n1", "webhook-queue", []byte{0xff, 0x00, 0x01}, "application/octet-stream")
	p.park(t, "n2", "email-queue", []byte(`{"to":"bob@example.com"}`), "application/json")
	p.park(t, "n3", "webhook-queue", nil, "")
	p.park(t, "n4", "email-queue", []byte(`{}`), "application/json")
	retrytest.Eventually(t, defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == 5 }, "not parked")

	// Show: both channel copies of n1, in full; the queue keeps them.
	code, body := p.do(t, http.MethodGet, "/v1/dead-letters/n1", "")
	var shown struct {
		ID          string                   `json:"id"`
		DeadLetters []retry.DeadLetterDetail `json:"dead_letters"`
	}
	if err := json.Unmarshal(body, &shown); code != http.StatusOK || err != nil || shown.ID != "n1" || len(shown.DeadLetters) != 2 {
		t.Fatalf("GET n1 = %d %s (%v)", code, body, err)
	}
	email, webhook := shown.DeadLetters[0], shown.DeadLetters[1]
	if string(email.Body) != `{"to":"ada@example.com"}` || email.Source != p.topo.Name("email-queue") || email.Retries != 5 ||
		email.LastError != "503 busy" || email.Headers["tenant"] != "acme" || email.FirstFailedAt.IsZero() {
		t.Errorf("email copy = %+v", email)
	}
	if webhook.BodyBase64 != "/wAB" || webhook.Body != nil || webhook.ContentType != "application/octet-stream" || webhook.Size != 3 {
		t.Errorf("webhook copy = %+v", webhook)
	}
	if code, body := p.do(t, http.MethodGet, "/v1/dead-letters/n1?source=webhook-queue", ""); code != http.StatusOK ||
		strings.Count(string(body), `"size":`) != 1 || !strings.Contains(string(body), `"body_base64":"/wAB"`) {
		t.Errorf("GET n1 from webhook-queue = %d %s", code, body)
	}
	if got := p.depth(t, retry.DeadQueue); got != 5 {
		t.Fatalf("after showing, %d parked; want all 5", got)
	}

	// An unknown id is a 404 on every route that takes one, and touches
	// nothing.
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/dead-letters/zzz", ""},
		{http.MethodGet, "/v1/dead-letters/n2?source=webhook-queue", ""},
		{http.MethodDelete, "/v1/dead-letters/zzz", ""},
		{http.MethodPost, "/v1/dead-letters/zzz/replay", ""},
		{http.MethodPost, "/v1/dead-letters/replay", `{"id":"zzz"}`},
		{http.MethodPost, "/v1/dead-letters/purge", `{"id":"zzz","confirm":true}`},
	} {
		code, body := p.do(t, r.method, r.path, r.body)
		if code != http.StatusNotFound || !strings.Contains(string(body), "not in the dead-letter queue") {
			t.Errorf("%s %s = %d %s, want 404", r.method, r.path, code, body)
		}
	}
	// Refusals touch nothing either.
	for _, r := range []struct {
		body, field string
	}{
		{`{"all":true}`, "confirm"},
		{`{"source":"email-queue","all":true,"confirm":true}`, "all"},
	} {
		code, body := p.do(t, http.MethodPost, "/v1/dead-letters/purge", r.body)
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"field":"`+r.field+`"`) {
			t.Errorf("purge %s = %d %s, want 422 naming %s", r.body, code, body, r.field)
		}
	}
	if got := p.depth(t, retry.DeadQueue); got != 5 {
		t.Fatalf("after the refusals, %d parked; want all 5", got)
	}

	// Delete one id: both its copies go, and then it is unknown.
	if code, body := p.do(t, http.MethodDelete, "/v1/dead-letters/n1", ""); code != http.StatusOK || string(body) != "{\"purged\":2}\n" {
		t.Errorf("DELETE n1 = %d %s", code, body)
	}
	if code, _ := p.do(t, http.MethodGet, "/v1/dead-letters/n1", ""); code != http.StatusNotFound {
		t.Errorf("GET n1 after its delete = %d, want 404", code)
	}
	// Purge by source.
	if code, body := p.do(t, http.MethodPost, "/v1/dead-letters/purge", `{"source":"webhook-queue","confirm":true}`); code != http.StatusOK ||
		string(body) != "{\"purged\":1}\n" {
		t.Errorf("purge webhook-queue = %d %s", code, body)
	}

	// Replay one: it goes back to its queue with a fresh count and its
	// history.
	if code, body := p.do(t, http.MethodPost, "/v1/dead-letters/n2/replay", ""); code != http.StatusOK || string(body) != "{\"replayed\":1}\n" {
		t.Fatalf("replay n2 = %d %s", code, body)
	}
	ch, err := p.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	d, ok, err := ch.Get(p.topo.Name("email-queue"), true /* autoAck */)
	if err != nil || !ok {
		t.Fatalf("email-queue is empty after the replay (%v)", err)
	}
	// A replay is ready from when it starts: its wait counts from then.
	if ms, ok := d.Headers[retry.HeaderReadyAt].(int64); !ok || time.Since(time.UnixMilli(ms)).Abs() > time.Minute {
		t.Errorf("replayed n2's %s = %v, want the replay's time", retry.HeaderReadyAt, d.Headers[retry.HeaderReadyAt])
	}
	delete(d.Headers, retry.HeaderReadyAt)
	want := amqp.Table{"tenant": "acme", retry.HeaderFirstFailedAt: "2026-01-02T03:04:05Z", retry.HeaderReplays: int32(1),
		retry.HeaderPriorRetries: int32(5), retry.HeaderPriorError: "503 busy"}
	if diff := cmp.Diff(want, d.Headers); d.MessageId != "n2" || diff != "" {
		t.Errorf("replayed %s, headers (-want +got):\n%s", d.MessageId, diff)
	}

	// Purge all: what is left (n4).
	if code, body := p.do(t, http.MethodPost, "/v1/dead-letters/purge", `{"all":true,"confirm":true}`); code != http.StatusOK ||
		string(body) != "{\"purged\":1}\n" {
		t.Errorf("purge all = %d %s", code, body)
	}
	if got := p.depth(t, retry.DeadQueue); got != 0 {
		t.Errorf("%d still parked", got)
	}
}

// TestDeadLettersSameOnBothSurfaces asks `relay dead` and the API the
// same questions about the same parked messages and wants the same
// answers: the listing with the default limit and with 0, a message in
// full, and an unknown id.
func TestDeadLettersSameOnBothSurfaces(t *testing.T) {
	p := startAPI(t, deadLetterToken)
	const parked = dead.DefaultLimit + 3 // more than a default page
	for i := range parked {
		p.park(t, "m"+string(rune('a'+i%26))+string(rune('a'+i/26)), "email-queue", []byte(`{"n":1}`), "application/json")
	}
	p.park(t, "bin", "webhook-queue", []byte("plain text"), "text/plain")
	retrytest.Eventually(t, defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == parked+1 }, "not parked")

	apiList := func(query string) []json.RawMessage {
		t.Helper()
		code, body := p.do(t, http.MethodGet, "/v1/dead-letters"+query, "")
		var got struct {
			DeadLetters []json.RawMessage `json:"dead_letters"`
		}
		if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil {
			t.Fatalf("GET %s = %d %s", query, code, body)
		}
		return got.DeadLetters
	}
	cliLines := func(args ...string) []json.RawMessage {
		t.Helper()
		out, err := p.cli(t, "", args...)
		if err != nil {
			t.Fatalf("relay dead %q: %v", args, err)
		}
		var lines []json.RawMessage
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			lines = append(lines, json.RawMessage(l))
		}
		return lines
	}
	same := func(name string, api, cli []json.RawMessage, wantLen int) {
		t.Helper()
		var a, c []any
		for _, m := range api {
			var v any
			_ = json.Unmarshal(m, &v)
			a = append(a, v)
		}
		for _, m := range cli {
			var v any
			_ = json.Unmarshal(m, &v)
			c = append(c, v)
		}
		if len(a) != wantLen {
			t.Errorf("%s: the API answered %d, want %d", name, len(a), wantLen)
		}
		if diff := cmp.Diff(a, c); diff != "" {
			t.Errorf("%s (-api +cli):\n%s", name, diff)
		}
	}
	same("default limit", apiList(""), cliLines("list", "--json"), dead.DefaultLimit)
	same("limit 0: every one", apiList("?limit=0"), cliLines("list", "--json", "--limit", "0"), parked+1)
	same("limit 2 by source", apiList("?limit=2&source=email-queue"), cliLines("list", "--json", "--limit", "2", "--source", "email-queue"), 2)

	code, body := p.do(t, http.MethodGet, "/v1/dead-letters/bin", "")
	var shown struct {
		DeadLetters []json.RawMessage `json:"dead_letters"`
	}
	if err := json.Unmarshal(body, &shown); code != http.StatusOK || err != nil {
		t.Fatalf("GET bin = %d %s", code, body)
	}
	same("show", shown.DeadLetters, cliLines("show", "bin", "--json"), 1)
	if !strings.Contains(string(shown.DeadLetters[0]), `"body_base64":"cGxhaW4gdGV4dA=="`) ||
		!strings.Contains(string(shown.DeadLetters[0]), `"content_type":"text/plain"`) {
		t.Errorf("a text body is not base64 with its content type: %s", shown.DeadLetters[0])
	}

	// An unknown id: a 404 from the API, an ErrNotParked (exit 1) from the
	// command, both naming the id.
	code, body = p.do(t, http.MethodGet, "/v1/dead-letters/zzz", "")
	_, err := p.cli(t, "", "show", "zzz")
	if code != http.StatusNotFound || !strings.Contains(string(body), `\"zzz\"`) || !errors.Is(err, retry.ErrNotParked) ||
		!strings.Contains(err.Error(), `"zzz"`) {
		t.Errorf("unknown id: API %d %s; CLI %v", code, body, err)
	}
}

// TestDeadLettersByRecipientOnTheBroker parks the two email copies of one
// notification, one per recipient, and a copy of another notification for
// one of them, then selects by recipient on the API and with `relay dead`:
// the same answers on both, and replaying or deleting one recipient's copy
// leaves the other parked.
func TestDeadLettersByRecipientOnTheBroker(t *testing.T) {
	p := startAPI(t, deadLetterToken)
	const typo, full = "typo@exmaple.com", "full@example.com"
	p.parkFor(t, "split", "email-queue", typo, []byte(`{"to":["typo@exmaple.com"]}`), "application/json")
	p.parkFor(t, "split", "email-queue", full, []byte(`{"to":["full@example.com"]}`), "application/json")
	p.parkFor(t, "other", "email-queue", typo, []byte(`{"to":["typo@exmaple.com"]}`), "application/json")
	retrytest.Eventually(t, defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == 3 }, "not parked")

	// list answers the copies, in queue order; cli answers them from
	// relay dead list --json.
	list := func(query string) []notification.DeadLetter {
		t.Helper()
		code, body := p.do(t, http.MethodGet, "/v1/dead-letters"+query, "")
		var got struct {
			DeadLetters []notification.DeadLetter `json:"dead_letters"`
		}
		if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil {
			t.Fatalf("GET /v1/dead-letters%s = %d %s", query, code, body)
		}
		return got.DeadLetters
	}
	cli := func(args ...string) []notification.DeadLetter {
		t.Helper()
		out, err := p.cli(t, "", append([]string{"list", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("relay dead list --json %q: %v", args, err)
		}
		var got []notification.DeadLetter
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var d notification.DeadLetter
			if err := json.Unmarshal([]byte(l), &d); err != nil {
				t.Fatalf("relay dead list --json: %q: %v", l, err)
			}
			got = append(got, d)
		}
		return got
	}
	type pick struct{ ID, Recipient string }
	picks := func(list []notification.DeadLetter) []pick {
		var out []pick
		for _, d := range list {
			out = append(out, pick{d.ID, d.Recipient})
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		query string
		args  []string
		want  []pick
	}{
		{"the id: both recipients' copies", "?id=split", []string{"--id", "split"}, []pick{{"split", typo}, {"split", full}}},
		{"the id and a recipient", "?id=split&recipient=" + typo, []string{"--id", "split", "--recipient", typo}, []pick{{"split", typo}}},
		{"a recipient alone: across notifications", "?recipient=" + typo, []string{"--recipient", typo}, []pick{{"split", typo}, {"other", typo}}},
		{"with the source too", "?source=email-queue&recipient=" + full, []string{"--source", "email-queue", "--recipient", full}, []pick{{"split", full}}},
	} {
		if diff := cmp.Diff(tt.want, picks(list(tt.query))); diff != "" {
			t.Errorf("%s: API (-want +got):\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(tt.want, picks(cli(tt.args...))); diff != "" {
			t.Errorf("%s: relay dead list (-want +got):\n%s", tt.name, diff)
		}
	}
	if code, body := p.do(t, http.MethodGet, "/v1/dead-letters/split?recipient="+full, ""); code != http.StatusOK ||
		strings.Count(string(body), `"size":`) != 1 || !strings.Contains(string(body), `"recipient":"full@example.com"`) {
		t.Errorf("GET split for %s = %d %s, want its copy alone", full, code, body)
	}
	// A recipient with nothing parked for the id: a 404 and an
	// ErrNotParked, both naming it, and nothing moves.
	code, body := p.do(t, http.MethodPost, "/v1/dead-letters/replay", `{"id":"split","recipient":"nobody@example.com"}`)
	_, err := p.cli(t, "", "replay", "--id", "split", "--recipient", "nobody@example.com")
	if code != http.StatusNotFound || !strings.Contains(string(body), `for \"nobody@example.com\"`) ||
		!errors.Is(err, retry.ErrNotParked) || !strings.Contains(err.Error(), `for "nobody@example.com"`) {
		t.Errorf("replay for nobody: API %d %s; CLI %v", code, body, err)
	}
	if got := p.depth(t, retry.DeadQueue); got != 3 {
		t.Fatalf("after the refusals, %d parked; want all 3", got)
	}

	// Replay the typo's copy of split: it alone goes back.
	if code, body := p.do(t, http.MethodPost, "/v1/dead-letters/replay", `{"id":"split","recipient":"`+typo+`"}`); code != http.StatusOK ||
		string(body) != "{\"replayed\":1}\n" {
		t.Fatalf("replay split for %s = %d %s", typo, code, body)
	}
	ch, err := p.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	d, ok, err := ch.Get(p.topo.Name("email-queue"), true /* autoAck */)
	if err != nil || !ok || d.MessageId != "split" || d.Headers[notification.HeaderRecipient] != typo {
		t.Fatalf("email-queue after the replay: %s for %q, %t, %v; want split for %s", d.MessageId, d.Headers[notification.HeaderRecipient], ok, err, typo)
	}
	if got := p.depth(t, "email-queue"); got != 0 {
		t.Errorf("email-queue holds %d more after replaying one recipient's copy", got)
	}
	if diff := cmp.Diff([]pick{{"split", full}, {"other", typo}}, picks(list("?limit=0"))); diff != "" {
		t.Errorf("still parked after the replay (-want +got):\n%s", diff)
	}

	// The command replays by recipient too.
	if out, err := p.cli(t, "", "replay", "--id", "other", "--recipient", typo); err != nil || !strings.Contains(out, "replayed 1 ") {
		t.Fatalf("relay dead replay --id other --recipient %s = %q, %v", typo, out, err)
	}
	// Delete full's copy by recipient: the queue is empty.
	if code, body := p.do(t, http.MethodDelete, "/v1/dead-letters/split?recipient="+full, ""); code != http.StatusOK ||
		string(body) != "{\"purged\":1}\n" {
		t.Errorf("DELETE split for %s = %d %s", full, code, body)
	}
	if got := p.depth(t, retry.DeadQueue); got != 0 {
		t.Errorf("%d still parked", got)
	}
}
