package retry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrNoBroker is SuperviseAny's and DialAny's error for an empty list of
// broker addresses.
var ErrNoBroker = errors.New("no broker address")

// Dial connects to url with a connection name that the management UI
// shows, so each relay process is recognisable there. Its error names the
// broker by RedactURL and never quotes the URL or its password:
// amqp091-go's errors may quote both, and they end up in logs.
func Dial(url, name string) (*amqp.Connection, error) {
	cfg := amqp.Config{Properties: amqp.NewConnectionProperties(), Heartbeat: 10 * time.Second}
	cfg.Properties.SetClientConnectionName(name)
	conn, err := amqp.DialConfig(url, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to broker %s as %q: %w", RedactURL(url), name, RedactError(err, url))
	}
	return conn, nil
}

// MaxBackoff is the longest wait Backoff returns. It bounds how long a
// service stays away after the broker is back: with a cap of 16 s, the API
// answered 503 for about 15 s after a broker restart. A dial that finds no
// broker costs little, so a few seconds between attempts is no storm.
const MaxBackoff = 4 * time.Second

// Backoff is the capped, jittered wait before reconnect attempt n (from 1):
// from 125-250ms for the first attempt, doubling, up to 2-4 s (MaxBackoff).
func Backoff(n int) time.Duration {
	base := 250 * time.Millisecond << min(max(n-1, 0), 4) // 250ms … 4s
	return base/2 + time.Duration(mrand.Int64N(int64(base/2)+1))
}

// Supervise runs fn on a connection and, whenever the connection is lost,
// dials again with Backoff and runs fn anew, until ctx is done. fn should
// return when the connection closes (every consumer in this package does).
// Supervise returns nil once ctx is done; it gives up only on errors that
// another attempt cannot fix, such as refused credentials.
func Supervise(ctx context.Context, url, name string, log *slog.Logger, fn func(context.Context, *amqp.Connection) error) error {
	return SuperviseAny(ctx, []string{url}, name, log, fn)
}

// SuperviseAny is Supervise for a broker with several nodes: urls holds one
// address per node of the cluster. It starts at a node picked at random,
// so the processes of a deployment, and the replicas of one service, spread
// across the cluster instead of crowding onto its first node. Whenever a
// connection is lost or a dial fails, it moves on to the next node in the
// list, round and round, waiting Backoff between attempts as Supervise
// does: a node that is gone costs one short wait, not a reconnect storm
// against it. With one URL it is Supervise.
//
// Every node serves every queue (a queue lives on its leader, and the
// cluster routes to it), so fn needs no knowledge of which node it got.
func SuperviseAny(ctx context.Context, urls []string, name string, log *slog.Logger, fn func(context.Context, *amqp.Connection) error) error {
	if len(urls) == 0 {
		return ErrNoBroker
	}
	node := mrand.IntN(len(urls))
	for attempt := 1; ; attempt++ {
		url := urls[node]
		conn, err := Dial(url, name)
		if err == nil {
			attempt = 0
			if len(urls) > 1 {
				log.Info("connected to the broker", "broker", RedactURL(url), "connection", name)
			}
			err = runOnce(ctx, conn, fn)
		}
		if ctx.Err() != nil {
			return nil
		}
		if isFatal(err) {
			return err
		}
		node = (node + 1) % len(urls)
		wait := Backoff(max(attempt, 1))
		attrs := []any{"error", err, "wait_ms", wait.Milliseconds()}
		if len(urls) > 1 {
			attrs = append(attrs, "next_broker", RedactURL(urls[node]))
		}
		log.Warn("broker connection lost, reconnecting", attrs...)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// DialAny connects to the first of urls, in their order, that takes the
// connection: a one-off task such as declaring the topology or listing
// parked messages then works while any node of the cluster is up. Its
// error, when no node answers, holds each node's error, each naming its
// node by RedactURL as Dial's does.
func DialAny(urls []string, name string) (*amqp.Connection, error) {
	if len(urls) == 0 {
		return nil, ErrNoBroker
	}
	var errs []error
	for _, url := range urls {
		conn, err := Dial(url, name)
		if err == nil {
			return conn, nil
		}
		if isFatal(err) {
			return nil, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("no broker node of %d answers: %w", len(urls), errors.Join(errs...))
}

func runOnce(ctx context.Context, conn *amqp.Connection, fn func(context.Context, *amqp.Connection) error) error {
	defer conn.Close()
	return fn(ctx, conn)
}

// isFatal tells errors that reconnecting cannot fix.
func isFatal(err error) bool {
	var aerr *amqp.Error
	if errors.As(err, &aerr) {
		return aerr.Code == amqp.AccessRefused || aerr.Code == amqp.NotAllowed
	}
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrBrokerTooOld) || errors.Is(err, ErrNoPlugin) || errors.Is(err, amqp.ErrSASL) || errors.Is(err, amqp.ErrCredentials) || errors.Is(err, amqp.ErrVhost)
}

// HasPlugin asks the broker at url whether it knows the x-delayed-message
// exchange type of the delayed-message plugin. Declaring an unknown
// exchange type makes the broker close the channel or the whole
// connection, so the probe runs on a throw-away connection of its own.
// Brokers say "no such type" in different words: RabbitMQ 3.x with 503
// COMMAND_INVALID (or 404), 4.x with 406 PRECONDITION_FAILED ("unknown
// exchange type"); each means no plugin. Its errors, like Dial's, never
// quote the URL.
func HasPlugin(url string) (bool, error) {
	conn, err := Dial(url, "relay probe")
	if err != nil {
		return false, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("probe for the delayed-message plugin: %w", err)
	}
	name := "relay.probe." + randomSuffix()
	err = ch.ExchangeDeclare(name, "x-delayed-message",
		false, // durable
		true,  // autoDelete
		false, // internal
		false, // noWait
		amqp.Table{"x-delayed-type": amqp.ExchangeDirect})
	if err == nil {
		_ = ch.ExchangeDelete(name, false, false)
		return true, nil
	}
	if unknownExchangeType(err) {
		return false, nil
	}
	return false, fmt.Errorf("probe for the delayed-message plugin: %w", err)
}

// unknownExchangeType reports whether err is a broker's refusal of an
// exchange type it does not know. The exchange's name is new, so a 406
// cannot be about arguments that differ from an existing exchange's.
func unknownExchangeType(err error) bool {
	var aerr *amqp.Error
	if !errors.As(err, &aerr) {
		return false
	}
	switch aerr.Code {
	case amqp.CommandInvalid, amqp.NotFound:
		return true
	case amqp.PreconditionFailed:
		return strings.Contains(strings.ToLower(aerr.Reason), "exchange type")
	}
	return false
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// User is the user conn logged in as, from its PLAIN or AMQPLAIN
// credentials; "" for a connection that authenticated otherwise (EXTERNAL,
// with a client certificate). The broker checks a message's user-id
// property against it on every publish, so a message that carries one
// says who published it: relay's events carry relay's.
func User(conn *amqp.Connection) string {
	for _, a := range conn.Config.SASL {
		switch a := a.(type) {
		case *amqp.PlainAuth:
			return a.Username
		case *amqp.AMQPlainAuth:
			return a.Username
		}
	}
	return ""
}
