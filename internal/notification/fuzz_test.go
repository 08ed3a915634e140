package notification

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecode checks that Decode never panics, returns exactly one of a
// notification and an error, and that what it accepts survives the trip
// the pipeline gives it: encoded again by a replay, a decoded copy must
// decode again to the same encoding. The parts' own checks are fuzzed
// with their channels (internal/channel).
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"v":1,"id":"ntf_1","channel":"email","created_at":"2026-03-01T12:00:00Z","email":{"to":["ada@example.com"],"subject":"hi","text":"hello"}}`,
		`{"v":1,"id":"ntf_2","channel":"webhook","created_at":"2026-03-01T12:00:00Z","webhook":{"url":"https://example.com/hook","payload":{"a":[1,2,{"b":null}]}}}`,
		`{"v":1,"id":"ntf_3","email":{"to":["ada@example.com"],"subject":"s","html":"<p>&amp;</p>"},"webhook":{"url":"http://[::1]:8080/x","payload":"\u00e9"}}`,
		`{"v":2,"id":"ntf_4","email":{"to":["ada@example.com"],"subject":"s","text":"t"}}`,
		`{"v":1,"id":"","email":{"to":["ada@example.com"],"subject":"s","text":"t"}}`,
		`{"v":1,"id":"x","webhook":{"url":"https://example.com","payload":  {"spaced" : true}  }}`,
		`{"v":1,"id":"x","created_at":"not a time"}`,
		"{\"v\":1,\"id\":\"\xff\",\"email\":{\"to\":[\"a@b.c\"],\"subject\":\"\xfe\",\"text\":\"t\"}}",
		`{"v":1.0,"id":"x","email":null,"webhook":null}`,
		`{"v":1,"id":"x","channel":"sms","sms":"x"}`,
		``, `null`, `{}`, `[]`, `"v"`, `{"v":1`, `{"v":1,"id":"x","email":{"to":null}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := Decode(body)
		if (n == nil) == (err == nil) {
			t.Fatalf("Decode = %v, %v: want exactly one of them", n, err)
		}
		if err != nil {
			var inv Invalid
			if errors.As(err, &inv) && len(inv) == 0 {
				t.Fatalf("Decode: an Invalid error without fields")
			}
			return
		}
		if n.V != Version || n.ID == "" || len(n.ID) > MaxIDLength || len(n.Parts) == 0 {
			t.Fatalf("Decode accepted version %d, id %q, %d parts", n.V, n.ID, len(n.Parts))
		}
		again, err := json.Marshal(n)
		if err != nil {
			t.Fatalf("encode a decoded notification: %v", err)
		}
		m, err := Decode(again)
		if err != nil {
			t.Fatalf("a decoded notification, encoded again, no longer decodes: %v\n%s", err, again)
		}
		third, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, third) {
			t.Fatalf("encoding is not stable across a decode:\n%s\n%s", again, third)
		}
	})
}
