package retry

import (
	"context"
	"errors"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Publishers spreads publishes over several confirm-mode channels of one
// connection, each call to the one with the fewest messages in flight.
// The broker works through a channel's publishes one after another, its
// confirms in order: on a single channel, a small publish waits for every
// message a large one (a batch of thousands) sent before it; on another,
// it is confirmed beside them. The messages of one call go on one
// channel, in order, as Publisher's do. It is safe for concurrent use and
// offers what Publisher offers.
type Publishers struct {
	members []*member
}

type member struct {
	p *Publisher
	// busy counts the messages of calls in progress on p.
	busy atomic.Int64
}

// NewPublishers opens n Publishers on conn (n below 1 means 1), each
// bounding its confirms in flight at inFlight as NewPublisher does.
func NewPublishers(conn *amqp.Connection, n, inFlight int) (*Publishers, error) {
	ps := &Publishers{}
	for range max(n, 1) {
		p, err := NewPublisher(conn, inFlight)
		if err != nil {
			return nil, errors.Join(err, ps.Close())
		}
		ps.members = append(ps.members, &member{p: p})
	}
	return ps, nil
}

// pick is the member with the fewest messages in flight, holding n more.
func (ps *Publishers) pick(n int) *member {
	best := ps.members[0]
	for _, m := range ps.members[1:] {
		if m.busy.Load() < best.busy.Load() {
			best = m
		}
	}
	best.busy.Add(int64(n))
	return best
}

// Publish is Publisher.Publish on the least busy channel.
func (ps *Publishers) Publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	m := ps.pick(1)
	defer m.busy.Add(-1)
	return m.p.Publish(ctx, exchange, key, msg)
}

// PublishAll is Publisher.PublishAll on the least busy channel.
func (ps *Publishers) PublishAll(ctx context.Context, msgs []Outgoing) []error {
	m := ps.pick(len(msgs))
	defer m.busy.Add(-int64(len(msgs)))
	return m.p.PublishAll(ctx, msgs)
}

// PublishDelayed is Publisher.PublishDelayed on the least busy channel.
func (ps *Publishers) PublishDelayed(ctx context.Context, d Delayed, msg amqp.Publishing) error {
	m := ps.pick(1)
	defer m.busy.Add(-1)
	return m.p.PublishDelayed(ctx, d, msg)
}

// User is the user the connection logged in as (see Publisher.User).
func (ps *Publishers) User() string { return ps.members[0].p.User() }

// Closed reports whether any of the channels is closed: the connection
// should be made again.
func (ps *Publishers) Closed() bool {
	for _, m := range ps.members {
		if m.p.Closed() {
			return true
		}
	}
	return false
}

// Close closes every channel.
func (ps *Publishers) Close() error {
	var errs []error
	for _, m := range ps.members {
		errs = append(errs, m.p.Close())
	}
	return errors.Join(errs...)
}
