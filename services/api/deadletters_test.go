package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
)

// fakeStore is a dead-letter queue in memory. It answers as
// retry.DeadLetters does (limit 0: all; ErrNotParked for an id that
// matches nothing) and records each call.
type fakeStore struct {
	parked []retry.DeadLetter
	calls  []string
	// filters holds the filter of each call.
	filters []retry.Filter
	err     error
}

func (f *fakeStore) record(op string, flt retry.Filter, limit int) {
	f.filters = append(f.filters, flt)
	call := fmt.Sprintf("%s id=%q source=%q limit=%d", op, flt.ID, flt.Source, limit)
	if flt.Copy != "" {
		call += fmt.Sprintf(" recipient=%q", flt.Copy)
	}
	for _, kv := range [][2]string{{"route", flt.Route}, {"reason", flt.Reason}, {"error", flt.Error}} {
		if kv[1] != "" {
			call += fmt.Sprintf(" %s=%q", kv[0], kv[1])
		}
	}
	if !flt.Since.IsZero() || !flt.Until.IsZero() {
		call += fmt.Sprintf(" parked=[%s,%s)", flt.Since.Format(time.RFC3339), flt.Until.Format(time.RFC3339))
	}
	if flt.Where != nil {
		call += " where"
	}
	f.calls = append(f.calls, call)
}

func (f *fakeStore) match(flt retry.Filter) []retry.DeadLetter {
	var out []retry.DeadLetter
	for _, p := range f.parked {
		if flt.Match(deadLetterTopology, p) {
			out = append(out, p)
		}
	}
	return out
}

// deadLetterTopology is the topology of deadLetterServer.
var deadLetterTopology = retry.Topology{Prefix: "p.", Routes: []retry.Route{{Queue: "email-queue", Key: "email", Lanes: 2}, {Queue: "webhook-queue", Key: "webhook"}}}

func (f *fakeStore) Count(_ context.Context, flt retry.Filter) (int, error) {
	f.record("Count", flt, 0)
	return len(f.match(flt)), f.err
}

// notParked is what retry.DeadLetters answers for an id that matches
// nothing.
func (f *fakeStore) notParked(flt retry.Filter, n int) error {
	if f.err == nil && n == 0 && flt.ID != "" {
		if flt.Copy != "" {
			return fmt.Errorf("message %q for %q: %w", flt.ID, flt.Copy, retry.ErrNotParked)
		}
		return fmt.Errorf("message %q: %w", flt.ID, retry.ErrNotParked)
	}
	return f.err
}

func (f *fakeStore) List(_ context.Context, flt retry.Filter, limit int) ([]retry.DeadLetter, error) {
	f.record("List", flt, limit)
	out := f.match(flt)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, f.err
}

func (f *fakeStore) Get(_ context.Context, flt retry.Filter) ([]retry.DeadLetter, error) {
	f.record("Get", flt, 0)
	out := f.match(flt)
	return out, f.notParked(flt, len(out))
}

func (f *fakeStore) Replay(_ context.Context, flt retry.Filter) (int, error) {
	f.record("Replay", flt, 0)
	n := len(f.match(flt))
	return n, f.notParked(flt, n)
}

func (f *fakeStore) Purge(_ context.Context, flt retry.Filter) (int, error) {
	f.record("Purge", flt, 0)
	n := len(f.match(flt))
	return n, f.notParked(flt, n)
}

const deadLetterToken = "dead-letter-token-0123456789"

// deadLetterServer is the API over a fakeStore holding a (email), b
// (webhook) and the two email copies of s, one for each recipient, under
// the topology prefix "p.".
func deadLetterServer(store *fakeStore, noStore bool) http.Handler {
	if store.parked == nil {
		store.parked = []retry.DeadLetter{
			{ID: "a", Source: "p.email-queue", Reason: retry.ReasonMaxRetries, ContentType: "application/json", Body: []byte(`{"to":"ada"}`)},
			{ID: "b", Source: "p.webhook-queue", Reason: retry.ReasonPermanent, ContentType: "application/octet-stream", Body: []byte{0xff, 0x00}},
			{ID: "s", Copy: "typo@exmaple.com", Source: "p.email-queue", Reason: retry.ReasonPermanent},
			{ID: "s", Copy: "full@example.com", Source: "p.email-queue", Reason: retry.ReasonPermanent},
		}
	}
	return NewServer(Deps{Tokens: []string{deadLetterToken}, Topology: deadLetterTopology,
		DeadLetters: func() DeadLetterStore {
			if noStore {
				return nil
			}
			return store
		}})
}

