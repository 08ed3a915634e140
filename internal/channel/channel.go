// Package channel is relay's delivery channels. A channel is a part a
// notification may carry (its JSON shape, its checks, its OpenAPI schema)
// and the sender that delivers that part: email over SMTP, webhook and sms
// over signed HTTP.
//
// Adding a channel takes a file and a line: the channel's own (a part type
// and a Spec, passed to Define, with its test), and its place in Builtin
// (builtin.go).
// Each process is wired with one Set of channels, built once and passed
// down: the API, the workers, `relay all`, the command list and the
// OpenAPI document all read the Set they were given; docs/template.md
// walks through one.
package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/tracing"
	"github.com/relay-demo/relay/retry"
)

// Spec describes a channel whose part is a P.
type Spec[P any] struct {
	// Name is the channel's routing key, the JSON field its part lives
	// in, the name of its queue (Name-queue) and of its worker command
	// (relay worker Name). Lower-case letters and digits.
	Name string
	// Summary says in a line what the worker does, for relay's help.
	Summary string
	// Check reports what is wrong with a part, calling bad once per
	// problem with the field's path inside the part ("to[1]"; "" for the
	// part as a whole).
	Check func(p *P, bad func(field, format string, args ...any))
	// Recipients names whom a part goes to (addresses, numbers, URLs),
	// for the history's search.
	Recipients func(p *P) []string
	// PerRecipient, when set, makes the channel deliver to each of a
	// part's Recipients on its own: the API publishes one copy per
	// recipient, with the part PerRecipient returns for it, so each is
	// delivered, retried and parked without the others. Nil means one copy
	// of the whole part.
	PerRecipient func(p *P, recipient string) *P
	// Schema is the part's OpenAPI 3.1 schema, as JSON.
	Schema string
	// Env lists the structs Open reads from the environment, as pointers
	// to zero values: relay's help and the docs list their variables.
	Env []any
	// Open builds the channel's sender from the environment and the
	// process's history store, which it may use but never closes; the
	// close function releases what it holds. Errors name the variable at
	// fault.
	Open func(getenv func(string) string, st Store) (Send[P], func() error, error)
	// Demo is what `relay all` sets in the environment, where unset, so
	// the channel delivers to the flaky downstreams beside it. Nil for
	// nothing.
	Demo func(d Downstreams) map[string]string
}

// Store returns the process's history store, opened on first use, the
// same each time ((*store.Lazy).Open is one): what the channels share
// their rate limits, providers, circuits and endpoints through.
type Store func(ctx context.Context) (*store.Store, error)

// Send delivers one part of notification id. Its errors say their
// retryability as the retry package reads it: Permanent() true for a
// failure no retry fixes, RetryAfter() for a downstream's wait, anything
// else is transient.
type Send[P any] func(ctx context.Context, id string, p *P) error

// Downstreams is where `relay all`'s flaky downstreams listen.
type Downstreams struct {
	SMTPHost, SMTPPort string
	// HTTP is the base URL of the flaky HTTP receiver, such as
	// http://127.0.0.1:9090.
	HTTP string
}

// Channel is a channel with its part type erased: what the API, the
// workers and a Set handle.
type Channel struct {
	name, summary string
	part          reflect.Type
	check         func(part any) notification.Invalid
	recipients    func(part any) []string
	perRecipient  func(raw json.RawMessage) ([]Piece, error)
	schema        json.RawMessage
	env           []any
	open          func(getenv func(string) string, st Store) (Sender, func() error, error)
	demo          func(Downstreams) map[string]string
}

// Sender delivers a channel's copy of a notification.
type Sender func(ctx context.Context, n *notification.Notification) error

