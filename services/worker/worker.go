// Package worker is `relay worker <channel>`: it consumes one channel's
// queue through the retry consumer and hands each notification to that
// channel's sender. Everything channels share lives here; a channel is a
// Sender and one entry in Channels.
package worker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/notification"
)

// Sender delivers one channel's copy of a notification. Its errors are
// classified: retry.Permanent for failures no retry fixes, retry.After
// when the downstream asked for a wait, anything else is transient.
type Sender interface {
	Send(ctx context.Context, n *notification.Notification) error
}

// Channel is one way of delivering notifications.
type Channel struct {
	// Name is the routing key on notification-exchange and the part of
	// the notification the channel delivers.
	Name string
	// Open builds the channel's sender from the environment. The returned
	// close function releases its connections.
	Open func(getenv func(string) string) (Sender, func() error, error)
}

// Channels are the channels relay can deliver through.
func Channels() []Channel {
	return []Channel{
		{Name: notification.ChannelEmail, Open: openEmail},
		{Name: notification.ChannelWebhook, Open: openWebhook},
		{Name: notification.ChannelSMS, Open: openSMS},
	}
}

// Lookup finds a channel by name.
func Lookup(name string) (Channel, error) {
	var names []string
	for _, c := range Channels() {
		if c.Name == name {
			return c, nil
		}
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return Channel{}, fmt.Errorf("unknown channel %q: want one of %s", name, strings.Join(names, ", "))
}

// Handler decodes a message and sends it. A message that does not decode,
// or belongs to another channel, is a permanent failure: parked once with
// the reason, never looped.
func Handler(channel string, s Sender) retry.HandlerFunc {
	return func(ctx context.Context, m *retry.Message) error {
		n, err := notification.Decode(m.Body)
		if err != nil {
			return retry.Permanent(err)
		}
		if n.Channel != channel {
			return retry.Permanent(fmt.Errorf("a %q copy reached the %s worker", n.Channel, channel))
		}
		if !slices.Contains(n.Channels(), channel) {
			return retry.Permanent(fmt.Errorf("the %s copy has no %s part", channel, channel))
		}
		if m.ID != "" && m.ID != n.ID {
			return retry.Permanent(fmt.Errorf("message-id %q does not match notification id %q", m.ID, n.ID))
		}
		return s.Send(ctx, n)
	}
}

// discard is the close function of senders that hold nothing open.
func discard() error { return nil }
