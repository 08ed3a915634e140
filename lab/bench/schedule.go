package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/relay-demo/relay/demo/all"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/lab/internal/stats"
	"github.com/relay-demo/relay/retry"
)

// The schedule figures: how late notifications scheduled through the API
// reach their downstream, on the levels backend, while --scheduled others
// wait in the same levels.
const (
	FigScheduleP50   = "schedule (levels): lateness p50"
	FigScheduleP99   = "schedule (levels): lateness p99"
	FigScheduleMax   = "schedule (levels): lateness max"
	FigScheduleEarly = "schedule (levels): notifications early"
)

// scheduleP99Target is the lateness a scheduled send should keep at p99,
// in milliseconds; none may be early.
const scheduleP99Target = 100

// unitNotifications counts notifications.
const unitNotifications = "notifications"

// scheduleProbes is how many notifications the schedule figure times,
// due 2 to 20 s ahead while the others wait (--quick: 50, 2 to 6 s).
const scheduleProbes = 200

// scheduleLead is how far ahead the first timed notification is due.
const scheduleLead = 2 * time.Second

// scheduleProbing is how many notifications the schedule figure times and
// over how long a window after scheduleLead their due times spread.
func scheduleProbing(quick bool) (probes int, spread time.Duration) {
	if quick {
		return 50, 4 * time.Second
	}
	return scheduleProbes, 18 * time.Second
}

// scheduleBatch is how many scheduled notifications go in one POST
// /v1/notifications/batch.
const scheduleBatch = 500

// scheduleRows runs relay (API, webhook worker, retrier; `relay all`) on
// the levels backend, schedules --scheduled webhook notifications an hour
// ahead, to wait in the levels throughout, then schedules scheduleProbes
// more, due 2 to 20 s ahead, and times each probe's arrival at a local
// receiver against its due time.
func (b *bench) scheduleRows(ctx context.Context, qt retry.QueueType) ([]Row, error) {
	n := b.opts.Scheduled
	probes, spread := scheduleProbing(b.opts.Quick)
	var mu sync.Mutex
	arrived := make(map[string]time.Time, probes)
	later := 0 // arrivals of the notifications due in an hour
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		if r.URL.Path != "/probe" {
			later++
		} else if _, ok := arrived[r.Header.Get("webhook-id")]; !ok {
			arrived[r.Header.Get("webhook-id")] = at
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	dataDir, err := os.MkdirTemp("", "relay-bench-schedule-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	prefix := b.names(qt, "schedule")
	env := map[string]string{
		"AMQP_URL": b.url, "TOPOLOGY_PREFIX": prefix, "QUEUE_TYPE": string(qt), "DELAY_BACKEND": string(retry.Levels),
		"RETRY_DELAYS": "1s", "RETRY_MAX": "3", "API_TOKENS": benchToken, "DATA_DIR": dataDir, "SHUTDOWN_TIMEOUT": "5s",
		// Ports the system chooses as relay all binds them, read back
		// from its log.
		"HTTP_ADDR": "127.0.0.1:0", "FLAKY_HTTP_ADDR": "127.0.0.1:0", "FLAKY_SMTP_ADDR": "127.0.0.1:0",
		"FLAKY_EMAIL_SCENARIO": "healthy", "FLAKY_WEBHOOK_SCENARIO": "healthy", "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8",
	}
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), QueueType: qt, Backend: retry.Levels,
		Policy: retry.Policy{Delays: []time.Duration{time.Second}, MaxRetries: 3}}
	b.janitor.topology(topo)
	b.janitor.exchange(events.ExchangeName(topo))
	b.janitor.queue(topo.Name(events.HistoryQueue))

	runCtx, stop := context.WithCancel(ctx)
	var log lockedBuffer
	var runErr error
	stopped := make(chan struct{})
	go func() {
		runErr = all.Run(runCtx, func(k string) string { return env[k] }, &log)
		close(stopped)
	}()
	defer func() {
		stop()
		<-stopped
	}()
	addrs, err := listening(ctx, &log, stopped, &runErr)
	if err != nil {
		return nil, err
	}
	// The rest of the log is thrown away, as the bench's other figures do.
	log.discard()
	client := newClient(4)
	defer client.CloseIdleConnections()
	base := "http://" + addrs.API
	if err := waitReady(ctx, client, base+"/readyz"); err != nil {
		return nil, err
	}

	// The waiting load: n notifications due in an hour, which the run
	// never sees arrive (the janitor deletes them with the topology).
	start := time.Now()
	b.progress("%s: scheduling %s notifications an hour ahead", qt, thousands(int64(n)))
	if err := b.postSchedule(ctx, client, base, n, func(int) time.Time { return start.Add(time.Hour) }, receiver.URL+"/later", nil); err != nil {
		return nil, err
	}
	// The history takes the records of the notifications in a while: the
	// probes are timed once it has, against the waiting, not the posting.
	if err := b.drained(ctx, topo.Name(events.HistoryQueue), time.Minute); err != nil {
		return nil, err
	}
	b.progress("%s: %s waiting, scheduled and recorded in %s; now %d probes, due 2 to %s ahead", qt, thousands(int64(n)),
		time.Since(start).Round(time.Millisecond), probes, scheduleLead+spread)
	// The probes, timed: due from 2 s ahead, spread evenly.
	start = time.Now()
	dues := map[string]time.Time{}
	due := func(i int) time.Time {
		return start.Add(scheduleLead + time.Duration(i)*spread/time.Duration(probes)).Truncate(time.Millisecond)
	}
	if err := b.postSchedule(ctx, client, base, probes, due, receiver.URL+"/probe", dues); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Until(due(probes-1)) + b.opts.Timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		mu.Lock()
		got := len(arrived)
		mu.Unlock()
		if got >= probes {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d scheduled probes arrived within %s of the last one's due time", got, probes, b.opts.Timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if later > 0 {
		return nil, fmt.Errorf("%d notifications due in an hour arrived already", later)
	}
	late := make([]float64, 0, probes)
	early := 0
	for id, due := range dues {
		d := arrived[id].Sub(due)
		if d < 0 {
			early++
		}
		late = append(late, float64(d)/float64(time.Millisecond))
	}
	slices.Sort(late)
	at := func(q float64) float64 { return stats.Percentile(late, q*100) }
	q := string(qt)
	detail := fmt.Sprintf("%d probes, %s waiting", probes, thousands(int64(n)))
	b.progress("%s: lateness p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d early", qt, at(0.5), at(0.99), at(1), early)
	return []Row{
		{Queue: q, Figure: FigScheduleP50, Detail: detail, Unit: UnitMs, Relay: ptr(at(0.5))},
		{Queue: q, Figure: FigScheduleP99, Detail: detail, Unit: UnitMs, Relay: ptr(at(0.99)), Target: &Target{Kind: AtMost, Value: scheduleP99Target}},
		{Queue: q, Figure: FigScheduleMax, Detail: detail, Unit: UnitMs, Relay: ptr(at(1))},
		{Queue: q, Figure: FigScheduleEarly, Detail: detail, Unit: unitNotifications, Relay: ptr(float64(early)), Target: &Target{Kind: AtMost, Value: 0}},
	}, nil
}

