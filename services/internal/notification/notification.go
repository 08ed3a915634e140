// Package notification is the message relay carries: one JSON envelope,
// versioned, produced by the API and consumed by the workers.
//
// A notification has one part per channel it goes through, keyed by the
// channel's name ("email", "webhook", ...). The API publishes one copy
// per channel to the ingress exchange, with the channel as routing key and
// only that channel's part in the body, so each channel retries on its
// own: a failed email never re-sends the webhook. What a part holds, and
// what makes it valid, is its channel's business (services/internal/channel).
package notification

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
}

// envelope names the keys of the JSON object that are not parts.
var envelope = []string{"v", "id", "channel", "created_at"}

// IsEnvelope reports whether name is one of the envelope's own keys, which
// no channel may take as its name.
func IsEnvelope(name string) bool { return slices.Contains(envelope, name) }

// MarshalJSON writes the envelope, then the parts in name order:
// {"v":1,"id":"…","channel":"email","created_at":"…","email":{…}}.
func (n Notification) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	field := func(name string, v any) error {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		enc, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		b.Write(enc)
		return nil
	}
	b.WriteByte('{')
	if err := field("v", n.V); err != nil {
		return nil, err
	}
	if err := field("id", n.ID); err != nil {
		return nil, err
	}
	if n.Channel != "" {
		if err := field("channel", n.Channel); err != nil {
			return nil, err
		}
	}
	if err := field("created_at", n.CreatedAt); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(n.Parts)) {
		if IsEnvelope(name) {
			return nil, fmt.Errorf("encode notification: a part may not be called %q", name)
		}
		if err := field(name, n.Parts[name]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
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
