package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// OperatorQueue is the unprefixed name of the durable queue that holds the
// operational events on their way to the operator webhook.
const OperatorQueue = "operator-webhooks"

// forwardPrefetch bounds the operational events a Forwarder holds
// unacknowledged.
const forwardPrefetch = 16

// Forwarder turns operational events into notifications for the operator
// webhook: it consumes them from a durable queue bound to "operator.#" on
// the events exchange and publishes, for each, a webhook copy to URL into
// the topology's ingress exchange, marked with notification.HeaderOperator
// so the webhook worker signs it with the operator's secret. The copy then
// goes through relay's own pipeline like any other: retries, parking, the
// address guard, the per-host cap. An event is acknowledged once the broker
// confirmed its copy; one that cannot be published is left to a later
// connection.
//
// A copy.parked event about an operator webhook's own copy (its id starts
// with notification.OperatorIDPrefix) is not forwarded: an operator
// endpoint that fails would otherwise be told of its own failures forever.
type Forwarder struct {
	Topology retry.Topology
	// Channel is the webhook channel's routing key.
	Channel string
	// URL is the operator webhook (OPERATOR_WEBHOOK_URL).
	URL string
	// Service names the process in the accepted records it publishes.
	Service string
	Log     *slog.Logger
}

// DeclareOperatorQueue declares t's events exchange and the durable
// operator queue bound to every operational event, on a broker of version
// (as retry.BrokerVersion gives it).
func DeclareOperatorQueue(ch *amqp.Channel, t retry.Topology, version string) error {
	if err := Declare(ch, t); err != nil {
		return err
	}
	args := amqp.Table{}
	if t.QueueType == retry.Quorum {
		args["x-queue-type"] = string(retry.Quorum)
	}
	// No dead-letter exchange either: an event the forwarder returns while
	// the broker refuses its publishes must not be dropped at the 21st
	// return by a quorum queue's default limit on RabbitMQ 4.
	args = retry.DeliveryLimit(version, args)
	q := t.Name(OperatorQueue)
	if _, err := ch.QueueDeclare(q,
		true,  // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		args); err != nil {
		return fmt.Errorf("declare operator queue %q: %w", q, err)
	}
	if err := ch.QueueBind(q, OpRoutingPrefix+"#", ExchangeName(t), false /* noWait */, nil); err != nil {
		return fmt.Errorf("bind operator queue %q: %w", q, err)
	}
	return nil
}

// Run forwards operational events on conn until ctx is done or the
// connection is lost (it returns the error then). Call it once per
// connection, for instance inside retry.SuperviseAny.
func (f *Forwarder) Run(ctx context.Context, conn *amqp.Connection) error {
	log := f.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open operator channel: %w", err)
	}
	defer ch.Close()
	if err := DeclareOperatorQueue(ch, f.Topology, retry.BrokerVersion(conn)); err != nil {
		return err
	}
	if err := ch.Qos(forwardPrefetch, 0, false /* global */); err != nil {
		return fmt.Errorf("operator channel: qos: %w", err)
	}
	pub, err := retry.NewPublisher(conn, forwardPrefetch)
	if err != nil {
		return err
	}
	defer pub.Close()
	user := retry.User(conn)
	deliveries, err := ch.Consume(f.Topology.Name(OperatorQueue), "relay operator webhooks",
		false, // autoAck
		false, // exclusive
		false, // noLocal
		false, // noWait
		nil)
	if err != nil {
		return fmt.Errorf("consume operator queue: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("operator channel closed")
			}
			if err := f.forward(ctx, pub, user, &d, log); err != nil {
				_ = d.Nack(false /* multiple */, true /* requeue */)
				return err
			}
			if err := d.Ack(false /* multiple */); err != nil {
				return fmt.Errorf("ack operational event: %w", err)
			}
		}
	}
}

// forward publishes the operator webhook copy of d, and, before it, the
// history's record of it. What is not an operational event relay
// published, or must not be forwarded, it skips (nil).
func (f *Forwarder) forward(ctx context.Context, pub *retry.Publisher, user string, d *amqp.Delivery, log *slog.Logger) error {
	var op notification.Operational
	if !fromRelay(d, user) || json.Unmarshal(d.Body, &op) != nil || !notification.IsOpType(op.Type) || op.ID == "" {
		log.Warn("dropped a message in the operator queue that is not an operational event relay published",
			"message_id", d.MessageId, "user_id", d.UserId)
		return nil
	}
	if !Forwardable(op) {
		return nil
	}
	n, err := f.notification(op, d.Body)
	if err != nil {
		log.Error("encode operator webhook", "event_id", op.ID, "error", err.Error())
		return nil
	}
	body, err := n.MarshalJSON()
	if err != nil {
		log.Error("encode operator webhook", "event_id", op.ID, "error", err.Error())
		return nil
	}
	rec, err := AcceptedPublishing(notification.Accepted{ID: n.ID, CreatedAt: n.CreatedAt, Channels: []string{f.Channel},
		Recipients: []string{f.URL}, Payload: body}, f.Service)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Unroutable: no history listens (no API runs), which the operator
	// webhook does without.
	if err := pub.Publish(pctx, ExchangeName(f.Topology), AcceptedRoutingKey, rec); err != nil && !errors.Is(err, retry.ErrUnroutable) {
		return fmt.Errorf("publish the record of operator webhook %s: %w", n.ID, err)
	}
	msg := amqp.Publishing{
		ContentType:  notification.ContentType,
		MessageId:    n.ID,
		DeliveryMode: amqp.Persistent,
		Timestamp:    n.CreatedAt,
		AppId:        f.Service,
		Headers:      amqp.Table{notification.HeaderOperator: true},
		Body:         body,
	}
	// To the lane the operator webhook's host picks, as the API would.
	lane := f.Topology.Lane(f.Channel, channel.Webhook.LaneKey(n, ""))
	if err := pub.Publish(pctx, f.Topology.Ingress(), lane.Key, msg); err != nil {
		return fmt.Errorf("publish operator webhook %s: %w", n.ID, err)
	}
	return nil
}

// Forwardable reports whether op goes to the operator webhook: every
// operational event but a copy.parked about an operator webhook's own
// copy.
func Forwardable(op notification.Operational) bool {
	return op.Type != notification.OpCopyParked || !strings.HasPrefix(op.Data.NotificationID, notification.OperatorIDPrefix)
}

// notification is the webhook notification that carries op, whose JSON is
// raw, to the operator webhook. Its id derives from op's, so a receiver
// deduplicates an event forwarded twice.
func (f *Forwarder) notification(op notification.Operational, raw []byte) (*notification.Notification, error) {
	part, err := json.Marshal(struct {
		URL     string          `json:"url"`
		Payload json.RawMessage `json:"payload"`
	}{f.URL, json.RawMessage(raw)})
	if err != nil {
		return nil, err
	}
	at := op.Timestamp
	if at.IsZero() {
		at = time.Now()
	}
	return &notification.Notification{V: notification.Version, ID: notification.OperatorIDPrefix + strings.TrimPrefix(op.ID, OpIDPrefix),
		Channel: f.Channel, CreatedAt: at.UTC(), Parts: map[string]json.RawMessage{f.Channel: part}}, nil
}
