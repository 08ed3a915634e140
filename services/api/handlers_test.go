package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/dashboard"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

const (
	tokenA = "token-a-0123456789abcdef"
	tokenB = "token-b-0123456789abcdef"
	fixed  = "ntf_fixedfixedfixedfixedfixed"
)

var now = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// published is one message a fakePublisher took.
type published struct {
	Exchange, Key string
	Msg           amqp.Publishing
}

// fakePublisher records what it publishes and fails as told: err for
// every publish, errFor[key] for one routing key, or errForID[id] for one
// message id. block makes every publish wait for its context; panics makes
// it panic. tried records every publish, failed or not.
type fakePublisher struct {
	err      error
	errFor   map[string]error
	errForID map[string]error
	block    bool
	panics   bool

	mu    sync.Mutex
	sent  []published
	tried []published
}

func (f *fakePublisher) Publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	f.mu.Lock()
	f.tried = append(f.tried, published{Exchange: exchange, Key: key, Msg: msg})
	f.mu.Unlock()
	if f.panics {
		panic("publisher exploded")
	}
	if f.block {
		<-ctx.Done()
		return fmt.Errorf("wait for confirm from exchange %q: %w", exchange, ctx.Err())
	}
	err := f.err
	if e, ok := f.errFor[key]; ok {
		err = e
	}
	if e, ok := f.errForID[msg.MessageId]; ok {
		err = e
	}
	if err != nil {
		return fmt.Errorf("publish to exchange %q key %q: %w", exchange, key, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, published{Exchange: exchange, Key: key, Msg: msg})
	return nil
}

// PublishAll publishes msgs one after the other, each as Publish does.
func (f *fakePublisher) PublishAll(ctx context.Context, msgs []retry.Outgoing) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		errs[i] = f.Publish(ctx, m.Exchange, m.Key, m.Msg)
	}
	return errs
}

// User is the broker user it publishes as: none.
func (f *fakePublisher) User() string { return "" }

// messages returns the channel copies published, ordered by routing key.
func (f *fakePublisher) messages() []published {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []published
	for _, p := range f.sent {
		if p.Exchange != "t.notification-events" {
			out = append(out, p)
		}
	}
	// Copies of one channel go out at once: their recipients order them.
	recipient := func(p published) string { s, _ := p.Msg.Headers["x-recipient"].(string); return s }
	slices.SortStableFunc(out, func(a, b published) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(recipient(a), recipient(b))
	})
	return out
}

// records returns the accepted records published to the events exchange.
func (f *fakePublisher) records() []notification.Accepted {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []notification.Accepted
	for _, p := range f.sent {
		if p.Exchange == "t.notification-events" {
			var a notification.Accepted
			_ = json.Unmarshal(p.Msg.Body, &a)
			out = append(out, a)
		}
	}
	return out
}

// testServer is the API with a fake publisher and a fixed clock and id,
// changed by change.
func testServer(t *testing.T, change func(*Deps, *fakePublisher)) (http.Handler, *fakePublisher, *bytes.Buffer) {
	t.Helper()
	fake := &fakePublisher{}
	var logs bytes.Buffer
	deps := Deps{
		Log:       slog.New(slog.NewJSONHandler(&logs, nil)),
		Publisher: func() Publisher { return fake },
		Topology:  retry.Topology{Prefix: "t."},
		Tokens:    []string{tokenA, tokenB},
		Now:       func() time.Time { return now },
		NewID:     func() string { return fixed },
	}
	if change != nil {
		change(&deps, fake)
	}
	return NewServer(deps), fake, &logs
}

const (
	emailPart   = `"email":{"to":["ada@example.com"],"subject":"Hi","text":"hello"}`
	webhookPart = `"webhook":{"url":"https://example.com/hook","payload":{"a":1}}`
	bothParts   = `{` + emailPart + `,` + webhookPart + `}`
)

