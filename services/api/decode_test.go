package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

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
	} {
		f.Add([]byte(seed))
	}
	const limit = 256
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := decodeRequest(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), limit))
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
		if err := channel.Check(n); err != nil {
			t.Fatalf("decoded an invalid notification: %v", err)
		}
		if len(n.Channels()) == 0 || n.V != 1 {
			t.Fatalf("decoded %+v", n)
		}
	})
}
