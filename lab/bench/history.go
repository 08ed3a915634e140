package bench

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/api"
)

// feedBatch is how many messages of the history queue events.Feed stores
// at once: its default Batch.
const feedBatch = 500

// historyPrefill is how many notifications the store holds before its
// rate is timed: a store in use, with planner statistics, not an empty
// one whose plans suit ten rows. A quick run, which checks the figure's
// machinery (under the race detector, in make test), fills a tenth.
const historyPrefill = 10000

// prefill is how many notifications the history figure's store holds
// before it is timed, in a run with these options.
func (o Options) prefill() int {
	if o.Quick {
		return historyPrefill / 10
	}
	return historyPrefill
}

// historyTarget is the history's target: it stores events at least as
// fast as the worker handles messages, so it never falls behind.
const historyTarget = 1.0

// The history's backends, as the figures name them.
const (
	backendSQLite   = "sqlite"
	backendPostgres = "postgres"
)

// historyGets is how many reads the history-get figure times on each
// side, after a tenth as many untimed.
func (o Options) historyGets() int {
	if o.Quick {
		return 500
	}
	return 10000
}

// The encodings of the bench's notification ids: the API's, and one of
// the same length whose order is the order of the bits it encodes.
var (
	idEncoding      = base32.StdEncoding.WithPadding(base32.NoPadding)
	orderedEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)
)

// idBits are 128 random-looking bits, a function of i.
func idBits(i int) [16]byte {
	sum := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("relay-lab bench history "), uint64(i)))
	return [16]byte(sum[:16])
}

// historyEpoch is when the bench's notification 0 was made; the i-th was
// made i milliseconds later.
var historyEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// historyID is the id of the bench's i-th notification as the API makes
// it (api.NewIDAt: time-ordered, the i-th made i ms after historyEpoch),
// with random-looking bits that are a function of i.
func historyID(i int) string {
	bits := idBits(i)
	return api.NewIDAt(historyEpoch.Add(time.Duration(i)*time.Millisecond), bits[:10])
}

// orderedID is the id of the i-th of n notifications as historyID, but
// in the order of i, the n of them spread evenly over the ids' range:
// loaded in that order, they go to the ends of the store's indexes, where
// random ids would go anywhere, and a fill of a million takes minutes
// instead of hours on a small machine. Its alphabet (0-9, a-v) sorts as
// the bits it encodes.
func orderedID(i, n int) string {
	bits := idBits(i)
	step := math.MaxUint64 / uint64(n)
	binary.BigEndian.PutUint64(bits[:8], uint64(i)*step+binary.BigEndian.Uint64(bits[:8])%step)
	return api.IDPrefix + strings.ToLower(orderedEncoding.EncodeToString(bits[:]))
}