// call sends one request to h. headers of nil mean a JSON body with
// tokenA; a header set to "" is left out.
func call(h http.Handler, method, path, body string, headers map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tokenA)
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	if headers["Transfer-Encoding"] == "chunked" {
		req.ContentLength = -1
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// problemBody is a Problem as a client reads it.
type problemBody struct {
	Type   string                    `json:"type"`
	Title  string                    `json:"title"`
	Status int                       `json:"status"`
	Detail string                    `json:"detail"`
	Errors []notification.FieldError `json:"errors"`
}

func TestProblems(t *testing.T) {
	tooBig := `{"email":{"to":["ada@example.com"],"subject":"Hi","text":"` + strings.Repeat("x", 200) + `"}}`
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		headers map[string]string
		change  func(*Deps, *fakePublisher)

		status     int
		typ        string
		detail     string            // a part of the detail
		fields     []string          // the invalid fields of a 422
		wantHeader map[string]string // headers the answer must have
	}{
		{name: "truncated JSON", body: `{"email":`, status: 400, typ: ProblemMalformedJSON, detail: "ends in the middle"},
		{name: "syntax error", body: `{"email" 1}`, status: 400, typ: ProblemMalformedJSON, detail: "byte offset 10"},
		{name: "empty body", body: ``, status: 400, typ: ProblemMalformedJSON, detail: "empty"},
		{name: "array body", body: `[]`, status: 400, typ: ProblemMalformedJSON, detail: "want a JSON object"},
		{name: "wrong type", body: `{"email":{"to":"ada@example.com","subject":"Hi","text":"x"}}`, status: 400, typ: ProblemMalformedJSON, detail: `"email.to"`},
		{name: "unknown field", body: `{"id":"mine",` + emailPart + `}`, status: 400, typ: ProblemUnknownField, detail: `"id"`},
		{name: "unknown nested field", body: `{"email":{"to":["ada@example.com"],"subject":"Hi","text":"x","cc":[]}}`, status: 400, typ: ProblemUnknownField, detail: `"cc"`},
		{name: "trailing data", body: bothParts + ` {}`, status: 400, typ: ProblemMalformedJSON, detail: "after the JSON object"},
		{name: "trailing garbage", body: bothParts + `x`, status: 400, typ: ProblemMalformedJSON, detail: "after the JSON object"},
		{name: "empty idempotency key", body: bothParts, headers: map[string]string{"Idempotency-Key": " "}, status: 400, typ: ProblemInvalidHeader},
		{name: "long idempotency key", body: bothParts, headers: map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, status: 400, typ: ProblemInvalidHeader, detail: "255"},
		{name: "non-ASCII idempotency key", body: bothParts, headers: map[string]string{"Idempotency-Key": "clé"}, status: 400, typ: ProblemInvalidHeader},
		{name: "control character in idempotency key", body: bothParts, headers: map[string]string{"Idempotency-Key": "a\x01b"}, status: 400, typ: ProblemInvalidHeader},
		{name: "no token", body: bothParts, headers: map[string]string{"Authorization": ""}, status: 401, typ: ProblemUnauthorized,
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="relay"`}},
		{name: "wrong token", body: bothParts, headers: map[string]string{"Authorization": "Bearer token-c-0123456789abcdef"}, status: 401, typ: ProblemUnauthorized,
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="relay", error="invalid_token"`}},
		{name: "token prefix", body: bothParts, headers: map[string]string{"Authorization": "Bearer " + tokenA[:16]}, status: 401, typ: ProblemUnauthorized},
		{name: "basic auth", body: bothParts, headers: map[string]string{"Authorization": "Basic " + tokenA}, status: 401, typ: ProblemUnauthorized},
		{name: "no tokens configured", body: bothParts, change: func(d *Deps, _ *fakePublisher) { d.Tokens = nil }, status: 401, typ: ProblemUnauthorized},
		{name: "body over the limit", body: tooBig, change: func(d *Deps, _ *fakePublisher) { d.MaxBody = 64 }, status: 413, typ: ProblemBodyTooLarge, detail: "64 bytes"},
		{name: "chunked body over the limit", body: tooBig, headers: map[string]string{"Transfer-Encoding": "chunked"},
			change: func(d *Deps, _ *fakePublisher) { d.MaxBody = 64 }, status: 413, typ: ProblemBodyTooLarge},
		{name: "no content type", body: bothParts, headers: map[string]string{"Content-Type": ""}, status: 415, typ: ProblemUnsupportedMediaType},
		{name: "text content type", body: bothParts, headers: map[string]string{"Content-Type": "text/plain"}, status: 415, typ: ProblemUnsupportedMediaType},
		{name: "latin-1 charset", body: bothParts, headers: map[string]string{"Content-Type": "application/json; charset=latin1"}, status: 415, typ: ProblemUnsupportedMediaType},
		{name: "no parts", body: `{}`, status: 422, typ: ProblemInvalidFields, fields: []string{""}},
		{name: "null", body: `null`, status: 422, typ: ProblemInvalidFields, fields: []string{""}},
		{name: "every field wrong",
			body:   `{"email":{"to":["ada"],"subject":"","text":""},"webhook":{"url":"ftp://example.com/x"}}`,
			status: 422, typ: ProblemInvalidFields,
			fields: []string{"email.to[0]", "email.subject", "email.text", "webhook.url", "webhook.payload"}},
		{name: "repeated recipient", body: `{"email":{"to":["ada@example.com","grace@example.com","Ada@Example.com"],"subject":"Hi","text":"x"}}`,
			status: 422, typ: ProblemInvalidFields, fields: []string{"email.to[2]"}},
		{name: "recipient repeated in angle brackets", body: `{"email":{"to":["ada@example.com","<ada@example.com>"],"subject":"Hi","text":"x"}}`,
			status: 422, typ: ProblemInvalidFields, fields: []string{"email.to[1]"}},
		{name: "domain-literal recipient", body: `{"email":{"to":["ada@[127.0.0.1]"],"subject":"Hi","text":"x"}}`,
			status: 422, typ: ProblemInvalidFields, fields: []string{"email.to[0]"}},
		{name: "numeric webhook host", body: `{"webhook":{"url":"http://2130706433/hook","payload":{}}}`, status: 422, typ: ProblemInvalidFields,
			fields: []string{"webhook.url"}},
		{name: "webhook port 99999", body: `{"webhook":{"url":"https://hooks.example.com:99999/hook","payload":{}}}`, status: 422, typ: ProblemInvalidFields,
			fields: []string{"webhook.url"}},
		{name: "webhook port 0", body: `{"webhook":{"url":"https://hooks.example.com:0/hook","payload":{}}}`, status: 422, typ: ProblemInvalidFields,
			fields: []string{"webhook.url"}},
		{name: "no publisher", body: bothParts, change: func(d *Deps, _ *fakePublisher) { d.Publisher = func() Publisher { return nil } },
			status: 503, typ: ProblemBrokerUnavailable, detail: "not connected", wantHeader: map[string]string{"Retry-After": "1"}},
		{name: "closed", body: bothParts, change: func(_ *Deps, f *fakePublisher) { f.err = retry.ErrClosed },
			status: 503, typ: ProblemBrokerUnavailable, detail: "closed", wantHeader: map[string]string{"Retry-After": "1"}},
		{name: "nacked", body: bothParts, change: func(_ *Deps, f *fakePublisher) { f.err = retry.ErrNacked },
			status: 503, typ: ProblemBrokerUnavailable, detail: "refused", wantHeader: map[string]string{"Retry-After": "1"}},
		{name: "unroutable", body: bothParts, change: func(_ *Deps, f *fakePublisher) { f.err = retry.ErrUnroutable },
			status: 503, typ: ProblemBrokerUnavailable, detail: "topology is missing", wantHeader: map[string]string{"Retry-After": "1"}},
		{name: "one channel unroutable", body: bothParts, change: func(_ *Deps, f *fakePublisher) {
			f.errFor = map[string]error{"webhook": retry.ErrUnroutable}
		}, status: 503, typ: ProblemBrokerUnavailable, detail: `"t.notification-exchange"`, wantHeader: map[string]string{"Retry-After": "1"}},
		{name: "no confirm in time", body: bothParts, change: func(d *Deps, f *fakePublisher) { f.block, d.PublishTimeout = true, 20*time.Millisecond },
			status: 503, typ: ProblemBrokerUnavailable, detail: "within 20ms", wantHeader: map[string]string{"Retry-After": "1"}},
		{name: "other broker error", body: bothParts, change: func(_ *Deps, f *fakePublisher) { f.err = errors.New("channel exception") },
			status: 503, typ: ProblemBrokerUnavailable, wantHeader: map[string]string{"Retry-After": "1"}},
		{name: "publisher panics", body: bothParts, change: func(_ *Deps, f *fakePublisher) { f.panics = true },
			status: 500, typ: ProblemInternal},
		{name: "handler panics", body: bothParts, change: func(d *Deps, _ *fakePublisher) { d.NewID = func() string { panic("no ids left") } },
			status: 500, typ: ProblemInternal},
		{name: "unknown path", method: "GET", path: "/nope", status: 404, typ: ProblemNotFound, detail: "/nope"},
		{name: "unknown v1 path", method: "GET", path: "/v1/nope", status: 404, typ: ProblemNotFound},
		{name: "DELETE notifications", method: "DELETE", path: "/v1/notifications", status: 405, typ: ProblemMethodNotAllowed,
			wantHeader: map[string]string{"Allow": "GET, POST"}},
		{name: "POST healthz", method: "POST", path: "/healthz", status: 405, typ: ProblemMethodNotAllowed,
			wantHeader: map[string]string{"Allow": "GET"}},
		{name: "not ready", method: "GET", path: "/readyz", change: func(d *Deps, _ *fakePublisher) {
			d.Ready = func() error { return errors.New("not connected to the broker") }
		}, status: 503, typ: ProblemNotReady, detail: "not connected", wantHeader: map[string]string{"Retry-After": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fake, _ := testServer(t, tt.change)
			method, path := tt.method, tt.path
			if method == "" {
				method, path = http.MethodPost, "/v1/notifications"
			}
			rec := call(h, method, path, tt.body, tt.headers)
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d; body: %s", rec.Code, tt.status, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != ProblemContentType {
				t.Errorf("Content-Type = %q, want %q", ct, ProblemContentType)
			}
			var got problemBody
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body is not JSON: %v: %s", err, rec.Body)
			}
			if got.Type != tt.typ || got.Status != tt.status || got.Title == "" {
				t.Errorf("problem = %+v, want type %s and status %d with a title", got, tt.typ, tt.status)
			}
			if !strings.Contains(got.Detail, tt.detail) {
				t.Errorf("detail = %q, want it to contain %q", got.Detail, tt.detail)
			}
			var fields []string
			for _, e := range got.Errors {
				fields = append(fields, e.Field)
				if e.Message == "" {
					t.Errorf("field %s has no message", e.Field)
				}
			}
			if diff := cmp.Diff(tt.fields, fields); diff != "" {
				t.Errorf("invalid fields (-want +got):\n%s", diff)
			}
			for k, v := range tt.wantHeader {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if tt.status != http.StatusServiceUnavailable && rec.Header().Get("Retry-After") != "" {
				t.Errorf("Retry-After on a %d", tt.status)
			}
			if tt.status < 500 {
				if sent := fake.messages(); len(sent) > 0 {
					t.Errorf("a refused request published %d message(s)", len(sent))
				}
			}
		})
	}
}

