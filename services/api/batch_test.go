package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/retry"
)

// countingIDs makes NewID give ntf_1, ntf_2, ... in order.
func countingIDs(d *Deps) {
	var n atomic.Int64
	d.NewID = func() string { return fmt.Sprintf("ntf_%d", n.Add(1)) }
}

// batchOf is a batch request of items.
func batchOf(items ...string) string {
	return `{"notifications":[` + strings.Join(items, ",") + `]}`
}

// repeat is n copies of item.
func repeat(item string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = item
	}
	return out
}

// batchItem is one result of a batch answer as a client reads it.
type batchItem struct {
	ID       string   `json:"id"`
	Channels []string `json:"channels"`
	problemBody
}

// summary is a result in one line: "ntf_1 email,webhook" for an accepted
// item, "422 invalid-fields" for a refused one.
func (b batchItem) summary() string {
	if b.ID != "" {
		return b.ID + " " + strings.Join(b.Channels, ",")
	}
	return fmt.Sprintf("%d %s", b.Status, strings.TrimPrefix(b.Type, ProblemBase))
}

const (
	emailOnly   = `{` + emailPart + `}`
	webhookOnly = `{` + webhookPart + `}`
	badEmail    = `{"email":{"to":["ada"],"subject":"Hi","text":"hello"}}`
)

