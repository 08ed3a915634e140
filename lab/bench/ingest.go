package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/api"
)

// benchToken is the API token of the bench's own API instance.
const benchToken = "bench-token-0123456789abcdef"

// webhookTarget is the webhook URL of every bench notification. No worker
// runs during the bench, so nothing is ever sent there; it is a loopback
// discard port all the same.
const webhookTarget = "http://127.0.0.1:9/bench"

// requestBody is the body of every POST /v1/notifications: one webhook
// part, so the API publishes one message per request.
var requestBody = []byte(`{"webhook":{"url":"` + webhookTarget + `","payload":{"event":"bench","order":12345,"total":"19.99"}}}`)

// messageBody is a body of the size the API publishes for requestBody: the
// same notification copy, encoded the same way.
func messageBody() []byte {
	part, err := json.Marshal(channel.WebhookPart{URL: webhookTarget,
		Payload: json.RawMessage(`{"event":"bench","order":12345,"total":"19.99"}`)})
	if err != nil {
		panic(err) // a fixed value always encodes
	}
	n := &notification.Notification{V: notification.Version, ID: api.NewID(), Channel: channel.Webhook.Name(),
		CreatedAt: time.Now().UTC(), Parts: map[string]json.RawMessage{channel.Webhook.Name(): part}}
	b, err := json.Marshal(n)
	if err != nil {
		panic(err) // a fixed value always encodes
	}
	return b
}

// warmUp is how many untimed requests or publishes precede a timed run, so
// connections are open and pools are full when the clock starts.
func warmUp(n int) int { return min(max(n/10, 1), 500) }

// Targets of the ingest figures (issue #16): a request at 0.8× a raw
// confirmed publish at least, a batched notification at 1.0×.
const (
	ingestTarget = 0.8
	batchTarget  = 1.0
	// minimalTarget is the goal against a minimal net/http service that
	// decodes the same JSON and publishes each notification once,
	// persistent and confirmed, measured in the same rounds.
	minimalTarget = 0.6
)

// ingestRows measures the API, one notification per request and in
// batches as chosen, against a raw confirming publisher measured once for
// both in the same rounds.
func (b *bench) ingestRows(ctx context.Context, qt retry.QueueType) ([]Row, error) {
	order := []string{"raw"}
	run := map[string]func(context.Context) (side, error){"raw": func(ctx context.Context) (side, error) { return b.ingestRaw(ctx, qt) }}
	if b.opts.has("ingest") {
		order = append(order, "relay", "minimal")
		run["relay"] = func(ctx context.Context) (side, error) { return b.ingestRelay(ctx, qt) }
		run["minimal"] = func(ctx context.Context) (side, error) { return b.ingestMinimal(ctx, qt) }
	}
	if b.opts.has("ingest-batch") {
		order = append(order, "batch", "minimal-batch")
		run["batch"] = func(ctx context.Context) (side, error) { return b.ingestBatch(ctx, qt) }
		run["minimal-batch"] = func(ctx context.Context) (side, error) { return b.ingestMinimalBatch(ctx, qt) }
	}
	got, err := b.contest(ctx, "ingest", qt, order, run)
	if err != nil {
		return nil, err
	}
	raw := got["raw"]
	q := string(qt)
	var rows []Row
	if relay, ok := got["relay"]; ok {
		rows = append(rows,
			Row{Queue: q, Figure: FigIngestRate, Unit: UnitRate, Relay: ptr(relay.Rate()), Raw: ptr(raw.Rate()),
				Target: &Target{Kind: RatioAtLeast, Value: ingestTarget}, RelayCost: &relay.Cost, RawCost: &raw.Cost},
			Row{Queue: q, Figure: FigIngestP50, Unit: UnitMs, Relay: ms(relay.Latency.P50), Raw: ms(raw.Latency.P50)},
			Row{Queue: q, Figure: FigIngestP99, Unit: UnitMs, Relay: ms(relay.Latency.P99), Raw: ms(raw.Latency.P99)})
		if minimal, ok := got["minimal"]; ok {
			rows = append(rows, Row{Queue: q, Figure: FigIngestMinimal, Unit: UnitRate, Relay: ptr(relay.Rate()), Raw: ptr(minimal.Rate()),
				Baseline: "minimal HTTP", Target: &Target{Kind: RatioAtLeast, Value: minimalTarget}, RelayCost: &relay.Cost, RawCost: &minimal.Cost})
		}
	}
	if batch, ok := got["batch"]; ok {
		rows = append(rows, Row{Queue: q, Figure: FigBatchRate, Detail: fmt.Sprintf("(%d per request)", b.opts.BatchSize),
			Unit: UnitRate, Relay: ptr(batch.Rate()), Raw: ptr(raw.Rate()),
			Target: &Target{Kind: RatioAtLeast, Value: batchTarget}, RelayCost: &batch.Cost, RawCost: &raw.Cost})
		if minimal, ok := got["minimal-batch"]; ok {
			rows = append(rows, Row{Queue: q, Figure: FigBatchMinimal, Detail: fmt.Sprintf("(%d per request)", b.opts.BatchSize),
				Unit: UnitRate, Relay: ptr(batch.Rate()), Raw: ptr(minimal.Rate()),
				Baseline: "minimal HTTP", Target: &Target{Kind: RatioAtLeast, Value: minimalTarget}, RelayCost: &batch.Cost, RawCost: &minimal.Cost})
		}
	}
	return rows, nil
}