func TestAccepted(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		headers  map[string]string
		change   func(*Deps, *fakePublisher)
		channels []string
	}{
		{name: "both channels", body: bothParts, channels: []string{"email", "webhook"}},
		{name: "email only", body: `{` + emailPart + `}`, channels: []string{"email"}},
		{name: "email to three", body: `{"email":{"to":["ada@example.com","grace@example.com","reject@example.com"],"subject":"Hi","text":"hello"}}`,
			channels: []string{"email"}},
		{name: "webhook only", body: `{` + webhookPart + `}`, channels: []string{"webhook"}},
		// The copy is published exactly as json.Marshal writes it: compact,
		// with <, > and & escaped, whatever the client sent.
		{name: "webhook payload spaced, with markup", body: `{"webhook":{"url":"https://example.com/hook","payload": { "html" : "<b>a & b</b>", "n" : [1, 2] }}}`,
			channels: []string{"webhook"}},
		{name: "charset utf-8", body: bothParts, headers: map[string]string{"Content-Type": "application/json; charset=UTF-8"}, channels: []string{"email", "webhook"}},
		{name: "lowercase bearer", body: bothParts, headers: map[string]string{"Authorization": "bearer " + tokenB}, channels: []string{"email", "webhook"}},
		{name: "auth off", body: bothParts, headers: map[string]string{"Authorization": ""},
			change: func(d *Deps, _ *fakePublisher) { d.AuthOff, d.Tokens = true, nil }, channels: []string{"email", "webhook"}},
		{name: "body at the limit", body: `{` + emailPart + `}`, change: func(d *Deps, _ *fakePublisher) { d.MaxBody = int64(len(emailPart) + 2) },
			channels: []string{"email"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fake, logs := testServer(t, tt.change)
			rec := call(h, http.MethodPost, "/v1/notifications", tt.body, tt.headers)
			if rec.Code != http.StatusAccepted {
				t.Fatalf("status = %d, want 202; body: %s", rec.Code, rec.Body)
			}
			var got accepted
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			answer := accepted{ID: fixed, Channels: tt.channels}
			for _, ch := range tt.channels {
				if ch != "email" {
					answer.Copies = append(answer.Copies, notification.CopyRef{Channel: ch})
					continue
				}
				var req struct{ Email channel.EmailPart }
				_ = json.Unmarshal([]byte(tt.body), &req)
				for _, to := range req.Email.To {
					answer.Copies = append(answer.Copies, notification.CopyRef{Channel: ch, Recipient: to})
				}
			}
			if diff := cmp.Diff(answer, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}

			var req struct {
				Email   *channel.EmailPart   `json:"email"`
				Webhook *channel.WebhookPart `json:"webhook"`
			}
			if err := json.Unmarshal([]byte(tt.body), &req); err != nil {
				t.Fatal(err)
			}
			full := &notification.Notification{V: 1, ID: fixed, CreatedAt: now, Parts: map[string]json.RawMessage{}}
			if req.Email != nil {
				full.Parts["email"], _ = json.Marshal(req.Email)
			}
			if req.Webhook != nil {
				full.Parts["webhook"], _ = json.Marshal(req.Webhook)
			}
			var want []published
			for _, ch := range tt.channels {
				// An email goes out once per recipient, with that one
				// recipient in its part and in x-recipient.
				copies := []*notification.Notification{full.For(ch)}
				var recipients []string
				if ch == "email" {
					copies = nil
					for _, to := range req.Email.To {
						one := *req.Email
						one.To = []string{to}
						c := full.For(ch)
						c.Parts[ch], _ = json.Marshal(one)
						copies = append(copies, c)
						recipients = append(recipients, to)
					}
				}
				for i, c := range copies {
					body, err := json.Marshal(c)
					if err != nil {
						t.Fatal(err)
					}
					msg := amqp.Publishing{ContentType: "application/json", MessageId: fixed, DeliveryMode: amqp.Persistent,
						Timestamp: now, AppId: "relay-api", Type: "notification.v1", Body: body}
					if recipients != nil {
						msg.Headers = amqp.Table{"x-recipient": recipients[i]}
					}
					want = append(want, published{Exchange: "t.notification-exchange", Key: ch, Msg: msg})
				}
			}
			if diff := cmp.Diff(want, fake.messages()); diff != "" {
				t.Errorf("published (-want +got):\n%s", diff)
			}
			var wantCopies []notification.CopyRef
			if req.Email != nil {
				for _, to := range req.Email.To {
					wantCopies = append(wantCopies, notification.CopyRef{Channel: "email", Recipient: to})
				}
				if req.Webhook != nil {
					wantCopies = append(wantCopies, notification.CopyRef{Channel: "webhook"})
				}
			}
			if recs := fake.records(); len(recs) != 1 {
				t.Errorf("%d accepted records, want 1", len(recs))
			} else if diff := cmp.Diff(wantCopies, recs[0].Copies); diff != "" {
				t.Errorf("accepted record's copies (-want +got):\n%s", diff)
			}
			for _, m := range fake.messages() {
				copy, err := notification.Decode(m.Msg.Body)
				if err != nil {
					t.Errorf("%s copy does not decode: %v", m.Key, err)
				} else if copy.Channel != m.Key {
					t.Errorf("%s copy has channel %q", m.Key, copy.Channel)
				}
			}
			if !strings.Contains(logs.String(), `"msg":"notification accepted","id":"`+fixed+`"`) ||
				!strings.Contains(logs.String(), `"duration_ms":`) {
				t.Errorf("no log of the accepted notification:\n%s", logs)
			}
		})
	}
}

