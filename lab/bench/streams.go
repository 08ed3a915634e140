package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
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

// Targets of the dashboard's event streams: with the streams open the API
// stays under maxStreamsMiB, and once they close its RSS comes back to
// within settleShare of what it was idle.
const (
	maxStreamsMiB = 100
	settleShare   = 0.10
)

// streamsPerAddress is how many streams the figure opens from one loopback
// source address: the API's default DASHBOARD_MAX_STREAMS_PER_CLIENT, so
// the API runs with its default caps.
const streamsPerAddress = 20

// MaxStreams is the most streams --streams accepts: the API's default
// DASHBOARD_MAX_STREAMS.
const MaxStreams = 2000

// streamEvents is how many pipeline events are published before the
// streams open: as many as the dashboard's hub kept to replay to every
// new stream, when it did.
const streamEvents = 2000

// streamsSettle bounds how long the figure waits for the RSS to come back
// after the streams closed.
const streamsSettle = 30 * time.Second

// streamMemory is what the stream figure measured.
type streamMemory struct {
	idle, open, closed uint64
	// settled is how long after the streams closed the RSS was back
	// within settleShare of idle, or the time the figure gave up.
	settled time.Duration
}

// streamRows runs the real API in this process, opens Streams idle,
// authenticated event streams to its dashboard and reads the process's
// RSS idle, with the streams open and after they closed; settled is how
// long the RSS took to come back.
func (b *bench) streamRows(ctx context.Context, qt retry.QueueType) (rows []Row, settled time.Duration, err error) {
	var m streamMemory
	err = labelled(ctx, "streams/relay/"+string(qt), func(ctx context.Context) (err error) {
		m, err = b.streams(ctx, qt)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	b.progress("%s: streams: RSS %.1f MiB idle, %.1f MiB with %s idle event streams, %.1f MiB %s after they closed", qt,
		mib(m.idle), mib(m.open), thousands(int64(b.opts.Streams)), mib(m.closed), m.settled.Round(10*time.Millisecond))
	q := string(qt)
	// Back within settleShare of idle, as an absolute bound for the table.
	back := float64(int(mib(m.idle)*(1+settleShare)*10+0.5)) / 10
	return []Row{
		{Queue: q, Figure: FigStreamsIdle, Unit: UnitMiB, Relay: ptr(mib(m.idle))},
		{Queue: q, Figure: FigStreamsOpen, Unit: UnitMiB, Relay: ptr(mib(m.open)), Target: &Target{Kind: AtMost, Value: maxStreamsMiB}},
		{Queue: q, Figure: FigStreamsClosed, Unit: UnitMiB, Relay: ptr(mib(m.closed)), Target: &Target{Kind: AtMost, Value: back}},
	}, m.settled, nil
}

// streams measures the figure. The clients run in this process too, but
// hold only a socket each: no goroutine, no buffer.
func (b *bench) streams(ctx context.Context, qt retry.QueueType) (streamMemory, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	dataDir, err := os.MkdirTemp("", "relay-bench-history-")
	if err != nil {
		return streamMemory{}, err
	}
	defer os.RemoveAll(dataDir)
	env := map[string]string{
		"AMQP_URL": b.url, "TOPOLOGY_PREFIX": b.names(qt, "streams"), "QUEUE_TYPE": string(qt),
		"DELAY_BACKEND": string(retry.TTL), "HTTP_ADDR": "127.0.0.1:0", "API_TOKENS": benchToken,
		"SHUTDOWN_TIMEOUT": "5s", "DATA_DIR": dataDir,
	}
	cfg, err := api.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		return streamMemory{}, err
	}
	log := config.Logger(io.Discard, "api")
	topo, err := cfg.Topology(channel.Routes())
	if err != nil {
		return streamMemory{}, err
	}
	b.janitor.topology(topo)
	b.janitor.exchange(events.ExchangeName(topo))
	b.janitor.queue(topo.Name(events.HistoryQueue))
	srvCtx, stop := context.WithCancel(ctx)
	srv, err := api.Start(srvCtx, cfg, api.EndpointsConfig{RotationGrace: api.DefaultRotationGrace}, log)
	if err != nil {
		stop()
		return streamMemory{}, err
	}
	defer func() {
		stop()
		_ = srv.Wait()
	}()
	base := "http://" + srv.Addr()
	client := newClient(4)
	defer client.CloseIdleConnections()
	if err := waitReady(ctx, client, base+"/readyz"); err != nil {
		return streamMemory{}, err
	}
	if err := b.busyHistory(ctx, client, base, topo); err != nil {
		return streamMemory{}, err
	}
	client.CloseIdleConnections()

	var m streamMemory
	if m.idle, err = retainedRSS(); err != nil {
		return streamMemory{}, err
	}
	conns, err := openStreams(ctx, srv.Addr(), b.opts.Streams)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		return streamMemory{}, err
	}
	// Sit: the streams are open and idle; sample the RSS meanwhile.
	sit := 2 * time.Second
	if b.opts.Quick {
		sit = 500 * time.Millisecond
	}
	if m.open, err = retainedRSS(); err != nil {
		return streamMemory{}, err
	}
	if err := sample(ctx, sit, &m.open); err != nil {
		return streamMemory{}, err
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	closed := time.Now()
	// No debug.FreeOSMemory here: the memory has to come back by itself,
	// through the runtime's background scavenger.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(streamsSettle)
	for {
		runtime.GC()
		if m.closed, err = statusKB("VmRSS"); err != nil {
			return streamMemory{}, err
		}
		m.settled = time.Since(closed)
		if float64(m.closed) <= float64(m.idle)*(1+settleShare) {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return streamMemory{}, ctx.Err()
		case <-limit:
			return m, nil
		case <-tick.C:
		}
	}
}

// retainedRSS is the RSS after a garbage collection: what the process
// holds, not the garbage it has yet to collect. It does not hand free
// memory back to the system (no debug.FreeOSMemory).
func retainedRSS() (uint64, error) {
	runtime.GC()
	return statusKB("VmRSS")
}

// sample raises *peak to the highest RSS seen for d.
func sample(ctx context.Context, d time.Duration, peak *uint64) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	end := time.After(d)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end:
			return nil
		case <-tick.C:
			rss, err := statusKB("VmRSS")
			if err != nil {
				return err
			}
			*peak = max(*peak, rss)
		}
	}
}