func TestDeadLetterRoutes(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		noStore    bool
		storeErr   error
		wantStatus int
		wantType   string // the problem type, for an error
		wantBody   string // in the answer
		wantCall   string // the one store call, "" for none
	}{
		{name: "list all", method: "GET", path: "/v1/dead-letters", wantStatus: 200, wantBody: `"id":"a"`,
			wantCall: `List id="" source="" limit=50`},
		{name: "list by source adds the prefix", method: "GET", path: "/v1/dead-letters?source=email-queue", wantStatus: 200,
			wantBody: `"source":"p.email-queue"`, wantCall: `List id="" source="p.email-queue" limit=50`},
		{name: "list by id", method: "GET", path: "/v1/dead-letters?id=b", wantStatus: 200, wantBody: `"id":"b"`,
			wantCall: `List id="b" source="" limit=50`},
		{name: "list by recipient", method: "GET", path: "/v1/dead-letters?recipient=typo@exmaple.com", wantStatus: 200,
			wantBody: `"recipient":"typo@exmaple.com"`, wantCall: `List id="" source="" limit=50 recipient="typo@exmaple.com"`},
		{name: "list by id and an escaped recipient", method: "GET", path: "/v1/dead-letters?id=s&recipient=full%40example.com", wantStatus: 200,
			wantBody: `"recipient":"full@example.com"`, wantCall: `List id="s" source="" limit=50 recipient="full@example.com"`},
		{name: "recipient given twice", method: "GET", path: "/v1/dead-letters?recipient=a@example.com&recipient=b@example.com", wantStatus: 422,
			wantType: ProblemInvalidQuery, wantBody: `"field":"recipient","message":"given 2 times`},
		{name: "limit 0 lists every message, as the CLI's --limit 0", method: "GET", path: "/v1/dead-letters?limit=0", wantStatus: 200,
			wantBody: `"id":"b"`, wantCall: `List id="" source="" limit=0`},
		{name: "a limit above the default", method: "GET", path: "/v1/dead-letters?limit=5000", wantStatus: 200,
			wantCall: `List id="" source="" limit=5000`},
		{name: "limit not a number", method: "GET", path: "/v1/dead-letters?limit=abc", wantStatus: 422, wantType: ProblemInvalidQuery,
			wantBody: `"field":"limit"`},
		{name: "negative limit", method: "GET", path: "/v1/dead-letters?limit=-1", wantStatus: 422, wantType: ProblemInvalidQuery,
			wantBody: `"field":"limit"`},
		{name: "unknown parameter", method: "GET", path: "/v1/dead-letters?queue=email-queue", wantStatus: 422, wantType: ProblemInvalidQuery,
			wantBody: `{"field":"queue","message":"unknown parameter: this route takes channel, endpoint, error, id, limit, reason, recipient, since, source, tenant or until"}`},
		{name: "parameter given twice", method: "GET", path: "/v1/dead-letters?limit=1&limit=2", wantStatus: 422, wantType: ProblemInvalidQuery,
			wantBody: `"field":"limit","message":"given 2 times`},
		{name: "list while disconnected", method: "GET", path: "/v1/dead-letters", noStore: true, wantStatus: 503,
			wantType: ProblemBrokerUnavailable, wantBody: "broker"},
		{name: "list error", method: "GET", path: "/v1/dead-letters", storeErr: errors.New("boom"), wantStatus: 503,
			wantType: ProblemBrokerUnavailable, wantBody: "boom", wantCall: `List id="" source="" limit=50`},

		{name: "show one", method: "GET", path: "/v1/dead-letters/a", wantStatus: 200, wantBody: `"body":{"to":"ada"}`,
			wantCall: `Get id="a" source="" limit=0`},
		{name: "show one from its source", method: "GET", path: "/v1/dead-letters/a?source=email-queue", wantStatus: 200,
			wantBody: `"id":"a"`, wantCall: `Get id="a" source="p.email-queue" limit=0`},
		{name: "show one recipient's copy", method: "GET", path: "/v1/dead-letters/s?recipient=typo@exmaple.com", wantStatus: 200,
			wantBody: `"recipient":"typo@exmaple.com"`, wantCall: `Get id="s" source="" limit=0 recipient="typo@exmaple.com"`},
		{name: "show a recipient with nothing parked", method: "GET", path: "/v1/dead-letters/s?recipient=nobody@example.com", wantStatus: 404,
			wantType: ProblemNotFound, wantBody: `message \"s\" for \"nobody@example.com\": not in the dead-letter queue`,
			wantCall: `Get id="s" source="" limit=0 recipient="nobody@example.com"`},
		{name: "show unknown id", method: "GET", path: "/v1/dead-letters/zzz", wantStatus: 404, wantType: ProblemNotFound,
			wantBody: `message \"zzz\": not in the dead-letter queue`, wantCall: `Get id="zzz" source="" limit=0`},
		{name: "show from the wrong source", method: "GET", path: "/v1/dead-letters/a?source=webhook-queue", wantStatus: 404,
			wantType: ProblemNotFound, wantCall: `Get id="a" source="p.webhook-queue" limit=0`},
		{name: "show takes no limit", method: "GET", path: "/v1/dead-letters/a?limit=1", wantStatus: 422, wantType: ProblemInvalidQuery,
			wantBody: `{"field":"limit","message":"unknown parameter: this route takes recipient or source"}`},
		{name: "an id that reads like a verb", method: "GET", path: "/v1/dead-letters/purge", wantStatus: 404, wantType: ProblemNotFound,
			wantCall: `Get id="purge" source="" limit=0`},
		{name: "show error", method: "GET", path: "/v1/dead-letters/a", storeErr: errors.New("boom"), wantStatus: 503,
			wantType: ProblemBrokerUnavailable, wantBody: "could not be read: boom", wantCall: `Get id="a" source="" limit=0`},

		{name: "delete one", method: "DELETE", path: "/v1/dead-letters/a", wantStatus: 200, wantBody: `{"purged":1}`,
			wantCall: `Purge id="a" source="" limit=0`},
		{name: "delete one recipient's copy", method: "DELETE", path: "/v1/dead-letters/s?recipient=typo@exmaple.com&source=email-queue",
			wantStatus: 200, wantBody: `{"purged":1}`, wantCall: `Purge id="s" source="p.email-queue" limit=0 recipient="typo@exmaple.com"`},
		{name: "delete unknown id", method: "DELETE", path: "/v1/dead-letters/zzz", wantStatus: 404, wantType: ProblemNotFound,
			wantBody: "zzz", wantCall: `Purge id="zzz" source="" limit=0`},
		{name: "delete with a bad parameter", method: "DELETE", path: "/v1/dead-letters/a?all=true", wantStatus: 422,
			wantType: ProblemInvalidQuery, wantBody: `"field":"all"`},
		{name: "a ';' never widens a delete to every source", method: "DELETE", path: "/v1/dead-letters/a?source=email-queue;", wantStatus: 422,
			wantType: ProblemInvalidQuery, wantBody: `"field":"query","message":"a ';'`},
		{name: "a bad escape never widens a delete", method: "DELETE", path: "/v1/dead-letters/a?recipient=%zz", wantStatus: 422,
			wantType: ProblemInvalidQuery, wantBody: `"field":"query"`},
		{name: "a ';' never widens a replay", method: "POST", path: "/v1/dead-letters/a/replay?recipient=typo@exmaple.com;", wantStatus: 422,
			wantType: ProblemInvalidQuery, wantBody: `"field":"query"`},
		{name: "a ';' hides no unknown parameter from a list", method: "GET", path: "/v1/dead-letters?bogus=1;x", wantStatus: 422,
			wantType: ProblemInvalidQuery, wantBody: `"field":"query"`},

		{name: "purge by source", method: "POST", path: "/v1/dead-letters/purge", body: `{"source":"email-queue","confirm":true}`,
			wantStatus: 200, wantBody: `{"purged":3}`, wantCall: `Purge id="" source="p.email-queue" limit=0`},
		{name: "purge by id", method: "POST", path: "/v1/dead-letters/purge", body: `{"id":"b","confirm":true}`,
			wantStatus: 200, wantBody: `{"purged":1}`, wantCall: `Purge id="b" source="" limit=0`},
		{name: "purge by id and recipient", method: "POST", path: "/v1/dead-letters/purge", body: `{"id":"s","recipient":"full@example.com","confirm":true}`,
			wantStatus: 200, wantBody: `{"purged":1}`, wantCall: `Purge id="s" source="" limit=0 recipient="full@example.com"`},
		{name: "purge by recipient alone", method: "POST", path: "/v1/dead-letters/purge", body: `{"recipient":"typo@exmaple.com","confirm":true}`,
			wantStatus: 200, wantBody: `{"purged":1}`, wantCall: `Purge id="" source="" limit=0 recipient="typo@exmaple.com"`},
		{name: "purge recipient and all", method: "POST", path: "/v1/dead-letters/purge", body: `{"recipient":"typo@exmaple.com","all":true,"confirm":true}`,
			wantStatus: 422, wantType: ProblemInvalidFields,
			wantBody: `{"field":"all","message":"all selects every parked message: leave out source, id, recipient, channel, reason, endpoint, since, until, error or tenant, or leave out all"}`},
		{name: "purge all", method: "POST", path: "/v1/dead-letters/purge", body: `{"all":true,"confirm":true}`,
			wantStatus: 200, wantBody: `{"purged":4}`, wantCall: `Purge id="" source="" limit=0`},
		{name: "purge without confirm", method: "POST", path: "/v1/dead-letters/purge", body: `{"all":true}`,
			wantStatus: 422, wantType: ProblemInvalidFields, wantBody: `{"field":"confirm","message":"must be true`},
		{name: "purge with confirm false", method: "POST", path: "/v1/dead-letters/purge", body: `{"source":"email-queue","confirm":false}`,
			wantStatus: 422, wantType: ProblemInvalidFields, wantBody: `"field":"confirm"`},
		{name: "purge with confirm not a boolean", method: "POST", path: "/v1/dead-letters/purge", body: `{"all":true,"confirm":"yes"}`,
			wantStatus: 422, wantType: ProblemInvalidFields, wantBody: `{"field":"confirm","message":"true or false, not a JSON string"}`},
		{name: "purge source and all", method: "POST", path: "/v1/dead-letters/purge", body: `{"source":"email-queue","all":true,"confirm":true}`,
			wantStatus: 422, wantType: ProblemInvalidFields, wantBody: `"field":"all"`},
		{name: "purge needs a selection and confirm", method: "POST", path: "/v1/dead-letters/purge", body: `{}`,
			wantStatus: 422, wantType: ProblemInvalidFields, wantBody: `"errors":[{"field":"source","message":"name a source queue, an id, a recipient, a channel, a reason, an endpoint, a time range or an error, or set all to true"},{"field":"confirm"`},
		{name: "purge an empty body", method: "POST", path: "/v1/dead-letters/purge", wantStatus: 422, wantType: ProblemInvalidFields,
			wantBody: `"field":"confirm"`},
		{name: "purge unknown id", method: "POST", path: "/v1/dead-letters/purge", body: `{"id":"zzz","confirm":true}`,
			wantStatus: 404, wantType: ProblemNotFound, wantBody: "zzz", wantCall: `Purge id="zzz" source="" limit=0`},
		{name: "purge unknown field", method: "POST", path: "/v1/dead-letters/purge", body: `{"everything":true,"confirm":true}`,
			wantStatus: 400, wantType: ProblemUnknownField, wantBody: `unknown field \"everything\": the request takes source, id, recipient, channel, reason, endpoint, since, until, error, tenant or all, and confirm or dry_run`},
		{name: "purge not JSON", method: "POST", path: "/v1/dead-letters/purge", body: `all`,
			wantStatus: 400, wantType: ProblemMalformedJSON},
		{name: "purge error", method: "POST", path: "/v1/dead-letters/purge", body: `{"all":true,"confirm":true}`, storeErr: errors.New("boom"),
			wantStatus: 503, wantType: ProblemBrokerUnavailable, wantBody: "purged 4 before an error: boom", wantCall: `Purge id="" source="" limit=0`},

		{name: "replay one", method: "POST", path: "/v1/dead-letters/a/replay", wantStatus: 200, wantBody: `{"replayed":1}`,
			wantCall: `Replay id="a" source="" limit=0`},
		{name: "replay one from its source", method: "POST", path: "/v1/dead-letters/a/replay?source=email-queue", wantStatus: 200,
			wantBody: `{"replayed":1}`, wantCall: `Replay id="a" source="p.email-queue" limit=0`},
		{name: "replay one recipient's copy", method: "POST", path: "/v1/dead-letters/s/replay?recipient=typo@exmaple.com", wantStatus: 200,
			wantBody: `{"replayed":1}`, wantCall: `Replay id="s" source="" limit=0 recipient="typo@exmaple.com"`},
		{name: "replay unknown id", method: "POST", path: "/v1/dead-letters/zzz/replay", wantStatus: 404, wantType: ProblemNotFound,
			wantBody: "zzz", wantCall: `Replay id="zzz" source="" limit=0`},
		{name: "replay one with a bad parameter", method: "POST", path: "/v1/dead-letters/a/replay?sorce=email-queue", wantStatus: 422,
			wantType: ProblemInvalidQuery, wantBody: `"field":"sorce"`},
		{name: "replay by source", method: "POST", path: "/v1/dead-letters/replay", body: `{"source":"email-queue"}`, wantStatus: 200,
			wantBody: `{"replayed":3}`, wantCall: `Replay id="" source="p.email-queue" limit=0`},
		{name: "replay by unknown id", method: "POST", path: "/v1/dead-letters/replay", body: `{"id":"zzz"}`, wantStatus: 404,
			wantType: ProblemNotFound, wantBody: "zzz", wantCall: `Replay id="zzz" source="" limit=0`},
		{name: "replay by id, source and recipient", method: "POST", path: "/v1/dead-letters/replay",
			body: `{"id":"s","source":"email-queue","recipient":"typo@exmaple.com"}`, wantStatus: 200, wantBody: `{"replayed":1}`,
			wantCall: `Replay id="s" source="p.email-queue" limit=0 recipient="typo@exmaple.com"`},
		{name: "replay by recipient alone", method: "POST", path: "/v1/dead-letters/replay", body: `{"recipient":"full@example.com"}`,
			wantStatus: 200, wantBody: `{"replayed":1}`, wantCall: `Replay id="" source="" limit=0 recipient="full@example.com"`},
		{name: "replay a recipient with nothing parked", method: "POST", path: "/v1/dead-letters/replay", body: `{"id":"s","recipient":"nobody@example.com"}`,
			wantStatus: 404, wantType: ProblemNotFound, wantBody: `for \"nobody@example.com\"`,
			wantCall: `Replay id="s" source="" limit=0 recipient="nobody@example.com"`},
		{name: "replay recipient not a string", method: "POST", path: "/v1/dead-letters/replay", body: `{"recipient":1}`, wantStatus: 422,
			wantType: ProblemInvalidFields, wantBody: `{"field":"recipient","message":"a string, not a JSON number"}`},
		{name: "replay all", method: "POST", path: "/v1/dead-letters/replay", body: `{"all":true}`, wantStatus: 200,
			wantBody: `{"replayed":4}`, wantCall: `Replay id="" source="" limit=0`},
		{name: "replay source and all", method: "POST", path: "/v1/dead-letters/replay", body: `{"source":"email-queue","all":true}`,
			wantStatus: 422, wantType: ProblemInvalidFields, wantBody: `"field":"all"`},
		{name: "replay needs a filter", method: "POST", path: "/v1/dead-letters/replay", body: `{}`, wantStatus: 422,
			wantType: ProblemInvalidFields, wantBody: `"field":"source"`},
		{name: "replay takes no confirm", method: "POST", path: "/v1/dead-letters/replay", body: `{"all":true,"confirm":true}`,
			wantStatus: 400, wantType: ProblemUnknownField, wantBody: "confirm"},
		{name: "list by channel", method: "GET", path: "/v1/dead-letters?channel=webhook", wantStatus: 200, wantBody: `"id":"b"`,
			wantCall: `List id="" source="" limit=50 route="webhook"`},
		{name: "list by an unknown channel", method: "GET", path: "/v1/dead-letters?channel=fax", wantStatus: 422, wantType: ProblemInvalidQuery,
			wantBody: `{"field":"channel","message":"no channel \"fax\": one of email or webhook"}`},
		{name: "list by reason and error text", method: "GET", path: "/v1/dead-letters?reason=permanent&error=Timeout", wantStatus: 200,
			wantCall: `List id="" source="" limit=50 reason="permanent" error="Timeout"`},
		{name: "list by an unknown reason", method: "GET", path: "/v1/dead-letters?reason=tired", wantStatus: 422, wantType: ProblemInvalidQuery,
			wantBody: `"field":"reason","message":"no park reason \"tired\": one of max-retries, permanent`},
		{name: "list by a parked-at range", method: "GET", path: "/v1/dead-letters?since=2026-01-02T00:00:00Z&until=2026-01-03T00:00:00%2B01:00",
			wantStatus: 200, wantCall: `List id="" source="" limit=50 parked=[2026-01-02T00:00:00Z,2026-01-03T00:00:00+01:00)`},
		{name: "since not a time", method: "GET", path: "/v1/dead-letters?since=yesterday", wantStatus: 422, wantType: ProblemInvalidQuery,
			wantBody: `{"field":"since","message":"an RFC 3339 time such as 2026-03-14T09:26:53Z, not \"yesterday\""}`},
		{name: "until not after since", method: "POST", path: "/v1/dead-letters/replay", body: `{"since":"2026-01-02T00:00:00Z","until":"2026-01-01T00:00:00Z"}`,
			wantStatus: 422, wantType: ProblemInvalidFields, wantBody: `{"field":"until","message":"must be after since"}`},
		{name: "endpoint not an endpoint id", method: "POST", path: "/v1/dead-letters/replay", body: `{"endpoint":"https://example.com"}`,
			wantStatus: 422, wantType: ProblemInvalidFields, wantBody: `"field":"endpoint"`},
		{name: "purge by endpoint", method: "POST", path: "/v1/dead-letters/purge", body: `{"endpoint":"ep_3kq7ymzd5vbxw2n4c6f7h2j4la","confirm":true}`,
			wantStatus: 200, wantBody: `{"purged":0}`, wantCall: `Purge id="" source="" limit=0 where`},
		{name: "replay by channel and reason", method: "POST", path: "/v1/dead-letters/replay", body: `{"channel":"email","reason":"permanent"}`,
			wantStatus: 200, wantBody: `{"replayed":2}`, wantCall: `Replay id="" source="" limit=0 route="email" reason="permanent"`},
		{name: "replay dry run", method: "POST", path: "/v1/dead-letters/replay", body: `{"channel":"email","dry_run":true}`,
			wantStatus: 200, wantBody: `{"dry_run":true,"matched":3}`, wantCall: `Count id="" source="" limit=0 route="email"`},
		{name: "purge dry run needs no confirm", method: "POST", path: "/v1/dead-letters/purge", body: `{"all":true,"dry_run":true}`,
			wantStatus: 200, wantBody: `{"dry_run":true,"matched":4}`, wantCall: `Count id="" source="" limit=0`},
		{name: "a dry run still needs a selection", method: "POST", path: "/v1/dead-letters/purge", body: `{"dry_run":true}`,
			wantStatus: 422, wantType: ProblemInvalidFields, wantBody: `"field":"source"`},
		{name: "replay into a queue that is not relay's", method: "POST", path: "/v1/dead-letters/a/replay",
			storeErr:   fmt.Errorf("message %q: source %q is %w: it stays parked", "a", "victim", retry.ErrNotDestination),
			wantStatus: 409, wantType: ProblemNotDestination, wantBody: `"victim`, wantCall: `Replay id="a" source="" limit=0`},
		{name: "replay bad body", method: "POST", path: "/v1/dead-letters/replay", body: `{"everything":1}`, wantStatus: 400,
			wantType: ProblemUnknownField, wantBody: "everything"},
		{name: "replay all with a wrong type", method: "POST", path: "/v1/dead-letters/replay", body: `{"all":1}`, wantStatus: 422,
			wantType: ProblemInvalidFields, wantBody: `{"field":"all","message":"true or false, not a JSON number"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &fakeStore{err: tt.storeErr}
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+deadLetterToken)
			rec := httptest.NewRecorder()
			deadLetterServer(store, tt.noStore).ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%s %s = %d %s, want %d containing %q", tt.method, tt.path, rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}
			var want []string
			if tt.wantCall != "" {
				want = []string{tt.wantCall}
			}
			if diff := cmp.Diff(want, store.calls); diff != "" {
				t.Errorf("store calls (-want +got):\n%s", diff)
			}
			if rec.Code < 400 {
				return
			}
			var p Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Header().Get("Content-Type") != ProblemContentType {
				t.Fatalf("error answered as %q: %s", rec.Header().Get("Content-Type"), rec.Body)
			}
			if p.Type != tt.wantType || p.Status != tt.wantStatus {
				t.Errorf("problem %s %d, want %s %d", p.Type, p.Status, tt.wantType, tt.wantStatus)
			}
		})
	}
}

// TestShowDeadLetter: GET /v1/dead-letters/{id} answers every parked copy
// with the id, in full: a JSON body as JSON, any other as base64 with its
// content type, and never from a cache.
func TestShowDeadLetter(t *testing.T) {
	store := &fakeStore{parked: []retry.DeadLetter{
		{ID: "n1", Source: "p.email-queue", Reason: retry.ReasonMaxRetries, Retries: 4, Replays: 1, PriorRetries: 5, PriorError: "503",
			LastError: "timeout", ContentType: "application/json", Body: []byte(`{"to":"ada"}`),
			Headers: map[string]any{retry.HeaderDeadSource: "p.email-queue", "tenant": []byte("acme")}},
		{ID: "n1", Source: "p.webhook-queue", Reason: retry.ReasonPermanent, ContentType: "application/octet-stream", Body: []byte{0xff, 0x00}},
		{ID: "n2", Source: "p.email-queue"},
	}}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/v1/dead-letters/n1", nil)
	req.Header.Set("Authorization", "Bearer "+deadLetterToken)
	deadLetterServer(store, false).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("status %d, Cache-Control %q: %s", rec.Code, rec.Header().Get("Cache-Control"), rec.Body)
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "n1", "dead_letters": []any{
		map[string]any{"id": "n1", "source": "p.email-queue", "reason": "max-retries", "retries": 4.0, "replays": 1.0,
			"prior_retries": 5.0, "prior_error": "503", "last_error": "timeout", "content_type": "application/json",
			"headers": map[string]any{"x-dead-source": "p.email-queue", "tenant": "acme"}, "size": 12.0,
			"body": map[string]any{"to": "ada"}},
		map[string]any{"id": "n1", "source": "p.webhook-queue", "reason": "permanent", "retries": 0.0, "replays": 0.0,
			"content_type": "application/octet-stream", "headers": map[string]any{}, "size": 2.0, "body_base64": "/wA="},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /v1/dead-letters/n1 (-want +got):\n%s", diff)
	}
}

func TestDeadLetterRoutesNeedAuth(t *testing.T) {
	srv := deadLetterServer(&fakeStore{}, false)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/dead-letters"},
		{http.MethodGet, "/v1/dead-letters/a"},
		{http.MethodDelete, "/v1/dead-letters/a"},
		{http.MethodPost, "/v1/dead-letters/a/replay"},
		{http.MethodPost, "/v1/dead-letters/replay"},
		{http.MethodPost, "/v1/dead-letters/purge"},
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(r.method, r.path, strings.NewReader(`{"all":true,"confirm":true}`)))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusUnauthorized || body["status"] != float64(401) {
			t.Errorf("%s %s without a token = %d %v", r.method, r.path, rec.Code, body)
		}
	}
}