// wantID is the id the API must derive for an Idempotency-Key, written out
// independently of the code under test.
func wantID(token, key string) string {
	ident := ""
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		ident = hex.EncodeToString(sum[:])
	}
	sum := sha256.Sum256([]byte(ident + "\x00" + key))
	return "ntf_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:26]
}

func TestIdempotencyKey(t *testing.T) {
	h, fake, _ := testServer(t, nil)
	post := func(token, key string) string {
		t.Helper()
		rec := call(h, http.MethodPost, "/v1/notifications", bothParts,
			map[string]string{"Authorization": "Bearer " + token, "Idempotency-Key": key})
		if rec.Code != http.StatusAccepted {
			t.Fatalf("status = %d; body: %s", rec.Code, rec.Body)
		}
		var got accepted
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		return got.ID
	}
	first, again := post(tokenA, "order-42"), post(tokenA, "order-42")
	other := post(tokenB, "order-42")
	next := post(tokenA, "order-43")
	if first != again {
		t.Errorf("same key twice: ids %s and %s", first, again)
	}
	if first == other {
		t.Errorf("two tokens, one key: both got %s", first)
	}
	if first == next {
		t.Errorf("two keys, one token: both got %s", first)
	}
	if want := wantID(tokenA, "order-42"); first != want {
		t.Errorf("id = %s, want %s", first, want)
	}
	if !regexp.MustCompile(`^ntf_[a-z2-7]{26}$`).MatchString(first) {
		t.Errorf("id %q is not ntf_ and 26 base32 characters", first)
	}
	for _, m := range fake.messages()[:2] {
		if m.Msg.MessageId != first && m.Msg.MessageId != again {
			t.Errorf("message id %s, want %s", m.Msg.MessageId, first)
		}
	}

	open, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) { d.AuthOff = true })
	rec := call(open, http.MethodPost, "/v1/notifications", bothParts, map[string]string{"Authorization": "", "Idempotency-Key": "order-42"})
	var got accepted
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if want := wantID("", "order-42"); got.ID != want {
		t.Errorf("auth off: id = %s, want %s", got.ID, want)
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID(), NewID()
	re := regexp.MustCompile(`^ntf_[a-z2-7]{26}$`)
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Errorf("NewID() = %q, %q: want two different ntf_ ids of 26 base32 characters", a, b)
	}
}