// Define makes a Channel of s. It panics on a Spec that cannot work (no
// name, a name the envelope uses, no Check or Open, a schema that is not
// JSON): a programming error, found by the channel's first test.
func Define[P any](s Spec[P]) Channel {
	switch {
	case !validName(s.Name) || notification.IsEnvelope(s.Name):
		panic(fmt.Sprintf("channel: name %q: want lower-case letters and digits, not v, id, channel or created_at", s.Name))
	case s.Check == nil || s.Open == nil:
		panic("channel " + s.Name + ": Spec needs Check and Open")
	case !json.Valid([]byte(s.Schema)):
		panic("channel " + s.Name + ": Schema is not JSON")
	}
	var schema bytes.Buffer
	if err := json.Compact(&schema, []byte(s.Schema)); err != nil {
		panic("channel " + s.Name + ": " + err.Error())
	}
	check := func(p *P) notification.Invalid {
		var errs notification.Invalid
		s.Check(p, func(field, format string, args ...any) {
			path := s.Name
			if field != "" {
				path += "." + field
			}
			errs = append(errs, notification.FieldError{Field: path, Message: fmt.Sprintf(format, args...)})
		})
		return errs
	}
	return Channel{
		name:    s.Name,
		summary: s.Summary,
		part:    reflect.TypeFor[P](),
		check:   func(part any) notification.Invalid { return check(part.(*P)) },
		recipients: func(part any) []string {
			if s.Recipients == nil {
				return nil
			}
			return s.Recipients(part.(*P))
		},
		perRecipient: perRecipient(s),
		schema:       schema.Bytes(),
		env:          s.Env,
		demo:         s.Demo,
		open: func(getenv func(string) string, st Store) (Sender, func() error, error) {
			send, closeSend, err := s.Open(getenv, st)
			if err != nil {
				return nil, nil, err
			}
			deliver := func(ctx context.Context, n *notification.Notification, span trace.Span) error {
				var p P
				if err := decodeStrict(n.Parts[s.Name], &p); err != nil {
					return permanent{fmt.Errorf("the %s part: %w", s.Name, err)}
				}
				if errs := check(&p); len(errs) > 0 {
					return permanent{errs}
				}
				if d, ok := any(&p).(destination); ok && span != nil {
					span.SetAttributes(d.destination()...)
				}
				return send(ctx, n.ID, &p)
			}
			return func(ctx context.Context, n *notification.Notification) error {
				ctx, span, traced := startSend(ctx, s.Name, n.ID)
				if !traced {
					return deliver(ctx, n, nil)
				}
				// A panic goes on to the pipeline, which makes it a
				// failure; the span ends as one.
				panicked := true
				defer func() {
					if panicked {
						tracing.EndPanic(span)
					}
				}()
				err := deliver(ctx, n, span)
				panicked = false
				tracing.End(span, err)
				return err
			}, closeSend, nil
		},
	}
}

func validName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// startSend starts the client span of a send, the child of the attempt
// that ctx carries (see tracing.Middleware), in that span's tracer
// provider. Without a recording span in ctx, tracing is off or the trace
// is not sampled: nothing is started and traced is false.
func startSend(ctx context.Context, channel, id string) (_ context.Context, span trace.Span, traced bool) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent, false
	}
	ctx, span = parent.TracerProvider().Tracer(tracerScope).Start(ctx, "send "+channel,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrChannel.String(channel), AttrNotification.String(id)))
	return ctx, span, true
}

// tracerScope is the instrumentation scope of the send spans.
const tracerScope = "github.com/relay-demo/relay/internal/channel"

// Attributes of a send's span, besides where it goes (see destination).
const (
	// AttrChannel is the channel's name.
	AttrChannel = attribute.Key("relay.channel")
	// AttrNotification is the notification's id.
	AttrNotification = attribute.Key("relay.notification.id")
)

// destination is a part that can say where it is delivered, for the span
// of its send: a host, never a whole URL, whose path or query may hold a
// secret.
type destination interface {
	destination() []attribute.KeyValue
}

// decodeStrict decodes one JSON value, refusing unknown fields.
func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// permanent marks a part that can never be delivered.
type permanent struct{ error }