// historyNotification is the bench's i-th notification, id, accepted at at,
// as the API records it, with the events the pipeline publishes about it:
// a webhook copy delivered at once, and an email copy delivered at once
// too, or, every tenth, after a retry (failed, retrying, requeued,
// delivered), or, every hundredth, parked after three failures.
func historyNotification(id string, i int, at time.Time) (notification.Accepted, []notification.Event) {
	email, webhook := channel.Email.Name(), channel.Webhook.Name()
	address := fmt.Sprintf("user%d@example.com", i)
	a := notification.Accepted{ID: id, CreatedAt: at, Channels: []string{email, webhook},
		Recipients: []string{address, webhookTarget},
		Payload: json.RawMessage(`{"email":{"to":"` + address + `","subject":"Your order ` + fmt.Sprint(i) +
			`"},"webhook":{"url":"` + webhookTarget + `","payload":{"event":"bench","order":12345,"total":"19.99"}}}`)}
	ev := func(ch string, attempt int, outcome retry.Outcome, after time.Duration) notification.Event {
		e := notification.Event{ID: id, Channel: ch, Attempt: attempt, Outcome: outcome, At: at.Add(after), Service: "worker-" + ch}
		switch outcome {
		case retry.Failed:
			e.Error, e.DelayMS, e.DurationMS = "421 4.7.0 Try again later", 1000, 120
		case retry.Retrying, retry.Requeued:
			e.Error, e.DelayMS, e.Service = "421 4.7.0 Try again later", 1100, "retrier"
		case retry.Delivered:
			e.DurationMS = 80
		case retry.Parked:
			e.Error, e.Reason, e.Service = "421 4.7.0 Try again later", "max-retries", "retrier"
		}
		return e
	}
	evs := []notification.Event{ev(webhook, 1, retry.Delivered, 200*time.Millisecond)}
	switch {
	case i%100 == 0:
		for n := 1; n <= 3; n++ {
			base := time.Duration(n) * 2 * time.Second
			evs = append(evs, ev(email, n, retry.Failed, base))
			if n < 3 {
				evs = append(evs, ev(email, n, retry.Retrying, base+10*time.Millisecond),
					ev(email, n+1, retry.Requeued, base+time.Second))
			}
		}
		evs = append(evs, ev(email, 3, retry.Parked, 6*time.Second+10*time.Millisecond))
	case i%10 == 0:
		evs = append(evs, ev(email, 1, retry.Failed, time.Second),
			ev(email, 1, retry.Retrying, time.Second+10*time.Millisecond),
			ev(email, 2, retry.Requeued, 2*time.Second+100*time.Millisecond),
			ev(email, 2, retry.Delivered, 2*time.Second+200*time.Millisecond))
	default:
		evs = append(evs, ev(email, 1, retry.Delivered, 300*time.Millisecond))
	}
	return a, evs
}

// historyEventsPerNotification is the average number of attempt events
// historyNotification makes for a notification, over its cycle of 100.
func historyEventsPerNotification() float64 {
	n := 0
	for i := range 100 {
		_, evs := historyNotification("ntf_cycle", i, time.Time{})
		n += len(evs)
	}
	return float64(n) / 100
}

// storeBatch is what events.Feed stores from one batch of the history
// queue: the accepted records, then the attempt events.
type storeBatch struct {
	accepted []notification.Accepted
	events   []notification.Event
}

// feedBatches cuts the history queue's messages about notifications
// first, first+1, … into the batches events.Feed stores, feedBatch
// messages each: a notification's accepted record goes ahead of its
// events, as the API publishes it before any worker sees the
// notification, and a notification's messages may straddle two batches.
// It stops at the first notification boundary where the batches hold at
// least n attempt events, and returns the batches, the next notification
// and the number of attempt events (accepted records are not counted).
func feedBatches(first, n int, at func(int) time.Time) (batches []storeBatch, next, evs int) {
	var cur storeBatch
	messages := 0
	add := func(a *notification.Accepted, e *notification.Event) {
		if a != nil {
			cur.accepted = append(cur.accepted, *a)
		} else {
			cur.events = append(cur.events, *e)
		}
		if messages++; messages == feedBatch {
			batches = append(batches, cur)
			cur, messages = storeBatch{}, 0
		}
	}
	next = first
	for evs < n {
		a, es := historyNotification(historyID(next), next, at(next))
		add(&a, nil)
		for i := range es {
			add(nil, &es[i])
		}
		evs += len(es)
		next++
	}
	if messages > 0 {
		batches = append(batches, cur)
	}
	return batches, next, evs
}

// historyBaseline is the worker's fastest rate in rows, which the
// history's rate is held against, with its queue type; a nil rate when
// the worker was not measured.
func historyBaseline(rows []Row) (queue string, rate *float64) {
	for _, row := range rows {
		if row.Figure == FigWorkerRate && row.Relay != nil && (rate == nil || *row.Relay > *rate) {
			queue, rate = row.Queue, row.Relay
		}
	}
	return queue, rate
}