func TestBatch(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		headers map[string]string
		change  func(*Deps, *fakePublisher)

		status  int
		results []string // each item's summary, in request order
		typ     string   // the problem type when the batch is refused whole
		detail  string   // a part of that problem's detail
	}{
		{name: "every item valid", body: batchOf(bothParts, emailOnly, webhookOnly), status: 202,
			results: []string{"ntf_1 email,webhook", "ntf_2 email", "ntf_3 webhook"}},
		{name: "valid and invalid mixed", body: batchOf(emailOnly, badEmail, `{"id":"mine",`+emailPart+`}`, `null`, `{}`, `[]`, webhookOnly), status: 207,
			results: []string{"ntf_1 email", "422 invalid-fields", "400 unknown-field", "422 invalid-fields", "422 invalid-fields", "400 malformed-json", "ntf_2 webhook"}},
		{name: "wrong type in an item", body: batchOf(`{"email":{"to":"ada@example.com","subject":"Hi","text":"x"}}`, emailOnly), status: 207,
			results: []string{"400 malformed-json", "ntf_1 email"}},
		{name: "none valid", body: batchOf(badEmail, `{}`), status: 422, typ: ProblemInvalidBatch, detail: "none of the 2",
			results: []string{"422 invalid-fields", "422 invalid-fields"}},
		{name: "empty list", body: batchOf(), status: 422, typ: ProblemInvalidBatch, detail: "1 to 500 notifications, this one none"},
		{name: "no list", body: `{}`, status: 422, typ: ProblemInvalidBatch, detail: "1 to 500"},
		{name: "null list", body: `{"notifications":null}`, status: 422, typ: ProblemInvalidBatch, detail: "1 to 500"},
		{name: "at the limit", body: batchOf(repeat(emailOnly, 3)...), change: func(d *Deps, _ *fakePublisher) { d.MaxBatch = 3 }, status: 202,
			results: []string{"ntf_1 email", "ntf_2 email", "ntf_3 email"}},
		{name: "limit exceeded", body: batchOf(repeat(emailOnly, 4)...), change: func(d *Deps, _ *fakePublisher) { d.MaxBatch = 3 },
			status: 422, typ: ProblemInvalidBatch, detail: "1 to 3 notifications, this one 4"},
		{name: "default limit exceeded", body: batchOf(repeat(emailOnly, 501)...), change: func(d *Deps, _ *fakePublisher) { d.MaxBody = 1 << 22 },
			status: 422, typ: ProblemInvalidBatch, detail: "1 to 500 notifications, this one 501"},
		{name: "a notification, not a batch", body: bothParts, status: 400, typ: ProblemUnknownField, detail: `a batch holds only "notifications"`},
		{name: "list not an array", body: `{"notifications":{}}`, status: 400, typ: ProblemMalformedJSON, detail: `"notifications"`},
		{name: "truncated", body: `{"notifications":[` + emailOnly, status: 400, typ: ProblemMalformedJSON, detail: "ends in the middle"},
		{name: "trailing data", body: batchOf(emailOnly) + `{}`, status: 400, typ: ProblemMalformedJSON, detail: "after the JSON object"},
		{name: "empty body", body: ``, status: 400, typ: ProblemMalformedJSON, detail: "empty"},
		{name: "Idempotency-Key refused", body: batchOf(emailOnly), headers: map[string]string{"Idempotency-Key": "order-42"},
			status: 400, typ: ProblemInvalidHeader, detail: "not supported on POST /v1/notifications/batch"},
		{name: "body over the limit", body: batchOf(repeat(emailOnly, 3)...), change: func(d *Deps, _ *fakePublisher) { d.MaxBody = 100 },
			status: 413, typ: ProblemBodyTooLarge, detail: "100 bytes"},
		{name: "chunked body over the limit", body: batchOf(repeat(emailOnly, 3)...), headers: map[string]string{"Transfer-Encoding": "chunked"},
			change: func(d *Deps, _ *fakePublisher) { d.MaxBody = 100 }, status: 413, typ: ProblemBodyTooLarge},
		{name: "text content type", body: batchOf(emailOnly), headers: map[string]string{"Content-Type": "text/plain"}, status: 415, typ: ProblemUnsupportedMediaType},
		{name: "no token", body: batchOf(emailOnly), headers: map[string]string{"Authorization": ""}, status: 401, typ: ProblemUnauthorized},
		{name: "no publisher", body: batchOf(emailOnly, badEmail), change: func(d *Deps, _ *fakePublisher) { d.Publisher = func() Publisher { return nil } },
			status: 503, typ: ProblemBrokerUnavailable, detail: "not connected"},
		{name: "some confirms fail", body: batchOf(bothParts, emailOnly, badEmail, webhookOnly, emailOnly), change: func(_ *Deps, f *fakePublisher) {
			f.errForID = map[string]error{"ntf_2": retry.ErrNacked, "ntf_3.accepted": retry.ErrUnroutable}
		}, status: 207, results: []string{"ntf_1 email,webhook", "503 broker-unavailable", "422 invalid-fields", "503 broker-unavailable", "ntf_4 email"}},
		{name: "one channel of an item fails", body: batchOf(bothParts, emailOnly), change: func(_ *Deps, f *fakePublisher) {
			f.errFor = map[string]error{"webhook": retry.ErrClosed}
		}, status: 207, results: []string{"503 broker-unavailable", "ntf_2 email"}},
		{name: "every confirm fails", body: batchOf(emailOnly, webhookOnly), change: func(_ *Deps, f *fakePublisher) { f.err = retry.ErrNacked },
			status: 207, results: []string{"503 broker-unavailable", "503 broker-unavailable"}},
		{name: "no confirm in time", body: batchOf(emailOnly, webhookOnly), change: func(d *Deps, f *fakePublisher) { f.block, d.PublishTimeout = true, 20*time.Millisecond },
			status: 207, results: []string{"503 broker-unavailable", "503 broker-unavailable"}},
		{name: "publisher panics", body: batchOf(emailOnly), change: func(_ *Deps, f *fakePublisher) { f.panics = true },
			status: 207, results: []string{"500 internal-error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fake, _ := testServer(t, func(d *Deps, f *fakePublisher) {
				countingIDs(d)
				if tt.change != nil {
					tt.change(d, f)
				}
			})
			rec := call(h, http.MethodPost, "/v1/notifications/batch", tt.body, tt.headers)
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d; body: %s", rec.Code, tt.status, rec.Body)
			}
			var got struct {
				problemBody
				Results []batchItem `json:"results"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body is not JSON: %v: %s", err, rec.Body)
			}
			wantCT := "application/json"
			if tt.typ != "" {
				wantCT = ProblemContentType
				if got.Type != tt.typ || got.Status != tt.status || !strings.Contains(got.Detail, tt.detail) {
					t.Errorf("problem = %+v, want type %s, status %d, detail with %q", got.problemBody, tt.typ, tt.status, tt.detail)
				}
				if tt.typ == ProblemInvalidBatch && (len(got.Errors) != 1 || got.Errors[0].Field != "notifications") {
					t.Errorf("errors = %+v, want one naming notifications", got.Errors)
				}
			}
			if ct := rec.Header().Get("Content-Type"); ct != wantCT {
				t.Errorf("Content-Type = %q, want %q", ct, wantCT)
			}
			var results []string
			for _, r := range got.Results {
				results = append(results, r.summary())
				if r.ID == "" && (r.Title == "" || r.Detail == "") {
					t.Errorf("refused item without a title or detail: %+v", r)
				}
				if r.Type == ProblemInvalidFields && len(r.Errors) == 0 {
					t.Errorf("invalid-fields item without errors: %+v", r)
				}
			}
			if diff := cmp.Diff(tt.results, results); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}

			// Every copy is published once at most, and every accepted
			// item's copies and record were confirmed.
			seen := map[string]int{}
			fake.mu.Lock()
			for _, p := range fake.tried {
				seen[p.Msg.MessageId+" "+p.Key]++
			}
			fake.mu.Unlock()
			for k, n := range seen {
				if n > 1 {
					t.Errorf("%s published %d times", k, n)
				}
			}
			sent := map[string]bool{}
			for _, p := range fake.messages() {
				sent[p.Msg.MessageId+" "+p.Key] = true
			}
			records := map[string]bool{}
			for _, r := range fake.records() {
				records[r.ID] = true
			}
			accepted := 0
			for _, r := range got.Results {
				if r.ID == "" {
					continue
				}
				accepted++
				for _, ch := range r.Channels {
					if !sent[r.ID+" "+ch] {
						t.Errorf("accepted %s has no confirmed %s copy", r.ID, ch)
					}
				}
				if !records[r.ID] {
					t.Errorf("accepted %s has no accepted record", r.ID)
				}
			}
			if tt.status >= 400 && len(seen) > 0 {
				t.Errorf("a refused batch published %d message(s)", len(seen))
			}
		})
	}
}

// TestBatchItemAsSingle checks that an item of a batch is published
// exactly as the same notification sent alone: the same copies, message
// properties and accepted record.
func TestBatchItemAsSingle(t *testing.T) {
	single, one, _ := testServer(t, nil)
	if rec := call(single, http.MethodPost, "/v1/notifications", bothParts, nil); rec.Code != http.StatusAccepted {
		t.Fatalf("single: status = %d; body: %s", rec.Code, rec.Body)
	}
	batch, many, _ := testServer(t, nil)
	if rec := call(batch, http.MethodPost, "/v1/notifications/batch", batchOf(bothParts), nil); rec.Code != http.StatusAccepted {
		t.Fatalf("batch: status = %d; body: %s", rec.Code, rec.Body)
	}
	if diff := cmp.Diff(one.messages(), many.messages()); diff != "" {
		t.Errorf("copies (-single +batch):\n%s", diff)
	}
	if diff := cmp.Diff(one.records(), many.records()); diff != "" {
		t.Errorf("accepted records (-single +batch):\n%s", diff)
	}
	for _, m := range many.messages() {
		if m.Msg.DeliveryMode != amqp.Persistent || m.Msg.MessageId != fixed || m.Msg.AppId != AppID {
			t.Errorf("%s copy: %+v", m.Key, m.Msg)
		}
	}
}

// gatePublisher lets no publish through before want of them are waiting:
// it proves the batch's publishes are in flight together, where one
// round trip per item would wait out the publish timeout.
type gatePublisher struct {
	fakePublisher
	want int

	mu      sync.Mutex
	waiting int
	open    chan struct{}
}

func (g *gatePublisher) Publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	g.mu.Lock()
	if g.waiting++; g.waiting == g.want {
		close(g.open)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.fakePublisher.Publish(ctx, exchange, key, msg)
}

// PublishAll publishes msgs all at once, each through the gate.
func (g *gatePublisher) PublishAll(ctx context.Context, msgs []retry.Outgoing) []error {
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Go(func() { errs[i] = g.Publish(ctx, m.Exchange, m.Key, m.Msg) })
	}
	wg.Wait()
	return errs
}

func TestBatchWaitsOnce(t *testing.T) {
	const items = 100
	// Each item: an email and a webhook copy, and its accepted record.
	gate := &gatePublisher{want: items * 3, open: make(chan struct{})}
	h, _, logs := testServer(t, func(d *Deps, _ *fakePublisher) {
		countingIDs(d)
		d.Publisher = func() Publisher { return gate }
		d.PublishTimeout = 5 * time.Second
	})
	rec := call(h, http.MethodPost, "/v1/notifications/batch", batchOf(repeat(bothParts, items)...), nil)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("status = %d, want 202; body: %.500s", rec.Code, rec.Body)
	}
	var results struct {
		Results []batchItem `json:"results"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &results); err != nil {
		t.Fatal(err)
	}
	for i, r := range results.Results {
		if want := fmt.Sprintf("ntf_%d", i+1); r.ID != want {
			t.Errorf("result %d has id %q, want %s (request order)", i, r.ID, want)
		}
	}
	if n := len(gate.messages()); n != items*2 {
		t.Errorf("%d copies published, want %d", n, items*2)
	}
	if n := len(gate.records()); n != items {
		t.Errorf("%d accepted records, want %d", n, items)
	}
	for _, want := range []string{`"msg":"notification accepted","id":"ntf_100"`, `"msg":"batch answered","status":202,"items":100,"accepted":100`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s", want)
		}
	}
}