func (permanent) Permanent() bool { return true }
func (p permanent) Unwrap() error { return p.error }

// Piece is what one copy of a channel's part carries: the part, whole or
// for one recipient (a notification.CopyRef names the copy itself).
type Piece struct {
	// Recipient is the recipient the copy goes to, for a channel that
	// delivers to each on its own; empty for a copy of the whole part.
	Recipient string
	// Part is the copy's part, JSON.
	Part json.RawMessage
}

// perRecipient splits a part per recipient, for a Spec that says so.
func perRecipient[P any](s Spec[P]) func(raw json.RawMessage) ([]Piece, error) {
	if s.PerRecipient == nil || s.Recipients == nil {
		return nil
	}
	return func(raw json.RawMessage) ([]Piece, error) {
		var p P
		if err := decodeStrict(raw, &p); err != nil {
			return nil, fmt.Errorf("the %s part: %w", s.Name, err)
		}
		recipients := s.Recipients(&p)
		out := make([]Piece, 0, len(recipients))
		for _, r := range recipients {
			part, err := json.Marshal(s.PerRecipient(&p, r))
			if err != nil {
				return nil, fmt.Errorf("encode the %s part for %s: %w", s.Name, r, err)
			}
			out = append(out, Piece{Recipient: r, Part: part})
		}
		return out, nil
	}
}

// Copies splits a part (JSON, checked before) into the copies the API
// publishes: one per recipient for a channel that delivers to each on its
// own, else the whole part once.
func (c Channel) Copies(part json.RawMessage) ([]Piece, error) {
	if c.perRecipient == nil {
		return []Piece{{Part: part}}, nil
	}
	return c.perRecipient(part)
}

// PerRecipient reports whether the channel delivers to each recipient on
// its own, a copy each.
func (c Channel) PerRecipient() bool { return c.perRecipient != nil }

// Name is the channel's name: its routing key and the JSON field of its
// part.
func (c Channel) Name() string { return c.name }

// Summary says what the channel's worker does.
func (c Channel) Summary() string { return c.summary }

// Route is the channel's work queue and routing key.
func (c Channel) Route() retry.Route { return retry.Route{Queue: c.name + "-queue", Key: c.name} }

// Part is the channel's part type: the API decodes requests into it.
func (c Channel) Part() reflect.Type { return c.part }

// Check checks a part decoded into a value of type *Part().
func (c Channel) Check(part any) notification.Invalid { return c.check(part) }

// Recipients names whom a part (a *Part()) goes to.
func (c Channel) Recipients(part any) []string { return c.recipients(part) }

// Schema is the part's OpenAPI schema.
func (c Channel) Schema() json.RawMessage { return c.schema }

// Env lists the structs Open reads from the environment.
func (c Channel) Env() []any { return c.env }

// Open builds the channel's sender from the environment and the
// process's history store. The sender decodes and checks its part and
// refuses, as a permanent failure, a part that is not valid.
func (c Channel) Open(getenv func(string) string, st Store) (Sender, func() error, error) {
	return c.open(getenv, st)
}

// Demo is what `relay all` sets for the channel where unset.
func (c Channel) Demo(d Downstreams) map[string]string {
	if c.demo == nil {
		return nil
	}
	return c.demo(d)
}

// Set is a fixed list of channels, in the order help texts show them:
// the channels one process accepts, documents and delivers through. It is
// built once where the process is wired (Builtin for relay's own) and
// passed down; it never changes after. The zero Set has no channels.
type Set struct {
	list []Channel
}

// NewSet makes a Set of cs, in their order. It panics on two channels of
// one name: a programming error, found by the first test that builds it.
func NewSet(cs ...Channel) Set {
	for i, c := range cs {
		for _, have := range cs[:i] {
			if have.name == c.name {
				panic("channel: " + c.name + " is in the set twice")
			}
		}
	}
	return Set{list: slices.Clone(cs)}
}

