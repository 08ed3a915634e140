package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/channel"
)

// FuzzDecodeRequest checks that the decoder never panics and that every
// body ends as a valid notification or as a client error: 400, 413 or
// 422, never anything else.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		bothParts,
		`{` + emailPart + `}`,
		`{` + webhookPart + `}`,
		``,
		`null`,
		`{}`,
		`[]`,
		`{"email":`,
		`{"id":"x",` + emailPart + `}`,
		bothParts + `{}`,
		`{"email":{"to":[1],"subject":{},"text":null}}`,
		`{"webhook":{"url":"http://[::1]:80/x","payload":"` + strings.Repeat("a", 300) + `"}}`,
		`{"email":{"to":["a@b.c"],"subject":"s\r\nBcc: x@y.z","html":"<p>"}}`,
		"{\"webhook\":{\"url\":\"https://example.com\",\"payload\":{\"\xff\":1}}}",
		nestedWebhook(MaxDepth+1, "[", "]"),
		nestedWebhook(MaxDepth, `{"\\\"[":`, "}"),
	} {
		f.Add([]byte(seed))
	}
	const limit = 256
	channels := channel.Builtin()
	req := newRequest(channels)
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := req.decodeRequest(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), limit))
		if (n == nil) == (err == nil) {
			t.Fatalf("decodeRequest = %v, %v: want exactly one of them", n, err)
		}
		if err != nil {
			var p *Problem
			if !errors.As(err, &p) {
				t.Fatalf("error %v (%T) is not a *Problem", err, err)
			}
			switch p.Status {
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			case http.StatusUnprocessableEntity:
				if len(p.Errors) == 0 {
					t.Fatalf("422 without fields: %+v", p)
				}
			default:
				t.Fatalf("status %d for a client's body: %+v", p.Status, p)
			}
			if p.Type == "" || p.Title == "" {
				t.Fatalf("problem without type or title: %+v", p)
			}
			return
		}
		if len(body) > limit {
			t.Fatalf("a body of %d bytes passed a limit of %d", len(body), limit)
		}
		if err := channels.Check(n); err != nil {
			t.Fatalf("decoded an invalid notification: %v", err)
		}
		if len(n.Channels()) == 0 || n.V != 1 {
			t.Fatalf("decoded %+v", n)
		}
	})
}

// nestedWebhook is a request whose JSON nests levels deep: the request
// object and its webhook part are two levels, the payload the rest, made
// of open and close.
func nestedWebhook(levels int, open, close string) string {
	return `{"webhook":{"url":"https://example.com/hook","payload":` + strings.Repeat(open, levels-2) + `1` + strings.Repeat(close, levels-2) + `}}`
}

// TestNestingDepth: a request that nests MaxDepth levels deep is taken;
// one level more is a 400 that says so, on POST /v1/notifications and as
// an item of a batch, whatever nests, up to the 9,998 levels of a payload
// encoding/json alone would take (and the history could not read back).
// Brackets in strings are text, not nesting.
func TestNestingDepth(t *testing.T) {
	quoted := `"` + strings.Repeat(`[{\"`, 100) + `"`
	tests := []struct {
		name   string
		body   string
		status int
		// batch is the status of a batch of this request and another, when
		// it refuses the batch whole; 0 when it answers for each item.
		batch int
	}{
		{"arrays at the limit", nestedWebhook(MaxDepth, "[", "]"), http.StatusAccepted, 0},
		{"objects at the limit", nestedWebhook(MaxDepth, `{"a":`, "}"), http.StatusAccepted, 0},
		{"brackets in strings", `{"webhook":{"url":"https://example.com/hook","payload":{` + quoted + `:[` + quoted + `]}}}`, http.StatusAccepted, 0},
		{"arrays past the limit", nestedWebhook(MaxDepth+1, "[", "]"), http.StatusBadRequest, 0},
		{"objects past the limit", nestedWebhook(MaxDepth+1, `{"a":`, "}"), http.StatusBadRequest, 0},
		// A batch nests its items two levels deeper: encoding/json refuses it.
		{"as deep as encoding/json goes", nestedWebhook(10_000, "[", "]"), http.StatusBadRequest, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) { countingIDs(d) })
			rec := call(h, http.MethodPost, "/v1/notifications", tt.body, nil)
			if rec.Code != tt.status {
				t.Fatalf("POST /v1/notifications = %d %s, want %d", rec.Code, rec.Body, tt.status)
			}
			if tt.status == http.StatusBadRequest && (!strings.Contains(rec.Body.String(), ProblemMalformedJSON) ||
				!strings.Contains(rec.Body.String(), fmt.Sprintf("nested more than %d levels deep", MaxDepth))) {
				t.Errorf("answer %s, want a malformed-json problem naming the limit", rec.Body)
			}
			rec = call(h, http.MethodPost, "/v1/notifications/batch", batchOf(tt.body, emailOnly), nil)
			if tt.batch != 0 {
				if rec.Code != tt.batch {
					t.Errorf("the batch = %d %s, want %d", rec.Code, rec.Body, tt.batch)
				}
				return
			}
			want := []string{"202", "202"}
			if tt.status != http.StatusAccepted {
				want[0] = "400"
			}
			var got struct {
				Results []struct {
					ID     string
					Status int
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("batch answer %s: %v", rec.Body, err)
			}
			var statuses []string
			for _, r := range got.Results {
				if r.ID != "" {
					r.Status = http.StatusAccepted
				}
				statuses = append(statuses, fmt.Sprint(r.Status))
			}
			if diff := cmp.Diff(want, statuses); diff != "" {
				t.Errorf("batch items' statuses (-want +got):\n%s", diff)
			}
		})
	}
}