// busyHistory gives the API the state of a busy pipeline: a stream is
// open while streamEvents events are published to the events exchange,
// and the history has recorded the last of them.
func (b *bench) busyHistory(ctx context.Context, client *http.Client, base string, topo retry.Topology) error {
	conn, err := retry.Dial(b.url, "relay-lab bench streams")
	if err != nil {
		return err
	}
	defer conn.Close()
	queue := queueFor(topo, channel.Webhook.Name())
	event := func(i int) (string, string, amqp.Publishing) {
		ev := notification.Event{Type: events.TypeAttempt, Outcome: "failed", ID: streamEventID(i),
			Channel: channel.Webhook.Name(), Queue: queue, Attempt: 1, DelayMS: 1000,
			Error: "POST " + webhookTarget + ": 503 Service Unavailable", At: time.Now().UTC(), Service: "bench"}
		body, _ := json.Marshal(ev) // a fixed shape always encodes
		return events.ExchangeName(topo), events.RoutingKey(ev), amqp.Publishing{ContentType: "application/json", UserId: retry.User(conn), Body: body}
	}
	// The API follows the events exchange on a connection of its own,
	// which may not be bound yet when /readyz says ready: publish a probe
	// until a stream shows it.
	if err := probeStream(ctx, client, base, conn, event); err != nil {
		return err
	}
	if _, err := publishPipelined(ctx, conn, preloadWindow, streamEvents, false, event); err != nil {
		return fmt.Errorf("publish %d events: %w", streamEvents, err)
	}
	id := streamEventID(streamEvents - 1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/notifications/"+id, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+benchToken)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the history did not record %d events within 30s", streamEvents)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// streamEventID is the notification id of the i-th event busyHistory
// publishes.
func streamEventID(i int) string { return fmt.Sprintf("ntf_bench%06d", i) }

// probeStream opens an authenticated event stream and publishes event 0
// until the stream carries an event.
func probeStream(ctx context.Context, client *http.Client, base string, conn *amqp.Connection, event message) error {
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, base+"/dashboard/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("open an event stream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("open an event stream: status %d, want 200", resp.StatusCode)
	}
	var seen atomic.Bool
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data:") {
				seen.Store(true)
				return
			}
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !seen.Load() {
		if _, err := publishPipelined(sctx, conn, 1, 1, false, event); err != nil {
			return fmt.Errorf("publish a probe event: %w", err)
		}
		select {
		case <-sctx.Done():
			return fmt.Errorf("no event reached the dashboard's stream within 15s: %w", sctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// openStreams opens n authenticated event streams to the API at addr,
// streamsPerAddress from each loopback source address, and returns them
// once the API has answered each with 200.
func openStreams(ctx context.Context, addr string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	var next atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				c, err := openStream(ctx, addr, sourceAddress(i/streamsPerAddress))
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("stream %d: %w", i+1, err))
					mu.Unlock()
					return
				}
				conns[i] = c
			}
		})
	}
	wg.Wait()
	var open []net.Conn
	for _, c := range conns {
		if c != nil {
			open = append(open, c)
		}
	}
	if len(errs) > 0 {
		return open, fmt.Errorf("open %d event streams: %w", n, errors.Join(errs...))
	}
	return open, nil
}

// sourceAddress is the k-th loopback address streams come from:
// 127.0.1.1, 127.0.1.2, … (Linux routes all of 127.0.0.0/8 to loopback).
func sourceAddress(k int) net.IP {
	return net.IPv4(127, 0, byte(1+k/250), byte(1+k%250))
}

// openStream asks for /dashboard/events with the bench's token from local
// and reads the answer's header, leaving the stream idle: the socket is
// all this side keeps.
func openStream(ctx context.Context, addr string, local net.IP) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: local}, Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /dashboard/events HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + benchToken +
		"\r\nAccept: text/event-stream\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	var buf [1024]byte
	got := 0
	for !bytes.Contains(buf[:got], []byte("\r\n\r\n")) {
		if got == len(buf) {
			c.Close()
			return nil, errors.New("answer header over 1 KiB")
		}
		k, err := c.Read(buf[got:])
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("read the answer: %w", err)
		}
		got += k
	}
	if status, _, _ := bytes.Cut(buf[:got], []byte("\r\n")); !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		c.Close()
		return nil, fmt.Errorf("answer %q, want 200", status)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}