// With returns a Set of s's channels followed by cs; s is unchanged. It
// panics, as NewSet does, on a name already taken.
func (s Set) With(cs ...Channel) Set {
	return NewSet(append(slices.Clone(s.list), cs...)...)
}

// All returns the set's channels, in order.
func (s Set) All() []Channel { return slices.Clone(s.list) }

// Len is how many channels the set holds.
func (s Set) Len() int { return len(s.list) }

// Lookup finds a channel of the set by name.
func (s Set) Lookup(name string) (Channel, error) {
	for _, c := range s.list {
		if c.name == name {
			return c, nil
		}
	}
	return Channel{}, fmt.Errorf("unknown channel %q: want one of %s", name, strings.Join(s.Names(), ", "))
}

// Names lists the channels' names in the set's order.
func (s Set) Names() []string {
	out := make([]string, 0, len(s.list))
	for _, c := range s.list {
		out = append(out, c.name)
	}
	return out
}

// Routes lists every channel's work queue and routing key: the topology
// every process wired with the set declares.
func (s Set) Routes() []retry.Route {
	out := make([]retry.Route, 0, len(s.list))
	for _, c := range s.list {
		out = append(out, c.Route())
	}
	return out
}

// Routes lists the work queues and routing keys of relay's own channels:
// Builtin().Routes().
func Routes() []retry.Route { return Builtin().Routes() }

// Check checks every part of a notification against its channel in the
// set: an unknown part, or a part its channel refuses, is an error.
func (s Set) Check(n *notification.Notification) error {
	var errs notification.Invalid
	for _, name := range n.Channels() {
		c, err := s.Lookup(name)
		if err != nil {
			errs = append(errs, notification.FieldError{Field: name, Message: err.Error()})
			continue
		}
		p := reflect.New(c.part).Interface()
		if err := decodeStrict(n.Parts[name], p); err != nil {
			errs = append(errs, notification.FieldError{Field: name, Message: err.Error()})
			continue
		}
		errs = append(errs, c.check(p)...)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// LaneKey is the named channel's LaneKey for a copy of n; n's id for a
// channel the set does not hold.
func (s Set) LaneKey(n *notification.Notification, name, recipient string) string {
	c, err := s.Lookup(name)
	if err != nil {
		if recipient != "" {
			return recipient
		}
		return n.ID
	}
	return c.LaneKey(n, recipient)
}

// RecipientsOf names whom n's part for the named channel goes to; nothing
// for a channel the set does not hold or a part that does not decode.
func (s Set) RecipientsOf(n *notification.Notification, name string) []string {
	c, err := s.Lookup(name)
	if err != nil {
		return nil
	}
	return c.RecipientsOf(n)
}

// LaneKey is what picks the lane of a copy of n's part for c
// (retry.Topology.Lane), so that every copy to one receiver takes one
// lane: recipient, for a copy per recipient; else whom the part names: a
// webhook's endpoint, or the host of its URL (all of a host's URLs share
// its cap, see webhookSender); n's id when it names nobody.
func (c Channel) LaneKey(n *notification.Notification, recipient string) string {
	if recipient != "" {
		return recipient
	}
	rs := c.RecipientsOf(n)
	if len(rs) == 0 || rs[0] == "" {
		return n.ID
	}
	if c.name == Webhook.Name() && !IsEndpointID(rs[0]) {
		if host, ok := bareHost(rs[0]); ok {
			return "host " + host
		}
	}
	return rs[0]
}

// RecipientsOf names whom n's part for c goes to; nothing for a part that
// does not decode, or that n does not have.
func (c Channel) RecipientsOf(n *notification.Notification) []string {
	raw, ok := n.Parts[c.name]
	if !ok || c.part == nil {
		return nil
	}
	p := reflect.New(c.part).Interface()
	// Lenient: it only reads whom a part names, of a part checked before.
	if err := json.Unmarshal(raw, p); err != nil {
		return nil
	}
	return c.recipients(p)
}