func TestBatchMetrics(t *testing.T) {
	h, _, _ := testServer(t, func(d *Deps, f *fakePublisher) {
		countingIDs(d)
		f.errForID = map[string]error{"ntf_2": retry.ErrNacked}
	})
	call(h, http.MethodPost, "/v1/notifications/batch", batchOf(bothParts, emailOnly, badEmail), nil)
	call(h, http.MethodPost, "/v1/notifications/batch", batchOf(badEmail), nil)
	text := call(h, http.MethodGet, "/metrics", "", nil).Body.String()
	for _, want := range []string{
		`relay_http_requests_total{code="207",method="POST",route="/v1/notifications/batch"} 1`,
		`relay_http_requests_total{code="422",method="POST",route="/v1/notifications/batch"} 1`,
		`relay_publishes_total{channel="email",result="ok"} 1`,
		`relay_publishes_total{channel="email",result="nacked"} 1`,
		`relay_publishes_total{channel="webhook",result="ok"} 1`,
		`relay_publish_confirm_seconds_count 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// FuzzDecodeBatch checks that the batch decoder never panics and that
// every body ends as a list of items or as a client error.
func FuzzDecodeBatch(f *testing.F) {
	for _, seed := range []string{batchOf(bothParts), batchOf(), `{}`, `[]`, `{"notifications":[1,"x",null]}`, `{"notifications":`, bothParts} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := decodeBatch(strings.NewReader(string(body)), 3)
		if (items == nil) == (err == nil) {
			t.Fatalf("decodeBatch = %v, %v: want exactly one of them", items, err)
		}
		if err != nil {
			p := asProblem(err)
			if p.Status != http.StatusBadRequest && p.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d for %q", p.Status, body)
			}
			return
		}
		if len(items) < 1 || len(items) > 3 {
			t.Fatalf("%d items", len(items))
		}
		for _, raw := range items {
			if _, err := newRequest(channel.Builtin()).decodeRequest(strings.NewReader(string(raw))); err != nil {
				if s := asProblem(err).Status; s != http.StatusBadRequest && s != http.StatusUnprocessableEntity {
					t.Fatalf("item status %d for %q", s, raw)
				}
			}
		}
	})
}
