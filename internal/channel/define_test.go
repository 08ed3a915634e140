package channel_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/worker"
)

// ProbePart is the part of the throw-away channel the tests define: what
// a channel of your own looks like, down to its schema.
type ProbePart struct {
	Code string `json:"code"`
}

// probe is a channel defined as docs/template.md says, registered for one
// test. Its sender records what it was given and fails the first
// failures calls, a transient failure the pipeline retries.
type probe struct {
	channel.Channel
	mu       sync.Mutex
	sent     []string
	failures int
}

func newProbe(failures int) *probe {
	p := &probe{failures: failures}
	p.Channel = channel.Define(channel.Spec[ProbePart]{
		Name:    "probe",
		Summary: "record codes, for the tests",
		Check: func(part *ProbePart, bad func(field, format string, args ...any)) {
			if len(part.Code) != 4 {
				bad("code", "four characters, got %d", len(part.Code))
			}
		},
		Recipients: func(part *ProbePart) []string { return []string{"probe:" + part.Code} },
		Schema:     `{"type": "object", "required": ["code"], "additionalProperties": false, "properties": {"code": {"type": "string", "minLength": 4, "maxLength": 4}}}`,
		Open: func(getenv func(string) string) (channel.Send[ProbePart], func() error, error) {
			return func(ctx context.Context, id string, part *ProbePart) error {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.sent = append(p.sent, id+" "+part.Code)
				if p.failures > 0 {
					p.failures--
					return errProbeDown
				}
				return nil
			}, func() error { return nil }, nil
		},
	})
	return p
}

var errProbeDown = &probeError{"the probe downstream is down"}

type probeError struct{ msg string }

func (e *probeError) Error() string { return e.msg }

func (p *probe) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sent)
}

// TestDefinedChannelIsEverywhere registers a channel and checks that every
// place that lists channels lists it, and forgets it once unregistered.
func TestDefinedChannelIsEverywhere(t *testing.T) {
	p := newProbe(0)
	unregister := channel.Register(p.Channel)
	registered := true
	defer func() {
		if registered {
			unregister()
		}
	}()

	if !slices.Contains(channel.Names(), "probe") {
		t.Errorf("Names() = %v, want probe in it", channel.Names())
	}
	if !slices.ContainsFunc(channel.Routes(), func(r retry.Route) bool { return r.Queue == "probe-queue" && r.Key == "probe" }) {
		t.Errorf("Routes() = %v, want probe-queue bound with key probe", channel.Routes())
	}
	if !slices.ContainsFunc(worker.Channels(), func(i worker.Info) bool { return i.Name == "probe" }) {
		t.Errorf("worker.Channels() = %v, want the probe worker", worker.Channels())
	}
	doc := string(api.OpenAPI())
	for _, want := range []string{`"probe": {`, `"$ref": "#/components/schemas/Probe"`, `"Probe": {`} {
		if !strings.Contains(doc, want) {
			t.Errorf("the OpenAPI document has no %s", want)
		}
	}
	var d any
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Errorf("the OpenAPI document is not JSON: %v", err)
	}

	good := &notification.Notification{V: 1, ID: "n1", Parts: map[string]json.RawMessage{"probe": json.RawMessage(`{"code":"1234"}`)}}
	if err := channel.Check(good); err != nil {
		t.Errorf("Check(a good probe part) = %v", err)
	}
	if got := channel.RecipientsOf(good, "probe"); !slices.Equal(got, []string{"probe:1234"}) {
		t.Errorf("RecipientsOf = %v, want [probe:1234]", got)
	}
	bad := &notification.Notification{V: 1, ID: "n2", Parts: map[string]json.RawMessage{"probe": json.RawMessage(`{"code":"12"}`)}}
	err := channel.Check(bad)
	var inv notification.Invalid
	if !errors.As(err, &inv) || len(inv) != 1 || inv[0].Field != "probe.code" {
		t.Errorf("Check(a short code) = %v, want one error on probe.code", err)
	}

	unregister()
	registered = false
	if slices.Contains(channel.Names(), "probe") || strings.Contains(string(api.OpenAPI()), `"Probe"`) {
		t.Error("the probe channel outlived its unregister")
	}
	if err := channel.Check(good); err == nil {
		t.Error("Check accepted a part of an unregistered channel")
	}
}

// TestDefineRefusesBrokenSpecs checks the programming errors Define
// catches at once.
func TestDefineRefusesBrokenSpecs(t *testing.T) {
	open := func(func(string) string) (channel.Send[ProbePart], func() error, error) { return nil, nil, nil }
	check := func(*ProbePart, func(string, string, ...any)) {}
	for name, spec := range map[string]channel.Spec[ProbePart]{
		"no name":          {Check: check, Open: open, Schema: `{}`},
		"an envelope name": {Name: "id", Check: check, Open: open, Schema: `{}`},
		"upper case":       {Name: "Probe", Check: check, Open: open, Schema: `{}`},
		"no check":         {Name: "probe", Open: open, Schema: `{}`},
		"no open":          {Name: "probe", Check: check, Schema: `{}`},
		"schema not JSON":  {Name: "probe", Check: check, Open: open, Schema: `{`},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Define accepted it")
				}
			}()
			channel.Define(spec)
		})
	}
	t.Run("registered twice", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("Register accepted a second email channel")
			}
		}()
		channel.Register(channel.Email)
	})
}

// TestLaneKey: what picks a copy's lane is its receiver: a recipient of a
// copy per recipient, a webhook's endpoint, the host of a bare URL (any
// spelling of it, any path), and the notification's id when the part
// names nobody.
func TestLaneKey(t *testing.T) {
	n := &notification.Notification{ID: "ntf_1", Parts: map[string]json.RawMessage{
		"webhook": json.RawMessage(`{"url":"https://Hooks.Example.:8443/a?b=1","payload":{}}`)}}
	if got := channel.LaneKey(n, "webhook", ""); got != "host hooks.example" {
		t.Errorf("bare URL: %q, want host hooks.example", got)
	}
	n.Parts["webhook"] = json.RawMessage(`{"endpoint":"ep_3kq7ymzd5vbxw2n4c6f7h2j4la","payload":{}}`)
	if got := channel.LaneKey(n, "webhook", ""); got != "ep_3kq7ymzd5vbxw2n4c6f7h2j4la" {
		t.Errorf("endpoint: %q", got)
	}
	if got := channel.LaneKey(n, "email", "ada@example.com"); got != "ada@example.com" {
		t.Errorf("a copy's recipient: %q", got)
	}
	if got := channel.LaneKey(n, "nothing", ""); got != "ntf_1" {
		t.Errorf("a part naming nobody: %q, want the id", got)
	}
}
