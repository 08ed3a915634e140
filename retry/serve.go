package retry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrConnectionLost is returned by a consumer whose channel or connection
// closed under it; Supervise reconnects on it.
var ErrConnectionLost = errors.New("broker channel closed")

// worker handles one delivery with the Hop it owns.
type worker func(ctx context.Context, pub *Hop, d *amqp.Delivery) error

// ServeOptions shape Serve.
type ServeOptions struct {
	// Prefetch is the unacked window; zero means 2 × Concurrency.
	Prefetch int
	// Concurrency is the number of deliveries handled at once; zero
	// means 4.
	Concurrency int
	// Tag is the consumer tag the management UI shows.
	Tag string
	// ShutdownTimeout bounds how long the work in hand may go on once ctx
	// is done; zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// Serve is the consume loop under Consumer and Stages, for other retry
// designs to build on (lab/strategy does): it consumes queue with manual
// acks, runs Concurrency workers, each with a Hop of its own, and calls fn
// for each delivery, which fn settles (acks or nacks) itself. It returns
// when ctx is done, once the work in hand has finished (cut off after
// ShutdownTimeout), or when the channel closes (ErrConnectionLost).
func Serve(ctx context.Context, conn *amqp.Connection, queue string, o ServeOptions,
	fn func(ctx context.Context, hop *Hop, d *amqp.Delivery) error) error {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Prefetch <= 0 {
		o.Prefetch = 2 * o.Concurrency
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	_, err := serve(ctx, conn, queue, o.Prefetch, 0, o.Concurrency, o.Tag, o.ShutdownTimeout, fn)
	return err
}

// serve consumes queue with manual acks and the given prefetch, runs n
// workers over the deliveries, and returns when ctx is done (after every
// worker has finished the delivery in its hands) or the channel closes.
//
// A worker acks or nacks its delivery itself. Workers run under a context
// that shutdown does not cancel at once: a send in flight gets up to grace
// to complete and record its outcome instead of being cut off halfway.
//
// With careful above zero, the first careful deliveries are taken one at a
// time (prefetch 1) before the window widens to prefetch: after a message
// too large for the frame closed the connection, that brings it to the
// head of the queue, where the quarantine can reach it, before it strikes
// again. stillCareful reports whether serve ended before the window
// widened.
func serve(ctx context.Context, conn *amqp.Connection, queue string, prefetch, careful, n int, tag string, grace time.Duration, w worker) (stillCareful bool, err error) {
	var taken atomic.Int64
	defer func() { stillCareful = careful > 0 && taken.Load() < int64(careful) }()
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("open consume channel: %w", err)
	}
	defer ch.Close()
	window := prefetch
	if careful > 0 {
		window = 1
	}
	if err := ch.Qos(window, 0, false /* global */); err != nil {
		return false, fmt.Errorf("set prefetch %d: %w", window, err)
	}
	var widen sync.Once
	deliveries, err := ch.Consume(queue, tag,
		false, // autoAck: acks are manual, after the work is done
		false, // exclusive
		false, // noLocal
		false, // noWait
		nil)
	if err != nil {
		return false, fmt.Errorf("consume %q: %w", queue, err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	// The connection's own reason: a channel closed under a dying
	// connection may report none, and a worker may notice first.
	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancelWork) })
	defer stopGrace()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pub *Hop
			defer func() { pub.Close() }()
			// One delivery variable per worker, not per message: the
			// worker takes its address, which would move every copy to
			// the heap.
			var d amqp.Delivery
			for d = range deliveries {
				if ctx.Err() != nil {
					// Shutting down: hand back what was prefetched but
					// not started rather than begin new work.
					_ = d.Nack(false, true /* requeue */)
					continue
				}
				if pub == nil {
					p, err := NewHop(conn)
					if err != nil {
						_ = d.Nack(false, true /* requeue */)
						errs <- err
						return
					}
					pub = p
				}
				if err := w(work, pub, &d); err != nil && pub.broken(err) {
					pub.Close()
					pub = nil
				}
				if careful > 0 && taken.Add(1) >= int64(careful) {
					widen.Do(func() { _ = ch.Qos(prefetch, 0, false /* global */) })
				}
			}
		}()
	}

	var result error
	select {
	case <-ctx.Done():
		// Stop the flow; deliveries already prefetched but not started go
		// back to the queue when the channel closes.
		_ = ch.Cancel(tag, false /* noWait */)
	case e := <-closed:
		if e == nil {
			e = reasonOf(connClosed)
		}
		if e == nil {
			result = fmt.Errorf("%w: consuming %q", ErrConnectionLost, queue)
		} else {
			result = fmt.Errorf("%w: consuming %q: %w", ErrConnectionLost, queue, e)
		}
	case result = <-errs:
		if conn.IsClosed() {
			if e := reasonOf(connClosed); e != nil {
				result = fmt.Errorf("%w: consuming %q: %w", ErrConnectionLost, queue, e)
			}
		}
	}
	wg.Wait()
	return false, result
}

// reasonOf waits a moment for why a connection closed, from its NotifyClose
// channel closed: nil when it closed without a reason, or is still open.
func reasonOf(closed <-chan *amqp.Error) *amqp.Error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case e := <-closed:
		return e
	case <-t.C:
		return nil
	}
}

// DefaultShutdownTimeout is how long work in flight may go on after
// shutdown begins, when nothing else is configured.
const DefaultShutdownTimeout = 30 * time.Second

// pause waits d or until ctx is done: a failed hand-off backs off before
// its delivery goes back to the queue, so a broken route is not hammered.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
