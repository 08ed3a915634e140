// Package notification is the message relay carries: one JSON envelope,
// versioned, produced by the API and consumed by the workers.
//
// A notification has one part per channel it goes through, keyed by the
// channel's name ("email", "webhook", ...). The API publishes one copy
// per channel to the ingress exchange, with the channel as routing key and
// only that channel's part in the body, so each channel retries on its
// own: a failed email never re-sends the webhook. What a part holds, and
// what makes it valid, is its channel's business (internal/channel).
//
// The package is also relay's vocabulary for what became of a notification,
// declared once for every package that speaks of it: View, with its copies
// (Copy) and their attempts (Attempt), is what the history store reads, the
// API and the dashboard answer and the command-line tools decode; Status is
// a copy's status; Event, one decision about an attempt, is what the events
// exchange carries and the history records. What an attempt came to is a
// retry.Outcome, the pipeline's own word for it.
package notification

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Version is the schema version this code reads and writes.
const Version = 1

// ContentType is the content type of every notification message.
const ContentType = "application/json"

// MaxIDLength bounds a notification id.
const MaxIDLength = 128

// Notification is one notification, or one channel's copy of it.
type Notification struct {
	V         int
	ID        string
	Channel   string // the copy's channel; empty for the whole notification
	CreatedAt time.Time
	// Parts holds each channel's part, as JSON, by channel name. A copy
	// holds one: its Channel's.
	Parts map[string]json.RawMessage
	// DueAt is, for a scheduled notification, when it is due; zero for
	// one sent at once. It is not part of the envelope: the copies wait
	// in the broker until then, and the history records it.
	DueAt time.Time
	// Type is the notification's type, whose retry schedule its copies
	// follow; empty for the default schedule. It is not part of the
	// envelope either: each copy carries it in HeaderType.
	Type string
	// Tenant is the tenant whose token posted it; empty for the default
	// tenant. Each copy carries it in HeaderTenant.
	Tenant string
}

// HeaderDueAt is the header, Unix milliseconds, that marks a copy of a
// scheduled notification: its worker checks that it was not cancelled
// before it sends it.
const HeaderDueAt = "x-due-at"

// HeaderRecipient names the recipient a copy is for, when its channel
// sends one copy per recipient (email does), so each recipient is retried
// and parked on its own. It is the topology's retry.Topology.CopyHeader:
// the pipeline's events and dead letters report it, and a dead-letter
// filter selects by it.
const HeaderRecipient = "x-recipient"

// HeaderTenant names the tenant a copy belongs to, when it is not the
// default tenant: the pipeline's events and dead letters carry it, and
// what a tenant's token reads, cancels, replays or purges is selected by
// it.
const HeaderTenant = "x-tenant"

// HeaderType names a copy's notification type, when it has one: the
// topology's retry.Topology.TypeHeader, whose value picks the retry
// schedule the copy follows.
const HeaderType = "x-notification-type"

// envelope names the keys of the JSON object that are not parts.
var envelope = []string{"v", "id", "channel", "created_at"}

// IsEnvelope reports whether name is one of the envelope's own keys, which
// no channel may take as its name.
func IsEnvelope(name string) bool { return slices.Contains(envelope, name) }

// MarshalJSON writes the envelope, then the parts in name order:
// {"v":1,"id":"…","channel":"email","created_at":"…","email":{…}}. It
// writes the bytes itself: every copy the API publishes goes through it.
func (n Notification) MarshalJSON() ([]byte, error) { return n.marshal(false) }

// Record is n as the history keeps it, the payload GET
// /v1/notifications/{id} shows: MarshalJSON's object with, for a
// notification of a type, "type" after "created_at". A copy's body never
// holds it: the copy carries it in HeaderType.
func (n Notification) Record() ([]byte, error) { return n.marshal(true) }