// historyRows measures how fast the history stores the pipeline's events,
// on SQLite and on PostgreSQL, against the worker's rate in rows.
func (b *bench) historyRows(ctx context.Context, rows []Row) ([]Row, error) {
	queue, worker := historyBaseline(rows)
	if worker == nil {
		b.progress("history: the worker figure was not measured, so the history's rates have nothing to be held against")
	}
	row := func(figure string) Row {
		return Row{Queue: queue, Figure: figure, Unit: UnitRate, Raw: worker, Baseline: "worker",
			Target: &Target{Kind: RatioAtLeast, Value: historyTarget}}
	}

	sqliteRow := row(FigHistorySQLiteRate)
	dataDir, err := os.MkdirTemp("", "relay-bench-history-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	// The API's own DSN when HISTORY_DSN is not set: DATA_DIR/history.db.
	lite, err := b.storeRate(ctx, backendSQLite, config.Store{DataDir: dataDir}.DSN())
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	sqliteRow.Relay, sqliteRow.RelayCost = ptr(lite.Rate()), &lite.Cost

	pgRow := row(FigHistoryPostgresRate)
	dsn, drop, err := b.postgresSchema(ctx)
	var unreachable *unreachableError
	switch {
	case errors.As(err, &unreachable):
		b.progress("WARNING: history (postgres) SKIPPED: %s; set HISTORY_BENCH_DSN to a PostgreSQL this machine reaches to measure it", unreachable)
		pgRow.Note = "skipped: " + unreachable.short()
		return []Row{sqliteRow, pgRow}, nil
	case err != nil:
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pg, err := b.storeRate(ctx, backendPostgres, dsn)
	if derr := drop(); derr != nil {
		err = errors.Join(err, derr)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pgRow.Relay, pgRow.RelayCost = ptr(pg.Rate()), &pg.Cost
	return []Row{sqliteRow, pgRow}, nil
}

// storeRate opens the store dsn names, fills it with the options' prefill
// notifications, then writes Consume attempt events of new notifications
// through it Rounds times, as events.Feed writes them, and returns the
// best round.
func (b *bench) storeRate(ctx context.Context, backend, dsn string) (side, error) {
	var best side
	err := labelled(ctx, "history/relay/"+backend, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
		defer cancel()
		st, err := store.Open(ctx, dsn)
		if err != nil {
			return err
		}
		defer st.Close()
		start := time.Now().Add(-time.Hour)
		at := func(i int) time.Time { return start.Add(time.Duration(i) * time.Millisecond) }
		prefill := b.opts.prefill()
		if err := st.Load(ctx, notifications(0, prefill, historyID, at, nil)); err != nil {
			return fmt.Errorf("fill with %d notifications: %w", prefill, err)
		}
		b.progress("history (%s): a store holding %s notifications; %s events a round, %d messages a batch",
			backend, thousands(int64(prefill)), thousands(int64(b.opts.Consume)), feedBatch)
		next := prefill
		for round := range b.opts.Rounds {
			var batches []storeBatch
			var n int
			batches, next, n = feedBatches(next, b.opts.Consume, at)
			s, err := feed(ctx, st, batches, n)
			if err != nil {
				return err
			}
			b.progress("history (%s), round %d: %s", backend, round+1, s)
			if s.Rate() > best.Rate() {
				best = s
			}
		}
		return nil
	})
	return best, err
}

// feed writes batches through sink as events.Feed does, each its own
// Accept and Record, and times it; n is the attempt events they hold.
func feed(ctx context.Context, sink events.Sink, batches []storeBatch, n int) (side, error) {
	m := startMeter(nil)
	start := time.Now()
	for _, batch := range batches {
		if err := sink.Accept(ctx, batch.accepted); err != nil {
			m.abort()
			return side{}, fmt.Errorf("accept %d notifications: %w", len(batch.accepted), err)
		}
		if err := sink.Record(ctx, batch.events); err != nil {
			m.abort()
			return side{}, fmt.Errorf("record %d events: %w", len(batch.events), err)
		}
	}
	elapsed := time.Since(start)
	return side{N: n, Elapsed: elapsed, Cost: m.stop(n)}, nil
}

// notifications yields the bench's notifications first to first+n-1,
// named by id, with their events, calling done, if set, after each.
func notifications(first, n int, id func(int) string, at func(int) time.Time, done func(int)) iter.Seq2[notification.Accepted, []notification.Event] {
	return func(yield func(notification.Accepted, []notification.Event) bool) {
		for i := first; i < first+n; i++ {
			if !yield(historyNotification(id(i), i, at(i))) {
				return
			}
			if done != nil {
				done(i - first + 1)
			}
		}
	}
}

// unreachableError is a PostgreSQL the bench could not connect to: its
// figure is skipped, not failed.
type unreachableError struct {
	where string // host:port/database, never the password
	err   error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("no PostgreSQL answers at %s: %v", e.where, e.err)
}

// short is the reason for the report's table.
func (e *unreachableError) short() string { return "no PostgreSQL at " + e.where }

// postgresSchema creates a schema of its own, named after the run's
// prefix, on the bench's PostgreSQL, and returns a DSN whose search_path
// names it, with a function that drops it and everything in it: the
// database is left as found. The store's migration creates the pg_trgm
// extension where it is missing; drop removes it again then, unless
// something else came to depend on it meanwhile.
func (b *bench) postgresSchema(ctx context.Context) (dsn string, drop func() error, err error) {
	u, err := url.Parse(b.historyDSN)
	if err != nil {
		return "", nil, errors.New("HISTORY_BENCH_DSN is not a URL")
	}
	where := u.Host + u.Path
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, b.historyDSN)
	if err != nil {
		return "", nil, &unreachableError{where: where, err: err}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	hadTrgm, err := hasExtension(cctx, conn, "pg_trgm")
	if err != nil {
		return "", nil, err
	}
	schema := b.postgresSchemaName()
	if _, err := conn.Exec(cctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	b.progress("history (postgres): schema %s on %s, dropped at the end", schema, where)
	drop = func() error {
		// Runs when the figure ends, however it ends: even when ctx is.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, b.historyDSN)
		if err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		if hadTrgm {
			return nil
		}
		if has, err := hasExtension(ctx, conn, "pg_trgm"); err != nil || !has {
			return err
		}
		// Without CASCADE: if another schema's index uses it by now, it
		// is no longer only the bench's and stays.
		if _, err := conn.Exec(ctx, "DROP EXTENSION pg_trgm"); err != nil {
			b.progress("history (postgres): the pg_trgm extension the store created stays: %v", err)
		}
		return nil
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// postgresSchemaName is the schema of this run: "relay_" and its prefix,
// such as relay_bench_0123abcd.
func (b *bench) postgresSchemaName() string {
	return "relay_" + strings.Trim(strings.ReplaceAll(b.prefix, ".", "_"), "_")
}

func hasExtension(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_extension WHERE extname = $1", name).Scan(&n); err != nil {
		return false, fmt.Errorf("look for extension %s: %w", name, err)
	}
	return n > 0, nil
}

// historyGetRows fills a SQLite store with HistoryNotifications
// notifications as fast as the store allows, then times GET
// /v1/notifications/{id} of random ones through the API's handler, next
// to the store's Get alone. filled is how long the fill took.
func (b *bench) historyGetRows(ctx context.Context) (rows []Row, filled time.Duration, err error) {
	var relay, raw Latency
	err = labelled(ctx, "history-get/relay/sqlite", func(ctx context.Context) error {
		relay, raw, filled, err = b.historyGet(ctx)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	detail := "with " + thousands(int64(b.opts.HistoryNotifications)) + " stored"
	b.progress("history-get: GET /v1/notifications/{id} %s: p50 %s, p99 %s; store.Get alone p50 %s, p99 %s", detail,
		roundDuration(relay.P50), roundDuration(relay.P99), roundDuration(raw.P50), roundDuration(raw.P99))
	return []Row{
		{Figure: FigHistoryGetP50, Detail: detail, Unit: UnitMs, Relay: ms(relay.P50), Raw: ms(raw.P50), Baseline: "store.Get"},
		{Figure: FigHistoryGetP99, Detail: detail, Unit: UnitMs, Relay: ms(relay.P99), Raw: ms(raw.P99), Baseline: "store.Get"},
	}, filled, nil
}

func (b *bench) historyGet(ctx context.Context) (relay, raw Latency, filled time.Duration, err error) {
	n := b.opts.HistoryNotifications
	// The fill is bounded by its own size, not by --timeout: a million
	// notifications take their time on a small machine.
	dataDir, err := os.MkdirTemp("", "relay-bench-history-")
	if err != nil {
		return Latency{}, Latency{}, 0, err
	}
	defer os.RemoveAll(dataDir)
	dsn := config.Store{DataDir: dataDir}.DSN()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return Latency{}, Latency{}, 0, err
	}
	defer st.Close()

	b.progress("history-get: filling a SQLite store with %s notifications (a copy per channel, their attempts)…", thousands(int64(n)))
	start := time.Now()
	// Created a second apart up to now: a million is eleven days' worth.
	oldest := start.Add(-time.Duration(n) * time.Second)
	at := func(i int) time.Time { return oldest.Add(time.Duration(i) * time.Second) }
	step := max(n/10, 1)
	report := func(done int) {
		if done%step == 0 && done < n {
			el := time.Since(start)
			b.progress("history-get: %s of %s notifications stored, %s, %s/s", thousands(int64(done)), thousands(int64(n)),
				el.Round(100*time.Millisecond), thousands(int64(PerSecond(done, el))))
		}
	}
	id := func(i int) string { return orderedID(i, n) }
	if err := st.Load(ctx, notifications(0, n, id, at, report)); err != nil {
		return Latency{}, Latency{}, 0, fmt.Errorf("fill the history: %w", err)
	}
	filled = time.Since(start)
	size := fileSize(dsn) + fileSize(dsn+"-wal")
	b.progress("history-get: %s notifications stored in %s, %s/s; database %.0f MiB", thousands(int64(n)),
		filled.Round(100*time.Millisecond), thousands(int64(PerSecond(n, filled))), mib(uint64(size)))

	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Latency{}, Latency{}, 0, fmt.Errorf("listen: %w", err)
	}
	// The API's own handler, routes, token check and middleware included,
	// on the store; no broker is needed to read the history.
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second,
		Handler: api.NewServer(api.Deps{Tokens: []string{benchToken}, History: st})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	client := newClient(1)
	defer client.CloseIdleConnections()
	base := "http://" + ln.Addr().String() + "/v1/notifications/"
	// Each side times its read and checks the answer after the clock
	// stopped.
	sides := [2]func(context.Context, string) (time.Duration, error){
		func(ctx context.Context, id string) (time.Duration, error) {
			return getNotification(ctx, client, base, id)
		},
		func(ctx context.Context, id string) (time.Duration, error) {
			t := time.Now()
			got, err := st.Get(ctx, id)
			took := time.Since(t)
			if err == nil && len(got.Copies) != 2 {
				err = fmt.Errorf("notification %s: %d copies, want 2", id, len(got.Copies))
			}
			return took, err
		},
	}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	gets := b.opts.historyGets()
	var samples [2][]time.Duration
	for i := range gets/10 + gets {
		// The two sides take turns going first, so that neither always
		// finds the page cache warmer; each reads an id of its own.
		for k := range 2 {
			who := (i + k) % 2
			took, err := sides[who](ctx, id(rng.IntN(n)))
			if err != nil {
				return Latency{}, Latency{}, 0, err
			}
			if i >= gets/10 { // the first tenth warms up
				samples[who] = append(samples[who], took)
			}
		}
	}
	return Summarize(samples[0]), Summarize(samples[1]), filled, nil
}

// getNotification asks the API for notification id, times it until the
// answer is read, and wants it back with its two copies.
func getNotification(ctx context.Context, client *http.Client, base, id string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+id, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	t := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(resp.Body)
	took := time.Since(t)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("GET /v1/notifications/%s: %w", id, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /v1/notifications/%s: status %d, want 200: %.200s", id, resp.StatusCode, body)
	}
	var got struct {
		ID     string            `json:"id"`
		Copies []json.RawMessage `json:"copies"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.ID != id || len(got.Copies) != 2 {
		return 0, fmt.Errorf("GET /v1/notifications/%s: %.200s, want the notification with two copies", id, body)
	}
	return took, nil
}

// fileSize is the size of a file, 0 when it cannot be read.
func fileSize(path string) int64 {
	fi, err := os.Stat(filepath.Clean(path))
	if err != nil {
		return 0
	}
	return fi.Size()
}
