package retry

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Producer publishes to a pipeline's ingress exchange with publisher
// confirms, on a connection of its own: the messages the pipeline's
// handlers consume. It is a Publisher (safe for concurrent use, every
// publish mandatory and confirmed) that knows where the pipeline starts.
//
// A Producer does not reconnect. Once Publish returns ErrClosed, or the
// broker went away, Close it and ask the Pipeline for a new one; a
// long-running producer such as relay's API keeps its Publisher on a
// supervised connection instead (see SuperviseAny).
type Producer struct {
	conn     *amqp.Connection
	pub      *Publisher
	exchange string
}

// Producer connects to the first of urls that answers, declares the
// pipeline's topology, and returns a Producer to its ingress exchange. The
// topology is the one Handle and Route have named so far, declared now so
// that a message published at once has its queue to go to; the pipeline
// need not be running, nor in this process. Auto is resolved as Run
// resolves it, waiting for a broker until ctx is done.
func (p *Pipeline) Producer(ctx context.Context, urls ...string) (*Producer, error) {
	topo, err := Resolve(ctx, p.Topology(), urls, p.cfg.Logger)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := DialAny(urls, p.cfg.Name+" producer")
	if err != nil {
		return nil, err
	}
	if err := topo.Declare(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	pub, err := NewPublisher(conn, 0)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &Producer{conn: conn, pub: pub, exchange: topo.Ingress()}, nil
}

// Publish sends msg to the ingress exchange with routing key, and returns
// once the broker has it: nil only when the broker took it, ErrUnroutable
// when no queue is bound with key. A msg whose DeliveryMode is not set is
// sent persistent. Give each message a MessageId of its own: it is the
// Message.ID handlers see, and how a return is matched to its publish.
func (p *Producer) Publish(ctx context.Context, key string, msg amqp.Publishing) error {
	if msg.DeliveryMode == 0 {
		msg.DeliveryMode = amqp.Persistent
	}
	return p.pub.Publish(ctx, p.exchange, key, msg)
}

// Close closes the Producer's connection; publishes in flight fail.
func (p *Producer) Close() error { return p.conn.Close() }
