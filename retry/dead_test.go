package retry

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestReplayHeaders(t *testing.T) {
	const first = "2026-01-02T03:03:05Z"
	// parked is what a message parked after four retries carries.
	parked := amqp.Table{
		"priority": "high", HeaderFirstFailedAt: first, HeaderRetryCount: int32(4), HeaderAttempts: int32(5),
		HeaderDeferrals: int32(1), HeaderLastError: "503 busy", HeaderDeadSource: "p.email-queue",
		HeaderDeadReason: ReasonMaxRetries, HeaderParkedAt: "2026-01-02T03:04:05Z", HeaderOriginalQueue: "p.email-queue",
		"x-death": []any{amqp.Table{"queue": "p.email-queue", "reason": "rejected"}},
	}
	with := func(h amqp.Table, kv ...any) amqp.Table {
		out := amqp.Table{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(out, kv[i].(string))
				continue
			}
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name string
		h    amqp.Table
		want amqp.Table
	}{
		{"first replay: a fresh round that keeps the history", parked, amqp.Table{
			"priority": "high", HeaderFirstFailedAt: first, HeaderReplays: int32(1),
			HeaderPriorRetries: int32(4), HeaderPriorError: "503 busy"}},
		{"second replay adds up the rounds", with(parked, HeaderReplays, int32(1), HeaderPriorRetries, int32(4),
			HeaderPriorError, "503 busy", HeaderRetryCount, int32(2), HeaderLastError, "timeout"), amqp.Table{
			"priority": "high", HeaderFirstFailedAt: first, HeaderReplays: int32(2),
			HeaderPriorRetries: int32(6), HeaderPriorError: "timeout"}},
		{"a round without error text keeps the earlier one", with(parked, HeaderReplays, int32(1), HeaderPriorError, "503 busy",
			HeaderLastError, nil, "x-death", nil), amqp.Table{
			"priority": "high", HeaderFirstFailedAt: first, HeaderReplays: int32(2),
			HeaderPriorRetries: int32(4), HeaderPriorError: "503 busy"}},
		{"the broker's reason when relay recorded none", with(parked, HeaderLastError, nil), amqp.Table{
			"priority": "high", HeaderFirstFailedAt: first, HeaderReplays: int32(1), HeaderPriorRetries: int32(4),
			HeaderPriorError: "rejected by p.email-queue (the error text was not recorded)"}},
		{"parked at once: no retries to carry", amqp.Table{HeaderDeadReason: ReasonPermanent, HeaderLastError: "550 no such user",
			HeaderFirstFailedAt: first}, amqp.Table{HeaderFirstFailedAt: first, HeaderReplays: int32(1), HeaderPriorError: "550 no such user"}},
		{"garbled counters count as zero", with(parked, HeaderReplays, "many", HeaderPriorRetries, int32(-7)), amqp.Table{
			"priority": "high", HeaderFirstFailedAt: first, HeaderReplays: int32(1),
			HeaderPriorRetries: int32(4), HeaderPriorError: "503 busy"}},
		{"no history at all", amqp.Table{}, amqp.Table{HeaderReplays: int32(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, replayHeaders(tt.h)); diff != "" {
				t.Errorf("replayHeaders (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReplayedHistoryRunsOn follows a replayed message into its next
// round: the retry copy keeps its first failure and its round, the
// listing reads them back, and a producer still cannot forge them.
func TestReplayedHistoryRunsOn(t *testing.T) {
	const first = "2026-01-02T03:03:05Z"
	h := replayHeaders(amqp.Table{HeaderFirstFailedAt: first, HeaderRetryCount: int32(3), HeaderLastError: "503",
		HeaderDeadSource: "p.email-queue", HeaderDeadReason: ReasonMaxRetries})
	if got := RetryCount(h); got != 0 {
		t.Errorf("a replayed message starts at %d retries, want 0", got)
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	next := retryHeaders(&amqp.Delivery{Headers: h}, decision{retries: 1, attempts: 1}, "p.email-queue", "timeout", now)
	if next[HeaderFirstFailedAt] != first || replays(next) != 1 || next[HeaderPriorRetries] != int32(3) || next[HeaderPriorError] != "503" {
		t.Errorf("the next round's retry copy = %v, want the first failure, round 1 and the prior round's retries and error", next)
	}
	p := parkedFrom(Topology{}, &amqp.Delivery{MessageId: "a", Headers: next})
	if p.FirstFailedAt.Format(time.RFC3339) != first || p.Replays != 1 || p.PriorRetries != 3 || p.PriorError != "503" || p.Retries != 1 {
		t.Errorf("listed as %+v", p)
	}
	if got := without(next, pipelineHeaders); len(got) != 0 {
		t.Errorf("a producer's copy of relay's history headers would keep %v", got)
	}
}

func TestBodyIsJSON(t *testing.T) {
	tests := []struct {
		name, contentType, encoding string
		body                        string
		want                        bool
	}{
		{"json", "application/json", "", `{"a":1}`, true},
		{"json with charset", "application/json; charset=utf-8", "", `[1,2]`, true},
		{"+json type", "application/vnd.relay.notification+json", "", `{"a":1}`, true},
		{"no content type, json body", "", "", `{"a":1}`, true},
		{"no content type, text body", "", "", `hello`, false},
		{"json type, broken body", "application/json", "", `{"a":`, false},
		{"text that parses", "text/plain", "", `42`, false},
		{"gzipped", "application/json", "gzip", `{"a":1}`, false},
		{"identity encoding", "application/json", "identity", `{"a":1}`, true},
		{"invalid utf-8 in a string", "application/json", "", "\"\xff\"", false},
		{"garbled content type", "application/json;;", "", `{}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BodyIsJSON(tt.contentType, tt.encoding, []byte(tt.body)); got != tt.want {
				t.Errorf("BodyIsJSON(%q, %q, %q) = %t, want %t", tt.contentType, tt.encoding, tt.body, got, tt.want)
			}
		})
	}
}

func TestDeadLetterDetail(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		d    amqp.Delivery
		want string
	}{
		{"json body as json", amqp.Delivery{MessageId: "a", ContentType: "application/json", Timestamp: at, Body: []byte(`{"to":"ada"}`),
			Headers: amqp.Table{HeaderDeadSource: "p.email-queue", HeaderDeadReason: ReasonPermanent, HeaderRetryCount: int32(0),
				HeaderLastError: "550", HeaderFirstFailedAt: "2026-01-02T03:04:06Z", HeaderParkedAt: "2026-01-02T03:04:07Z"}},
			`{"id":"a","source":"p.email-queue","reason":"permanent","retries":0,"replays":0,` +
				`"first_failed_at":"2026-01-02T03:04:06Z","parked_at":"2026-01-02T03:04:07Z","last_error":"550",` +
				`"published_at":"2026-01-02T03:04:05Z","content_type":"application/json",` +
				`"headers":{"x-dead-reason":"permanent","x-dead-source":"p.email-queue","x-first-failed-at":"2026-01-02T03:04:06Z",` +
				`"x-last-error":"550","x-parked-at":"2026-01-02T03:04:07Z","x-retry-count":0},"size":12,"body":{"to":"ada"}}`},
		{"binary body as base64", amqp.Delivery{MessageId: "b", ContentType: "application/octet-stream", Body: []byte{0xff, 0, 1}},
			`{"id":"b","source":"","reason":"","retries":0,"replays":0,"content_type":"application/octet-stream",` +
				`"headers":{},"size":3,"body_base64":"/wAB"}`},
		{"compressed json as base64", amqp.Delivery{MessageId: "c", ContentType: "application/json", ContentEncoding: "gzip", Body: []byte(`{}`)},
			`{"id":"c","source":"","reason":"","retries":0,"replays":0,"content_type":"application/json","content_encoding":"gzip",` +
				`"headers":{},"size":2,"body_base64":"e30="}`},
		{"empty body", amqp.Delivery{MessageId: "d"}, `{"id":"d","source":"","reason":"","retries":0,"replays":0,"headers":{},"size":0}`},
		{"byte-array headers read as text, nested too", amqp.Delivery{MessageId: "e", Headers: amqp.Table{
			"tenant": []byte("acme"), "raw": []byte{0xff},
			"x-death":     []any{amqp.Table{"queue": []byte("p.email-queue"), "count": int64(2)}},
			HeaderReplays: int32(2), HeaderPriorRetries: int32(7), HeaderPriorError: "503"}},
			`{"id":"e","source":"","reason":"","retries":0,"replays":2,"prior_retries":7,"prior_error":"503",` +
				`"headers":{"raw":"/w==","tenant":"acme","x-death":[{"count":2,"queue":"p.email-queue"}],` +
				`"x-prior-error":"503","x-prior-retries":7,"x-replays":2},"size":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(parkedFrom(Topology{CopyHeader: "x-recipient"}, &tt.d).Detail())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("detail JSON (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotParked(t *testing.T) {
	tests := []struct {
		f    Filter
		want string
	}{
		{Filter{ID: "zzz"}, `message "zzz": not in the dead-letter queue`},
		{Filter{ID: "zzz", Source: "p.email-queue"}, `message "zzz" parked from "p.email-queue": not in the dead-letter queue`},
		{Filter{ID: "zzz", Copy: "typo@exmaple.com"}, `message "zzz" for "typo@exmaple.com": not in the dead-letter queue`},
		{Filter{ID: "zzz", Source: "p.email-queue", Copy: "typo@exmaple.com"},
			`message "zzz" for "typo@exmaple.com" parked from "p.email-queue": not in the dead-letter queue`},
	}
	for _, tt := range tests {
		err := notParked(tt.f)
		if !errors.Is(err, ErrNotParked) || err.Error() != tt.want {
			t.Errorf("notParked(%+v) = %v, want %q wrapping ErrNotParked", tt.f, err, tt.want)
		}
	}
}

// TestFilterMatch: the two email copies of one notification share its id
// and source; only the topology's CopyHeader, which holds the recipient,
// tells them apart.
func TestFilterMatch(t *testing.T) {
	const header = "x-recipient"
	topo := Topology{CopyHeader: header}
	copyFor := func(id, source, recipient string) *amqp.Delivery {
		h := amqp.Table{HeaderDeadSource: source}
		if recipient != "" {
			h[header] = recipient
		}
		return &amqp.Delivery{MessageId: id, Headers: h}
	}
	typo := copyFor("n1", "p.email-queue", "typo@exmaple.com")
	full := copyFor("n1", "p.email-queue", "full@example.com")
	other := copyFor("n2", "p.email-queue", "typo@exmaple.com")
	webhook := copyFor("n1", "p.webhook-queue", "")
	bytesHeader := &amqp.Delivery{MessageId: "n1", Headers: amqp.Table{HeaderDeadSource: "p.email-queue",
		header: []byte("typo@exmaple.com")}}
	all := []*amqp.Delivery{typo, full, other, webhook, bytesHeader}
	tests := []struct {
		name string
		f    Filter
		want []*amqp.Delivery
	}{
		{"zero value: every one", Filter{}, all},
		{"id: every copy", Filter{ID: "n1"}, []*amqp.Delivery{typo, full, webhook, bytesHeader}},
		{"id and recipient: that recipient's copy", Filter{ID: "n1", Copy: "typo@exmaple.com"}, []*amqp.Delivery{typo, bytesHeader}},
		{"id, source and recipient", Filter{ID: "n1", Source: "p.email-queue", Copy: "full@example.com"}, []*amqp.Delivery{full}},
		{"recipient alone: across notifications", Filter{Copy: "typo@exmaple.com"}, []*amqp.Delivery{typo, other, bytesHeader}},
		{"exact match only", Filter{Copy: "TYPO@exmaple.com"}, nil},
		{"a prefix is no match", Filter{Copy: "typo@"}, nil},
		{"a copy without a recipient never matches one", Filter{ID: "n1", Source: "p.webhook-queue", Copy: "full@example.com"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []*amqp.Delivery
			for _, d := range all {
				if tt.f.match(topo, d) {
					got = append(got, d)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%+v matches (-want +got):\n%s", tt.f, diff)
			}
		})
	}
}

func TestFilterMatchRicher(t *testing.T) {
	topo := Topology{Prefix: "p.", Routes: []Route{{Queue: "email-queue", Key: "email", Lanes: 3}, {Queue: "webhook-queue", Key: "webhook"}}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	parked := func(id, source, reason string, parkedAt time.Time, lastError string) DeadLetter {
		return DeadLetter{ID: id, Source: source, Reason: reason, ParkedAt: parkedAt, LastError: lastError}
	}
	lane := parked("lane", "p.email-queue.lane-2", ReasonMaxRetries, at, "SMTP 421 Try Later")
	lane.Headers = amqp.Table{"x-tenant": "acme"}
	own := parked("own", "p.email-queue", ReasonPermanent, at.Add(time.Hour), "550 no such user")
	own.Headers = amqp.Table{"x-tenant": []byte("globex")}
	hook := parked("hook", "p.webhook-queue", ReasonExpired, at.Add(2*time.Hour), "")
	hook.Headers = amqp.Table{"x-tenant": ""}
	stray := parked("stray", "p.email-queue.lane-7", ReasonNoSource, time.Time{}, "")
	all := []DeadLetter{lane, own, hook, stray}
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"route: every lane of it", Filter{Route: "email"}, []string{"lane", "own"}},
		{"route: a lane past the route's is none of it", Filter{Route: "email", Reason: ReasonNoSource}, nil},
		{"route of another", Filter{Route: "webhook"}, []string{"hook"}},
		{"reason", Filter{Reason: ReasonPermanent}, []string{"own"}},
		{"since is inclusive", Filter{Since: at.Add(time.Hour)}, []string{"own", "hook"}},
		{"until is exclusive", Filter{Until: at.Add(time.Hour)}, []string{"lane"}},
		{"a range", Filter{Since: at, Until: at.Add(90 * time.Minute)}, []string{"lane", "own"}},
		{"error: a substring in any case", Filter{Error: "try later"}, []string{"lane"}},
		{"error: no error matches none", Filter{Error: "5"}, []string{"own"}},
		{"where narrows last", Filter{Route: "email", Where: func(p DeadLetter) bool { return p.ID == "own" }}, []string{"own"}},
		{"fields are ANDed", Filter{Route: "email", Reason: ReasonMaxRetries, Error: "421"}, []string{"lane"}},
		{"header: exactly its value", Filter{Headers: map[string]string{"x-tenant": "acme"}}, []string{"lane"}},
		{"header: a byte-array value reads as a string", Filter{Headers: map[string]string{"x-tenant": "globex"}}, []string{"own"}},
		{"header: empty selects those without it, or with it empty", Filter{Headers: map[string]string{"x-tenant": ""}}, []string{"hook", "stray"}},
		{"header: a prefix is no match", Filter{Headers: map[string]string{"x-tenant": "ac"}}, nil},
		{"header and fields are ANDed", Filter{Route: "email", Headers: map[string]string{"x-tenant": ""}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range all {
				if tt.f.Match(topo, p) {
					got = append(got, p.ID)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("matches (-want +got):\n%s", diff)
			}
		})
	}
}
