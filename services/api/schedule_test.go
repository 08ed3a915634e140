package api

import (
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/retry"
)

func TestSchedule(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	str := func(s string) *string { return &s }
	routes := []retry.Route{{Queue: "webhook-queue", Key: "webhook"}}
	levels := retry.Topology{Routes: routes, Backend: retry.Levels}
	ttl := retry.Topology{Routes: routes, Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{5 * time.Second, time.Minute}}}
	native := retry.Topology{Routes: routes, Backend: retry.Native, QueueType: retry.Quorum, Policy: retry.Policy{Delays: []time.Duration{time.Second, 2 * time.Second}}}
	tests := []struct {
		name    string
		topo    retry.Topology
		w       when
		due     time.Time
		rounded bool
		field   string // the field a 422 names; empty for none
		detail  string
	}{
		{name: "at once", topo: levels},
		{name: "send_at", topo: levels, w: when{SendAt: str("2026-11-27T09:30:00.250Z")}, due: now.Add(30*time.Minute + 250*time.Millisecond)},
		{name: "send_at with an offset", topo: levels, w: when{SendAt: str("2026-11-27T10:00:00+01:00")}, field: "send_at", detail: "not in the future"},
		{name: "delay", topo: levels, w: when{Delay: str("90s")}, due: now.Add(90 * time.Second)},
		{name: "both", topo: levels, w: when{SendAt: str("2026-11-27T09:30:00Z"), Delay: str("1m")}, field: "delay", detail: "not both"},
		{name: "send_at not a time", topo: levels, w: when{SendAt: str("tomorrow")}, field: "send_at", detail: "RFC 3339"},
		{name: "send_at in the past", topo: levels, w: when{SendAt: str("2026-11-27T08:59:59Z")}, field: "send_at", detail: "not in the future"},
		{name: "send_at too far", topo: levels, w: when{SendAt: str("2026-12-27T09:00:01Z")}, field: "send_at", detail: "more than"},
		{name: "send_at 30 days", topo: levels, w: when{SendAt: str("2026-12-27T09:00:00Z")}, due: now.Add(MaxSchedule)},
		{name: "delay not a duration", topo: levels, w: when{Delay: str("soon")}, field: "delay", detail: "not a duration"},
		{name: "delay negative", topo: levels, w: when{Delay: str("-5s")}, field: "delay", detail: "not a positive"},
		// Every backend waits exactly: ttl and native through the delay
		// levels they declare beside their own waits.
		{name: "ttl, between its steps", topo: ttl, w: when{Delay: str("2s")}, due: now.Add(2 * time.Second)},
		{name: "ttl, a step", topo: ttl, w: when{Delay: str("1m")}, due: now.Add(time.Minute)},
		{name: "ttl past its longest step", topo: ttl, w: when{Delay: str("2m")}, due: now.Add(2 * time.Minute)},
		{name: "native", topo: native, w: when{Delay: str("1m")}, due: now.Add(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, p := schedule(tt.topo, tt.w, now)
			if tt.field != "" {
				if p == nil || p.Status != 422 || len(p.Errors) != 1 || p.Errors[0].Field != tt.field || !strings.Contains(p.Errors[0].Message, tt.detail) {
					t.Fatalf("problem = %+v, want a 422 naming %s, saying %q", p, tt.field, tt.detail)
				}
				return
			}
			if p != nil {
				t.Fatalf("problem = %+v", p)
			}
			if !s.due.Equal(tt.due) || (s.rounded != "") != tt.rounded {
				t.Errorf("schedule = %+v, want due %s, rounded %v", s, tt.due, tt.rounded)
			}
		})
	}
}

// TestFingerprintTiming: a repeat with the same Idempotency-Key and
// another send_at or delay is another request (a 422), not a repeat.
func TestFingerprintTiming(t *testing.T) {
	str := func(s string) *string { return &s }
	n, err := newRequest(channel.Builtin()).decodeRequest(strings.NewReader(`{"webhook":{"url":"https://hooks.example/a","payload":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	at := func(w when) string { return string(fingerprint(n, w)) }
	if at(when{}) != at(when{}) || at(when{SendAt: str("2026-12-01T09:30:00Z")}) != at(when{SendAt: str("2026-12-01T09:30:00Z")}) {
		t.Error("the same request fingerprints differently")
	}
	seen := map[string]string{}
	for name, w := range map[string]when{"at once": {}, "send_at": {SendAt: str("2026-12-01T09:30:00Z")},
		"another send_at": {SendAt: str("2026-12-01T09:31:00Z")}, "delay": {Delay: str("90s")}, "another delay": {Delay: str("91s")}} {
		if other, ok := seen[at(w)]; ok {
			t.Errorf("%s and %s fingerprint the same", name, other)
		}
		seen[at(w)] = name
	}
}