// ingestRaw publishes to a direct exchange bound to one queue of type qt,
// persistent, with Clients confirms outstanding.
func (b *bench) ingestRaw(ctx context.Context, qt retry.QueueType) (side, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	names := b.names(qt, "ingest-raw")
	exchange, queue := names+"exchange", names+"webhook"
	b.janitor.queue(queue)
	b.janitor.exchange(exchange)
	conn, err := retry.Dial(b.url, "relay-lab bench raw publisher")
	if err != nil {
		return side{}, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return side{}, fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	if err := declareExchange(ch, exchange, amqp.ExchangeDirect, nil); err != nil {
		return side{}, err
	}
	if err := declareQueue(ch, queue, queueArgs(qt, false)); err != nil {
		return side{}, err
	}
	if err := ch.QueueBind(queue, channel.Webhook.Name(), exchange, false /* noWait */, nil); err != nil {
		return side{}, fmt.Errorf("bind queue %q: %w", queue, err)
	}
	body := messageBody()
	msg := func(i int) (string, string, amqp.Publishing) {
		return exchange, channel.Webhook.Name(), amqp.Publishing{ContentType: notification.ContentType,
			DeliveryMode: amqp.Persistent, MessageId: api.NewID(), Timestamp: time.Now(), Body: body}
	}
	if _, err := publishPipelined(ctx, conn, b.opts.Clients, warmUp(b.opts.Ingest), false, msg); err != nil {
		return side{}, fmt.Errorf("warm up: %w", err)
	}
	m := startMeter(b.broker)
	start := time.Now()
	lat, err := publishPipelined(ctx, conn, b.opts.Clients, b.opts.Ingest, true, msg)
	elapsed := time.Since(start)
	if err != nil {
		m.abort()
		return side{}, err
	}
	return side{N: b.opts.Ingest, Elapsed: elapsed, Samples: lat, Latency: Summarize(lat), Cost: m.stop(b.opts.Ingest)}, nil
}

// ingestRelay starts the real API in this process and posts to it from
// Clients keep-alive HTTP clients at once, one notification a request.
func (b *bench) ingestRelay(ctx context.Context, qt retry.QueueType) (side, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	a, err := b.startAPI(ctx, qt, "ingest-relay", b.opts.Clients)
	if err != nil {
		return side{}, err
	}
	defer a.stop()
	return b.postSingles(ctx, poster(a.client, a.base+"/v1/notifications", requestBody))
}

// postSingles measures post, one notification a request from Clients
// clients, once it is accepted and warmed up: the single-request side of
// the API and of the minimal publisher alike.
func (b *bench) postSingles(ctx context.Context, post func(context.Context) error) (side, error) {
	if err := waitAccepting(ctx, post); err != nil {
		return side{}, err
	}
	if _, err := drive(ctx, b.opts.Clients, warmUp(b.opts.Ingest), post); err != nil {
		return side{}, fmt.Errorf("warm up: %w", err)
	}
	m := startMeter(b.broker)
	start := time.Now()
	lat, err := drive(ctx, b.opts.Clients, b.opts.Ingest, post)
	elapsed := time.Since(start)
	if err != nil {
		m.abort()
		return side{}, err
	}
	return side{N: b.opts.Ingest, Elapsed: elapsed, Samples: lat, Latency: Summarize(lat), Cost: m.stop(b.opts.Ingest)}, nil
}

// ingestBatch starts the real API in this process and posts Ingest
// notifications to POST /v1/notifications/batch, BatchSize a request, from
// BatchClients keep-alive HTTP clients at once. Its rate and cost are per
// notification.
func (b *bench) ingestBatch(ctx context.Context, qt retry.QueueType) (side, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	a, err := b.startAPI(ctx, qt, "ingest-batch", b.opts.BatchClients)
	if err != nil {
		return side{}, err
	}
	defer a.stop()
	size := b.opts.BatchSize
	post := poster(a.client, a.base+"/v1/notifications/batch", batchBody(size))
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

// batchBody is a POST /v1/notifications/batch body of size notifications,
// each requestBody.
func batchBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"notifications":[`)
	for i := range size {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(requestBody)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// benchAPI is the real API running in this process for one side.
type benchAPI struct {
	base   string // http://127.0.0.1:port
	client *http.Client
	stop   func()
}

// startAPI starts the API as `relay api` runs, with the TTL backend and a
// SQLite history in a temporary DATA_DIR, its entities named for figure,
// and waits until it is ready; clients is the HTTP client's connection
// pool. stop shuts it down and removes the DATA_DIR.
func (b *bench) startAPI(ctx context.Context, qt retry.QueueType, figure string, clients int) (*benchAPI, error) {
	dataDir, err := os.MkdirTemp("", "relay-bench-history-")
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"AMQP_URL": b.url, "TOPOLOGY_PREFIX": b.names(qt, figure), "QUEUE_TYPE": string(qt),
		"DELAY_BACKEND": string(retry.TTL), "HTTP_ADDR": "127.0.0.1:0", "API_TOKENS": benchToken,
		"SHUTDOWN_TIMEOUT": "5s", "DATA_DIR": dataDir,
	}
	fail := func(err error) (*benchAPI, error) {
		os.RemoveAll(dataDir)
		return nil, err
	}
	cfg, err := api.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		return fail(err)
	}
	// The API logs every request, as it does in production; the bench
	// pays for the encoding and throws the lines away.
	log := config.Logger(io.Discard, "api")
	topo, err := cfg.Topology(channel.Routes())
	if err != nil {
		return fail(err)
	}
	b.janitor.topology(topo)
	b.janitor.exchange(events.ExchangeName(topo))
	b.janitor.queue(topo.Name(events.HistoryQueue))
	srvCtx, cancel := context.WithCancel(ctx)
	srv, err := api.Start(srvCtx, cfg, api.EndpointsConfig{RotationGrace: api.DefaultRotationGrace}, log)
	if err != nil {
		cancel()
		return fail(err)
	}
	client := newClient(clients)
	a := &benchAPI{base: "http://" + srv.Addr(), client: client, stop: func() {
		client.CloseIdleConnections()
		cancel()
		_ = srv.Wait()
		os.RemoveAll(dataDir)
	}}
	if err := waitReady(ctx, client, a.base+"/readyz"); err != nil {
		a.stop()
		return nil, err
	}
	return a, nil
}

// httpFloor serves a handler that reads the body and answers 202, with no
// broker behind it, and drives it as the ingest figure drives the API:
// what net/http alone costs on this machine.
func (b *bench) httpFloor(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen: %w", err)
	}
	answer := []byte(`{"id":"` + api.NewID() + `","channels":["webhook"]}`)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(answer)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	client := newClient(b.opts.Clients)
	defer client.CloseIdleConnections()
	post := poster(client, "http://"+ln.Addr().String()+"/v1/notifications", requestBody)
	if _, err := drive(ctx, b.opts.Clients, warmUp(b.opts.Ingest), post); err != nil {
		return 0, fmt.Errorf("warm up: %w", err)
	}
	start := time.Now()
	if _, err := drive(ctx, b.opts.Clients, b.opts.Ingest, post); err != nil {
		return 0, err
	}
	return PerSecond(b.opts.Ingest, time.Since(start)), nil
}

// newClient is an HTTP client keeping a keep-alive connection per client.
func newClient(clients int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: clients, MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients,
		DisableCompression: true, IdleConnTimeout: time.Minute,
	}}
}

// poster posts body to url as the API expects it, with benchToken, and
// wants 202: every notification accepted.
func poster(client *http.Client, url string, body []byte) func(context.Context) error {
	return posterAs(client, url, benchToken, body)
}

// posterAs is poster with the bearer token given.
func posterAs(client *http.Client, url, token string, body []byte) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			detail, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("POST %s: status %d, want 202: %s", url, resp.StatusCode, bytes.TrimSpace(detail))
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
}

// waitAccepting posts one notification at a time until the API accepts
// one, within 10s: a quorum queue declared a moment ago may refuse the
// first publishes while the API already reports ready.
func waitAccepting(ctx context.Context, post func(context.Context) error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		err := post(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the API to accept a notification: %w", ctx.Err())
		case <-deadline:
			return fmt.Errorf("the API accepted no notification within 10s: %w", err)
		case <-tick.C:
		}
	}
}

// drive calls do n times from clients goroutines at once and returns the
// duration of every call; it stops at the first error.
func drive(ctx context.Context, clients, n int, do func(context.Context) error) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	all := make([]time.Duration, 0, n)
	var wg sync.WaitGroup
	for range min(clients, n) {
		wg.Go(func() {
			mine := make([]time.Duration, 0, n/clients+1)
			defer func() {
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			}()
			for next.Add(1) <= int64(n) {
				start := time.Now()
				if err := do(ctx); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
				mine = append(mine, time.Since(start))
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, fmt.Errorf("%d of %d calls done: %w", len(all), n, first)
	}
	return all, nil
}

// waitReady polls url until it answers 200, within ctx.
func waitReady(ctx context.Context, client *http.Client, url string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", url, ctx.Err())
		case <-deadline:
			return fmt.Errorf("%s did not answer 200 within 15s", url)
		case <-tick.C:
		}
	}
}

func ptr(v float64) *float64 { return &v }

// ms writes a duration as milliseconds.
func ms(d time.Duration) *float64 { return ptr(float64(d) / float64(time.Millisecond)) }

// micros writes a duration as microseconds.
func micros(d time.Duration) *float64 { return ptr(float64(d) / float64(time.Microsecond)) }