func TestNewIDAtSortsByTime(t *testing.T) {
	re := regexp.MustCompile(`^ntf_[a-z2-7]{26}$`)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name          string
		first, second time.Time
		e1, e2        []byte
	}{
		{"a millisecond later", t0, t0.Add(time.Millisecond), bytes.Repeat([]byte{0xff}, 10), make([]byte, 10)},
		{"a year later", t0, t0.AddDate(1, 0, 0), bytes.Repeat([]byte{0xff}, 10), make([]byte, 10)},
		{"the same millisecond, by entropy", t0, t0, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 2}},
		{"byte boundaries", time.UnixMilli(0xff), time.UnixMilli(0x100), bytes.Repeat([]byte{0xff}, 10), make([]byte, 10)},
		{"across the alphabet's digits and letters", time.UnixMilli(0x3_ffff_ffff), time.UnixMilli(0x4_0000_0000), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := NewIDAt(tt.first, tt.e1), NewIDAt(tt.second, tt.e2)
			if !re.MatchString(a) || !re.MatchString(b) {
				t.Fatalf("NewIDAt = %q, %q: want ntf_ ids of 26 base32 characters", a, b)
			}
			if a >= b {
				t.Errorf("NewIDAt(%v) = %q is not before NewIDAt(%v) = %q", tt.first, a, tt.second, b)
			}
		})
	}
	if a, b := NewIDAt(t0, nil), NewIDAt(t0, nil); a == b {
		t.Errorf("two ids of one millisecond without entropy are the same: %q", a)
	}
	if a, b := NewIDAt(t0, make([]byte, 10)), NewIDAt(t0, make([]byte, 10)); a != b {
		t.Errorf("NewIDAt with the same entropy: %q, %q, want one id", a, b)
	}
}