// postSchedule schedules count webhook notifications to url, the i-th due
// at due(i), in batches, and notes each one's due time in dues, if not
// nil.
func (b *bench) postSchedule(ctx context.Context, client *http.Client, base string, count int, due func(int) time.Time, url string, dues map[string]time.Time) error {
	for first := 0; first < count; first += scheduleBatch {
		k := min(scheduleBatch, count-first)
		items := make([]json.RawMessage, k)
		for i := range k {
			items[i] = json.RawMessage(fmt.Sprintf(`{"webhook":{"url":%q,"payload":{"i":%d}},"send_at":%q}`,
				url, first+i, due(first+i).UTC().Format(time.RFC3339Nano)))
		}
		ids, err := postScheduled(ctx, client, base, items)
		if err != nil {
			return fmt.Errorf("schedule notifications %d to %d: %w", first, first+k, err)
		}
		if dues != nil {
			for i, id := range ids {
				dues[id] = due(first + i)
			}
		}
	}
	return nil
}

// postScheduled posts one batch and returns its ids, in order; every item
// must be accepted.
func postScheduled(ctx context.Context, client *http.Client, base string, items []json.RawMessage) ([]string, error) {
	body, err := json.Marshal(map[string]any{"notifications": items})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/notifications/batch", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+benchToken)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("POST /v1/notifications/batch: %s: %.300s", resp.Status, raw)
	}
	var ans struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return nil, err
	}
	if len(ans.Results) != len(items) {
		return nil, errors.New("the batch's answer has another number of results than it had items")
	}
	ids := make([]string, len(items))
	for i, r := range ans.Results {
		ids[i] = r.ID
	}
	return ids, nil
}

// drained waits until queue holds no message ready, at most patience.
func (b *bench) drained(ctx context.Context, queue string, patience time.Duration) error {
	conn, err := retry.Dial(b.url, "relay-lab bench")
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	deadline := time.Now().Add(patience)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		q, err := ch.QueueDeclarePassive(queue,
			true,  // durable
			false, // autoDelete
			false, // exclusive
			false, // noWait
			nil)
		if err != nil {
			return fmt.Errorf("read %s: %w", queue, err)
		}
		if q.Messages == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still holds %d messages after %s", queue, q.Messages, patience)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// listening waits until relay all, writing its log to log, says where it
// listens (all.Listening), for 15 s at most; stopped closes when it has
// returned, with *runErr.
func listening(ctx context.Context, log *lockedBuffer, stopped <-chan struct{}, runErr *error) (all.Addrs, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Second)
	for {
		if a, ok := all.Listening(log.String()); ok {
			return a, nil
		}
		select {
		case <-ctx.Done():
			return all.Addrs{}, ctx.Err()
		case <-stopped:
			return all.Addrs{}, fmt.Errorf("relay all stopped before it listened: %v", *runErr)
		case <-deadline:
			return all.Addrs{}, errors.New("relay all did not say where it listens within 15s")
		case <-tick.C:
		}
	}
}

// lockedBuffer is a log the services of relay all write to at once, kept
// until discard.
type lockedBuffer struct {
	mu         sync.Mutex
	b          bytes.Buffer
	discarding bool
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.discarding {
		return len(p), nil
	}
	return l.b.Write(p)
}

// discard drops what was written and whatever is written from now on.
func (l *lockedBuffer) discard() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.discarding = true
	l.b = bytes.Buffer{}
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
