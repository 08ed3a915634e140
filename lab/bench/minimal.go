package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/api"
)

// minimalRequest is the part of the API's request body the minimal
// publisher reads: the webhook part, as relay's handler decodes it.
type minimalRequest struct {
	Webhook *struct {
		URL     string          `json:"url"`
		Payload json.RawMessage `json:"payload"`
	} `json:"webhook"`
}

// minimalMessage is what the minimal publisher publishes per request.
type minimalMessage struct {
	ID        string          `json:"id"`
	Channel   string          `json:"channel"`
	CreatedAt time.Time       `json:"created_at"`
	URL       string          `json:"url"`
	Payload   json.RawMessage `json:"payload"`
}

// minimalPublisher is the smallest honest HTTP ingest: net/http, the same
// JSON decoded, one persistent publish per notification, answered 202
// only once the broker confirmed it. No token check, no history, no log
// line, no metrics: the baseline relay's ingest is held against in the
// same run.
type minimalPublisher struct {
	ch       *amqp.Channel
	exchange string
}

func (m *minimalPublisher) publish(ctx context.Context, r *minimalRequest) (*amqp.DeferredConfirmation, string, error) {
	if r.Webhook == nil || r.Webhook.URL == "" {
		return nil, "", fmt.Errorf("no webhook url")
	}
	id := api.NewID()
	body, err := json.Marshal(minimalMessage{ID: id, Channel: channel.Webhook.Name(), CreatedAt: time.Now().UTC(),
		URL: r.Webhook.URL, Payload: r.Webhook.Payload})
	if err != nil {
		return nil, "", err
	}
	dc, err := m.ch.PublishWithDeferredConfirmWithContext(ctx, m.exchange, channel.Webhook.Name(),
		false, // mandatory
		false, // immediate
		amqp.Publishing{ContentType: notification.ContentType, DeliveryMode: amqp.Persistent, MessageId: id, Timestamp: time.Now(), Body: body})
	return dc, id, err
}

func (m *minimalPublisher) confirmed(ctx context.Context, dc *amqp.DeferredConfirmation) error {
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("nacked by the broker")
	}
	return nil
}

// ServeHTTP takes POST /v1/notifications (one notification) and POST
// /v1/notifications/batch ({"notifications": [...]}, published together,
// their confirms awaited together).
func (m *minimalPublisher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var reqs []minimalRequest
	if r.URL.Path == "/v1/notifications/batch" {
		var batch struct {
			Notifications []minimalRequest `json:"notifications"`
		}
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reqs = batch.Notifications
	} else {
		reqs = make([]minimalRequest, 1)
		if err := json.NewDecoder(r.Body).Decode(&reqs[0]); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	ids := make([]string, len(reqs))
	dcs := make([]*amqp.DeferredConfirmation, len(reqs))
	for i := range reqs {
		dc, id, err := m.publish(r.Context(), &reqs[i])
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		dcs[i], ids[i] = dc, id
	}
	for _, dc := range dcs {
		if err := m.confirmed(r.Context(), dc); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string][]string{"ids": ids})
}

// startMinimal starts the minimal publisher on a loopback port, publishing
// to an exchange and queue of type qt of its own, and returns its base URL
// and a function that stops it.
func (b *bench) startMinimal(ctx context.Context, qt retry.QueueType, figure string) (base string, stop func(), err error) {
	names := b.names(qt, figure)
	exchange, queue := names+"exchange", names+"webhook"
	b.janitor.queue(queue)
	b.janitor.exchange(exchange)
	conn, err := retry.Dial(b.url, "relay-lab bench minimal http publisher")
	if err != nil {
		return "", nil, err
	}
	fail := func(err error) (string, func(), error) {
		conn.Close()
		return "", nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fail(fmt.Errorf("open channel: %w", err))
	}
	if err := declareExchange(ch, exchange, amqp.ExchangeDirect, nil); err != nil {
		return fail(err)
	}
	if err := declareQueue(ch, queue, queueArgs(qt, false)); err != nil {
		return fail(err)
	}
	if err := ch.QueueBind(queue, channel.Webhook.Name(), exchange, false /* noWait */, nil); err != nil {
		return fail(fmt.Errorf("bind queue %q: %w", queue, err))
	}
	if err := ch.Confirm(false /* noWait */); err != nil {
		return fail(fmt.Errorf("enable publisher confirms: %w", err))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: &minimalPublisher{ch: ch, exchange: exchange}}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		srv.Close()
		conn.Close()
	}, nil
}

// ingestMinimal drives the minimal publisher as ingestRelay drives the
// API: Clients keep-alive clients, one notification a request.
func (b *bench) ingestMinimal(ctx context.Context, qt retry.QueueType) (side, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	base, stop, err := b.startMinimal(ctx, qt, "ingest-minimal")
	if err != nil {
		return side{}, err
	}
	defer stop()
	client := newClient(b.opts.Clients)
	defer client.CloseIdleConnections()
	return b.postSingles(ctx, poster(client, base+"/v1/notifications", requestBody))
}

// ingestMinimalBatch drives the minimal publisher as ingestBatch drives
// the API: BatchSize notifications a request from BatchClients clients.
func (b *bench) ingestMinimalBatch(ctx context.Context, qt retry.QueueType) (side, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	base, stop, err := b.startMinimal(ctx, qt, "ingest-minimal-batch")
	if err != nil {
		return side{}, err
	}
	defer stop()
	client := newClient(b.opts.BatchClients)
	defer client.CloseIdleConnections()
	size := b.opts.BatchSize
	post := poster(client, base+"/v1/notifications/batch", batchBody(size))
	if err := waitAccepting(ctx, post); err != nil {
		return side{}, err
	}
	requests := func(n int) int { return (n + size - 1) / size }
	if _, err := drive(ctx, b.opts.BatchClients, requests(warmUp(b.opts.Ingest)), post); err != nil {
		return side{}, fmt.Errorf("warm up: %w", err)
	}
	n := b.opts.batchNotifications()
	calls := n / size
	m := startMeter(b.broker)
	start := time.Now()
	lat, err := drive(ctx, b.opts.BatchClients, calls, post)
	elapsed := time.Since(start)
	if err != nil {
		m.abort()
		return side{}, err
	}
	return side{N: n, Elapsed: elapsed, Samples: lat, Latency: Summarize(lat), Cost: m.stop(n)}, nil
}