func TestHealth(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		change func(*Deps, *fakePublisher)
		status int
		body   string
	}{
		{name: "healthz", path: "/healthz", status: 200, body: `{"status":"ok"}`},
		{name: "healthz without broker", path: "/healthz", change: func(d *Deps, _ *fakePublisher) { d.Publisher = nil }, status: 200, body: `{"status":"ok"}`},
		{name: "readyz", path: "/readyz", status: 200, body: `{"status":"ok"}`},
		{name: "readyz without publisher", path: "/readyz", change: func(d *Deps, _ *fakePublisher) { d.Publisher = nil }, status: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, _ := testServer(t, tt.change)
			rec := call(h, http.MethodGet, tt.path, "", map[string]string{"Authorization": ""})
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d; body: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.body != "" && strings.TrimSpace(rec.Body.String()) != tt.body {
				t.Errorf("body = %s, want %s", rec.Body, tt.body)
			}
		})
	}
}

// routesFunc is a Routes that registers its routes by calling itself.
type routesFunc func(r chi.Router)

func (f routesFunc) Routes(r chi.Router) { f(r) }

// TestDashboard: the dashboard's routes are served on the API's router,
// and a path neither has is the API's 404.
func TestDashboard(t *testing.T) {
	// A page and a file, each answering with its path.
	dash := routesFunc(func(r chi.Router) {
		for _, path := range []string{"/", "/app.js"} {
			r.Get(path, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "dashboard "+r.URL.Path) })
		}
	})
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) { d.Dashboard = dash })
	tests := []struct {
		path   string
		status int
		body   string
	}{
		{"/", 200, "dashboard /"},
		{"/app.js", 200, "dashboard /app.js"},
		{"/healthz", 200, `{"status":"ok"}`},
		{"/v1/nope", 404, ""},
		{"/nope", 404, `{"type":"https://relay.dev/problems/not-found","title":"Not found","status":404,"detail":"no route for /nope"}`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := call(h, http.MethodGet, tt.path, "", nil)
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d", rec.Code, tt.status)
			}
			if tt.body != "" && strings.TrimSpace(rec.Body.String()) != tt.body {
				t.Errorf("body = %q, want %q", rec.Body, tt.body)
			}
		})
	}
}