// marshal writes n, with its type when withType is set.
func (n Notification) marshal(withType bool) ([]byte, error) {
	var names [8]string
	keys := names[:0]
	size := 64 + len(n.ID) + len(n.Channel)
	for name, part := range n.Parts {
		if IsEnvelope(name) {
			return nil, fmt.Errorf("encode notification: a part may not be called %q", name)
		}
		if !json.Valid(part) {
			return nil, fmt.Errorf("encode %s: the part is not JSON", name)
		}
		keys = append(keys, name)
		size += len(name) + len(part) + 4
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(n.V), 10)
	b = append(b, `,"id":`...)
	b = appendString(b, n.ID)
	if n.Channel != "" {
		b = append(b, `,"channel":`...)
		b = appendString(b, n.Channel)
	}
	b = append(b, `,"created_at":`...)
	t, err := n.CreatedAt.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode created_at: %w", err)
	}
	b = append(b, t...)
	if withType && n.Type != "" {
		b = append(b, `,"type":`...)
		b = appendString(b, n.Type)
	}
	for _, name := range keys {
		b = append(b, ',')
		b = appendString(b, name)
		b = append(b, ':')
		b = append(b, n.Parts[name]...)
	}
	return append(b, '}'), nil
}

// appendString appends s as a JSON string, as encoding/json writes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// UnmarshalJSON reads the envelope; every other key is a part. A part that
// is null is no part.
func (n *Notification) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		return errors.New("a notification is a JSON object, not null")
	}
	*n = Notification{}
	into := map[string]any{"v": &n.V, "id": &n.ID, "channel": &n.Channel, "created_at": &n.CreatedAt}
	for key, value := range raw {
		if dst, ok := into[key]; ok {
			if err := json.Unmarshal(value, dst); err != nil {
				return fmt.Errorf("field %q: %w", key, err)
			}
			continue
		}
		if string(bytes.TrimSpace(value)) == "null" {
			continue
		}
		if n.Parts == nil {
			n.Parts = map[string]json.RawMessage{}
		}
		n.Parts[key] = value
	}
	return nil
}

// Channels lists the channels the notification has a part for, in name
// order.
func (n *Notification) Channels() []string { return slices.Sorted(maps.Keys(n.Parts)) }

// For returns the copy of n that goes to one channel: the same id and
// time, only that channel's part.
func (n *Notification) For(channel string) *Notification {
	c := &Notification{V: Version, ID: n.ID, Channel: channel, CreatedAt: n.CreatedAt}
	if p, ok := n.Parts[channel]; ok {
		c.Parts = map[string]json.RawMessage{channel: p}
	}
	return c
}

// FieldError is one invalid field, named by its JSON path.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Invalid lists every invalid field of a notification.
type Invalid []FieldError

func (e Invalid) Error() string {
	parts := make([]string, len(e))
	for i, f := range e {
		parts[i] = f.Error()
	}
	return "invalid notification: " + strings.Join(parts, "; ")
}

// ErrVersion means a message of a schema version this code cannot read.
var ErrVersion = errors.New("unsupported notification version")

// Decode reads a notification, or one channel's copy, from a message body
// and checks its envelope: the version, the id, and that it has a part
// (for a copy, exactly its channel's). The parts themselves are checked by
// their channels.
func Decode(body []byte) (*Notification, error) {
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, fmt.Errorf("decode notification: %w", err)
	}
	if n.V != Version {
		return nil, fmt.Errorf("%w: v=%d, want %d", ErrVersion, n.V, Version)
	}
	if n.ID == "" || len(n.ID) > MaxIDLength {
		return nil, Invalid{{Field: "id", Message: fmt.Sprintf("an id of 1 to %d bytes is required", MaxIDLength)}}
	}
	switch {
	case len(n.Parts) == 0:
		return nil, Invalid{{Message: "a notification needs at least one part"}}
	case n.Channel != "" && (len(n.Parts) != 1 || n.Parts[n.Channel] == nil):
		return nil, Invalid{{Field: "channel", Message: fmt.Sprintf("a %q copy holds that channel's part and no other, not %s", n.Channel, strings.Join(n.Channels(), ", "))}}
	}
	return &n, nil
}
