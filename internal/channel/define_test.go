package channel_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/api"
)

// ProbePart is the part of the throw-away channel the tests define: what
// a channel of your own looks like, down to its schema.
type ProbePart struct {
	Code string `json:"code"`
}

// probe is a channel defined as docs/template.md says, added to relay's
// own in a Set of the test's. Its sender records what it was given and fails the first
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
		Open: func(getenv func(string) string, _ channel.Store) (channel.Send[ProbePart], func() error, error) {
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

// TestDefinedChannelIsEverywhere adds a channel to a Set and checks that
// every place that lists the set's channels lists it, and that relay's
// own set knows nothing of it.
func TestDefinedChannelIsEverywhere(t *testing.T) {
	p := newProbe(0)
	set := channel.Builtin().With(p.Channel)

	if diff := cmp.Diff([]string{"email", "webhook", "sms", "probe"}, set.Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}
	if !slices.ContainsFunc(set.Routes(), func(r retry.Route) bool { return r.Queue == "probe-queue" && r.Key == "probe" }) {
		t.Errorf("Routes() = %v, want probe-queue bound with key probe", set.Routes())
	}
	if c, err := set.Lookup("probe"); err != nil || c.Name() != "probe" {
		t.Errorf("Lookup(probe) = %v, %v", c.Name(), err)
	}
	doc := string(api.OpenAPI(set))
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
	if err := set.Check(good); err != nil {
		t.Errorf("Check(a good probe part) = %v", err)
	}
	if got := set.RecipientsOf(good, "probe"); !slices.Equal(got, []string{"probe:1234"}) {
		t.Errorf("RecipientsOf = %v, want [probe:1234]", got)
	}
	bad := &notification.Notification{V: 1, ID: "n2", Parts: map[string]json.RawMessage{"probe": json.RawMessage(`{"code":"12"}`)}}
	err := set.Check(bad)
	var inv notification.Invalid
	if !errors.As(err, &inv) || len(inv) != 1 || inv[0].Field != "probe.code" {
		t.Errorf("Check(a short code) = %v, want one error on probe.code", err)
	}

	builtin := channel.Builtin()
	if slices.Contains(builtin.Names(), "probe") || strings.Contains(string(api.OpenAPI(builtin)), `"Probe"`) {
		t.Error("relay's own channels hold the probe channel another set was given")
	}
	if _, err := builtin.Lookup("probe"); err == nil {
		t.Error("relay's own channels look up the probe channel")
	}
	if err := builtin.Check(good); err == nil {
		t.Error("Check accepted a part of a channel the set does not hold")
	}
}

// TestSet: a Set keeps its order, is not changed by With, and refuses two
// channels of one name.
func TestSet(t *testing.T) {
	builtin := channel.Builtin()
	if diff := cmp.Diff([]string{"email", "webhook", "sms"}, builtin.Names()); diff != "" {
		t.Errorf("Builtin().Names() (-want +got):\n%s", diff)
	}
	_ = builtin.With(newProbe(0).Channel)
	if diff := cmp.Diff([]string{"email", "webhook", "sms"}, builtin.Names()); diff != "" {
		t.Errorf("With changed the set it was called on (-want +got):\n%s", diff)
	}
	all := builtin.All()
	all[0] = newProbe(0).Channel
	if builtin.All()[0].Name() != "email" {
		t.Error("changing All's slice changed the set")
	}
	if (channel.Set{}).Len() != 0 || len((channel.Set{}).Routes()) != 0 {
		t.Error("the zero Set holds channels")
	}
	if _, err := (channel.Set{}).Lookup("email"); err == nil {
		t.Error("the zero Set looked up email")
	}
	for name, build := range map[string]func(){
		"NewSet": func() { channel.NewSet(channel.Email, channel.Webhook, channel.Email) },
		"With":   func() { builtin.With(channel.Email) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("a second email channel was accepted")
				}
			}()
			build()
		})
	}
}

// TestDefineRefusesBrokenSpecs checks the programming errors Define
// catches at once.
func TestDefineRefusesBrokenSpecs(t *testing.T) {
	open := func(func(string) string, channel.Store) (channel.Send[ProbePart], func() error, error) {
		return nil, nil, nil
	}
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
}

// TestLaneKey: what picks a copy's lane is its receiver: a recipient of a
// copy per recipient, a webhook's endpoint, the host of a bare URL (any
// spelling of it, any path), and the notification's id when the part
// names nobody.
func TestLaneKey(t *testing.T) {
	set := channel.Builtin()
	n := &notification.Notification{ID: "ntf_1", Parts: map[string]json.RawMessage{
		"webhook": json.RawMessage(`{"url":"https://Hooks.Example.:8443/a?b=1","payload":{}}`)}}
	if got := set.LaneKey(n, "webhook", ""); got != "host hooks.example" {
		t.Errorf("bare URL: %q, want host hooks.example", got)
	}
	if got := channel.Webhook.LaneKey(n, ""); got != "host hooks.example" {
		t.Errorf("Webhook.LaneKey of a bare URL: %q, want host hooks.example", got)
	}
	n.Parts["webhook"] = json.RawMessage(`{"endpoint":"ep_3kq7ymzd5vbxw2n4c6f7h2j4la","payload":{}}`)
	if got := set.LaneKey(n, "webhook", ""); got != "ep_3kq7ymzd5vbxw2n4c6f7h2j4la" {
		t.Errorf("endpoint: %q", got)
	}
	if got := set.LaneKey(n, "email", "ada@example.com"); got != "ada@example.com" {
		t.Errorf("a copy's recipient: %q", got)
	}
	if got := set.LaneKey(n, "nothing", ""); got != "ntf_1" {
		t.Errorf("a part naming nobody: %q, want the id", got)
	}
}