// TestDashboardMethods: the dashboard's routes, on the API's router,
// answer HEAD as they answer GET, and another method with the API's 405
// naming both.
func TestDashboardMethods(t *testing.T) {
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.Dashboard = dashboard.New(dashboard.Deps{Authenticate: dashboardAccess(d.credentials(), false)})
	})
	tests := []struct {
		method, path string
		status       int
		typ, allow   string
	}{
		{http.MethodHead, "/", 200, "", ""},
		{http.MethodHead, "/dashboard/session", 200, "", ""},
		{http.MethodPost, "/", 405, ProblemMethodNotAllowed, "GET, HEAD"},
		{http.MethodDelete, "/dashboard/session", 405, ProblemMethodNotAllowed, "GET, HEAD"},
		{http.MethodGet, "/dashboard/nope", 404, ProblemNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := call(h, tt.method, tt.path, "", nil)
			var typ string
			if tt.typ != "" {
				typ = decodeAs[problemBody](t, rec).Type
			}
			got := []any{rec.Code, typ, rec.Header().Get("Allow")}
			if diff := cmp.Diff([]any{tt.status, tt.typ, tt.allow}, got); diff != "" {
				t.Errorf("status, problem type, Allow (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	h, _, _ := testServer(t, func(_ *Deps, f *fakePublisher) { f.errFor = map[string]error{"webhook": retry.ErrNacked} })
	call(h, http.MethodPost, "/v1/notifications", `{`+emailPart+`}`, nil)
	call(h, http.MethodPost, "/v1/notifications", bothParts, nil)
	call(h, http.MethodGet, "/nope/1", "", nil)
	call(h, http.MethodGet, "/nope/2", "", nil)
	rec := call(h, http.MethodGet, "/metrics", "", map[string]string{"Authorization": ""})
	if rec.Code != http.StatusOK {
		t.Fatalf("status = %d", rec.Code)
	}
	text := rec.Body.String()
	for _, want := range []string{
		`relay_http_requests_total{code="202",method="POST",route="/v1/notifications"} 1`,
		`relay_http_requests_total{code="503",method="POST",route="/v1/notifications"} 1`,
		`relay_http_requests_total{code="404",method="GET",route="unmatched"} 2`,
		`relay_http_request_duration_seconds_count{method="POST",route="/v1/notifications"} 2`,
		`relay_publishes_total{channel="email",result="ok"} 2`,
		`relay_publishes_total{channel="webhook",result="nacked"} 1`,
		`relay_publishes_total{channel="webhook",result="unroutable"} 0`,
		`relay_publish_confirm_seconds_count 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "/nope/1") {
		t.Error("a raw path made it into a label")
	}
}

// TestSharedRegistry checks that servers on one registry share its
// collectors instead of panicking.
func TestSharedRegistry(t *testing.T) {
	deps := Deps{Publisher: func() Publisher { return &fakePublisher{} }, AuthOff: true, Registry: prometheus.NewRegistry()}
	for range 2 {
		h := NewServer(deps)
		if rec := call(h, http.MethodPost, "/v1/notifications", bothParts, nil); rec.Code != http.StatusAccepted {
			t.Errorf("status = %d", rec.Code)
		}
	}
	rec := call(NewServer(deps), http.MethodGet, "/metrics", "", nil)
	if want := `relay_publishes_total{channel="email",result="ok"} 2`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

func TestOpenAPI(t *testing.T) {
	h, _, _ := testServer(t, nil)
	rec := call(h, http.MethodGet, "/openapi.json", "", map[string]string{"Authorization": ""})
	if rec.Code != http.StatusOK || !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("status %d, valid JSON %t", rec.Code, json.Valid(rec.Body.Bytes()))
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	var routed []string
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed = append(routed, strings.ToLower(method)+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(routed)
	slices.Sort(documented)
	if diff := cmp.Diff(routed, documented); diff != "" {
		t.Errorf("routes (-routes.go +openapi.json):\n%s", diff)
	}
	for _, typ := range []string{ProblemMalformedJSON, ProblemUnknownField, ProblemInvalidHeader, ProblemUnauthorized,
		ProblemNotFound, ProblemMethodNotAllowed, ProblemBodyTooLarge, ProblemUnsupportedMediaType,
		ProblemInvalidFields, ProblemBrokerUnavailable, ProblemNotReady, ProblemInternal, ProblemNotDestination,
		ProblemKeyReused, ProblemKeyInFlight, ProblemHistoryUnavailable, ProblemInvalidQuery, ProblemInvalidBatch,
		ProblemRateLimited, ProblemTooManyCopies} {
		if !bytes.Contains(rec.Body.Bytes(), []byte(`"`+typ+`"`)) {
			t.Errorf("openapi.json does not list problem type %s", typ)
		}
	}
}

var update = flag.Bool("update", false, "rewrite docs/openapi.json")

// TestOpenAPICopy keeps docs/openapi.json the same as the document the
// API serves (make docs rewrites it).
func TestOpenAPICopy(t *testing.T) {
	const path = "../../docs/openapi.json"
	if *update {
		if err := os.WriteFile(path, OpenAPI(channel.Builtin()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	docs, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run make docs)", err)
	}
	if !bytes.Equal(docs, OpenAPI(channel.Builtin())) {
		t.Error("docs/openapi.json differs from the document the API serves: run make docs")
	}
}

// Compile-time check that the real publisher fits.
var _ Publisher = (*retry.Publisher)(nil)

// probePart is the part of a channel only TestOpenAPIListsItsChannels
// knows.
type probePart struct {
	Note string `json:"note"`
}

// TestOpenAPIListsItsChannels serves the OpenAPI document of a server
// with a channel of its own: the document lists it, and another server's
// does not.
func TestOpenAPIListsItsChannels(t *testing.T) {
	probe := channel.Define(channel.Spec[probePart]{
		Name:       "probe",
		Summary:    "a channel of this test's own",
		Check:      func(*probePart, func(field, format string, args ...any)) {},
		Recipients: func(p *probePart) []string { return []string{p.Note} },
		Schema:     `{"type": "object", "properties": {"note": {"type": "string"}}}`,
		Open: func(func(string) string, channel.Store) (channel.Send[probePart], func() error, error) {
			return func(context.Context, string, *probePart) error { return nil }, func() error { return nil }, nil
		},
	})
	for _, tt := range []struct {
		name     string
		channels channel.Set
		want     bool
	}{
		{"with the probe", channel.Builtin().With(probe), true},
		{"built in", channel.Builtin(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := call(NewServer(Deps{Channels: tt.channels}), http.MethodGet, "/openapi.json", "", nil)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			if got := strings.Contains(rec.Body.String(), `"probe"`); got != tt.want {
				t.Errorf("openapi.json names the probe channel: %t, want %t", got, tt.want)
			}
		})
	}
}
