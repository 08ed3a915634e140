//go:build integration

package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
)

// mailServer is a real SMTP listener that records what reached it: each
// message's id and when it arrived. It can be down until a time (it
// answers every connection with 421 and hangs up, as a server going
// away does) and refuse chosen recipients for good (550).
type mailServer struct {
	addr string

	mu       sync.Mutex
	downTill time.Time
	sessions int // connections, answered or not
	refuse   string
	got      map[string][]time.Time // accepted, by message id
	tries    map[string]int         // every DATA, by message id
	arrivals []time.Time
}

func newMailServer(t *testing.T) *mailServer {
	t.Helper()
	m := &mailServer{got: map[string][]time.Time{}, tries: map[string]int{}}
	s := smtp.NewServer(m)
	s.Domain = "test.localhost"
	s.AllowInsecureAuth = true
	s.ReadTimeout, s.WriteTimeout = 30*time.Second, 30*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.addr = ln.Addr().String()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return m
}

func (m *mailServer) port() string {
	_, p, _ := net.SplitHostPort(m.addr)
	return p
}

func (m *mailServer) down(until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.downTill = until
}

// NewSession answers 421 while the server is down.
func (m *mailServer) NewSession(*smtp.Conn) (smtp.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions++
	if time.Now().Before(m.downTill) {
		return nil, &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "down for maintenance"}
	}
	return &mailSession{m: m}, nil
}

type mailSession struct {
	m  *mailServer
	to string
}

func (s *mailSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = to
	return nil
}
func (s *mailSession) Reset()        {}
func (s *mailSession) Logout() error { return nil }

func (s *mailSession) Data(r io.Reader) error {
	msg, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, msg.Body)
	id := strings.Trim(msg.Header.Get("X-Notification-ID"), " ")
	if id == "" {
		id = msg.Header.Get("Message-ID")
	}
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tries[id]++
	if m.refuse != "" && strings.Contains(s.to, m.refuse) {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
	}
	now := time.Now()
	m.got[id] = append(m.got[id], now)
	m.arrivals = append(m.arrivals, now)
	return nil
}

// snapshot copies what the server received.
func (m *mailServer) snapshot() (got map[string][]time.Time, tries map[string]int, arrivals []time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	got = map[string][]time.Time{}
	for k, v := range m.got {
		got[k] = slices.Clone(v)
	}
	tries = map[string]int{}
	for k, v := range m.tries {
		tries[k] = v
	}
	return got, tries, slices.Clone(m.arrivals)
}

// providerStack is the retrier and email workers (replicas of them) on a
// private topology, delivering to the mail servers the environment names.
type providerStack struct {
	topo retry.Topology
	conn *amqp.Connection

	mu     sync.Mutex
	events []notification.Event // the attempt events the workers published
}

// attempts returns the attempt events seen so far with the outcome.
func (s *providerStack) attempts(outcome retry.Outcome) []notification.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []notification.Event
	for _, e := range s.events {
		if e.Outcome == outcome {
			out = append(out, e)
		}
	}
	return out
}

// follow collects the events the services publish, from a queue of the
// test's own bound to the events exchange.
func (s *providerStack) follow(t *testing.T) {
	t.Helper()
	ch, err := s.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	if err := events.Declare(ch, s.topo); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, // durable, autoDelete
		true, false, nil) // exclusive, noWait
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "#", events.ExchangeName(s.topo), false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil) // autoAck, exclusive
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for d := range deliveries {
			var ev notification.Event
			if json.Unmarshal(d.Body, &ev) == nil && ev.Type == events.TypeAttempt {
				s.mu.Lock()
				s.events = append(s.events, ev)
				s.mu.Unlock()
			}
		}
	}()
}

func startProviders(t *testing.T, replicas int, env map[string]string) *providerStack {
	t.Helper()
	return startChannel(t, "email", replicas, env)
}

// startChannel is startProviders for the workers of the channel name.
func startChannel(t *testing.T, name string, replicas int, env map[string]string) *providerStack {
	t.Helper()
	prefix := retrytest.Prefix(t)
	base := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "levels",
		"RETRY_DELAYS": "200ms,400ms,800ms", "RETRY_MAX": "8", "SMTP_TLS": "none", "SMTP_TIMEOUT": "5s",
		"EMAIL_FROM": "relay@example.com", "CONCURRENCY": "8",
	}
	for k, v := range env {
		base[k] = v
	}
	getenv := func(k string) string { return base[k] }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	conn, err := retry.Dial(base["AMQP_URL"], "relay test "+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// The topology the processes declare, as the environment says.
	delays, err := retry.ParseDelays(base["RETRY_DELAYS"])
	if err != nil {
		t.Fatal(err)
	}
	maxRetries, _ := strconv.Atoi(base["RETRY_MAX"])
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.Backend(base["DELAY_BACKEND"]),
		QueueType: retry.QueueType(base["QUEUE_TYPE"]), Policy: retry.Policy{Delays: delays, MaxRetries: maxRetries}}
	if err := topo.Declare(ctx, conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		if ch, err := conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(events.ExchangeName(topo), false, false)
			ch.Close()
		}
	})
	// Registered after the deletion, so it runs before it: a process still
	// running when its queues go would declare them again.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	run := func(name string, f func(context.Context, func(string) string, io.Writer) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx, getenv, io.Discard); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	s := &providerStack{topo: topo, conn: conn}
	s.follow(t)
	run("retrier", retrier.Run)
	for i := range replicas {
		run(fmt.Sprintf("%s worker %d", name, i+1), func(ctx context.Context, getenv func(string) string, w io.Writer) error {
			return worker.Run(ctx, name, getenv, w)
		})
	}
	return s
}

// sendEmails publishes n email copies, spread over the span given, as the
// API would.
func (s *providerStack) sendEmails(t *testing.T, n int, to func(i int) string, over time.Duration) []string {
	t.Helper()
	pub, err := retry.NewPublisher(s.conn, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	start := time.Now()
	var ids []string
	for i := range n {
		if over > 0 {
			// Paced by the clock, not slept through: each publish waits
			// for its own moment in the span.
			at := start.Add(over * time.Duration(i) / time.Duration(n))
			if d := time.Until(at); d > 0 {
				<-time.After(d)
			}
		}
		id := fmt.Sprintf("ntf_%s_%d", strings.Trim(s.topo.Prefix, ".-"), i)
		note := &notification.Notification{V: 1, ID: id, CreatedAt: time.Now().UTC(), Parts: map[string]json.RawMessage{
			"email": json.RawMessage(`{"to":[` + strconv.Quote(to(i)) + `],"subject":"Hi","text":"hello"}`)}}
		body, _ := json.Marshal(note.For("email"))
		if err := pub.Publish(context.Background(), s.topo.Ingress(), "email", amqp.Publishing{
			MessageId: id, ContentType: notification.ContentType, DeliveryMode: amqp.Persistent,
			Timestamp: time.Now(), Body: body}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func (s *providerStack) parked(t *testing.T) []retry.DeadLetter {
	t.Helper()
	list, err := (retry.DeadLetters{Conn: s.conn, Topology: s.topo}).List(context.Background(), retry.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func twoServers(primary, secondary *mailServer, extra map[string]string) map[string]string {
	env := map[string]string{
		"SMTP_PROVIDERS": "2",
		"SMTP_1_NAME":    "primary", "SMTP_1_HOST": "127.0.0.1", "SMTP_1_PORT": primary.port(),
		"SMTP_2_NAME": "secondary", "SMTP_2_HOST": "127.0.0.1", "SMTP_2_PORT": secondary.port(),
		"SMTP_BREAKER_FAILURES": "3", "SMTP_BREAKER_COOLDOWN": "1s",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// TestFailoverDuringPrimaryOutage: the primary mail server is down for
// 10 s while 500 emails go out over 20 s. Every email arrives exactly
// once; those sent while it is down arrive through the secondary.
func TestFailoverDuringPrimaryOutage(t *testing.T) {
	primary, secondary := newMailServer(t), newMailServer(t)
	s := startProviders(t, 2, twoServers(primary, secondary, nil))
	const n = 500
	downFrom := time.Now()
	downTill := downFrom.Add(10 * time.Second)
	primary.down(downTill)
	// Over 20 s: the circuit's probes, 1 s apart and doubling while they
	// fail (1, 3, 7, 15 s), find the primary back within the run.
	ids := s.sendEmails(t, n, func(int) string { return "ada@example.com" }, 20*time.Second)

	var got1, got2 map[string][]time.Time
	retrytest.Eventually(t, 60*time.Second, func() bool {
		got1, _, _ = primary.snapshot()
		got2, _, _ = secondary.snapshot()
		return len(got1)+len(got2) >= n
	}, "not every email arrived")
	if parked := s.parked(t); len(parked) != 0 {
		t.Fatalf("%d parked, want none: %+v", len(parked), parked[0])
	}
	var twice, both, duringOnPrimary int
	for _, id := range ids {
		a, b := got1[id], got2[id]
		switch {
		case len(a)+len(b) == 0:
			t.Errorf("%s never arrived", id)
		case len(a) > 0 && len(b) > 0:
			both++
		case len(a) > 1 || len(b) > 1:
			twice++
		}
		for _, at := range a {
			if at.Before(downTill) {
				duringOnPrimary++
			}
		}
	}
	if twice+both > 0 {
		t.Errorf("%d emails arrived twice at one server, %d at both: want each once", twice, both)
	}
	if duringOnPrimary > 0 {
		t.Errorf("%d emails reached the primary while it was down", duringOnPrimary)
	}
	if len(got2) == 0 || len(got1) == 0 {
		t.Errorf("primary %d, secondary %d: want the outage's emails on the secondary and the rest on the primary", len(got1), len(got2))
	}
	// The events say which server each attempt went through, as the
	// servers saw it.
	var via map[string]int
	retrytest.Eventually(t, 10*time.Second, func() bool {
		via = map[string]int{}
		for _, e := range s.attempts(retry.Delivered) {
			via[e.Provider]++
		}
		return via["primary"]+via["secondary"] >= n
	}, "not every delivery's event arrived")
	if via["primary"] != len(got1) || via["secondary"] != len(got2) {
		t.Errorf("delivered events by provider %v, want primary %d and secondary %d as the servers saw", via, len(got1), len(got2))
	}
	failedOn := map[string]int{}
	for _, e := range s.attempts(retry.Failed) {
		failedOn[e.Provider]++
	}
	t.Logf("%d emails: %d through the primary, %d through the secondary; failed attempts by provider %v", n, len(got1), len(got2), failedOn)
}

// TestRateLimitAcrossReplicas: three worker replicas share a limit of
// 50/s, burst 1, on one mail server. The server never sees more than the
// rate, 10 % and the burst in any second of its clock (the window a
// provider enforcing "so many a second" counts in, as flaky's throttled
// scenario does), and every email arrives, once. The throughput and the
// most in any sliding one-second window are logged, never held to a
// bound: sends leave relay on their slots, but reach the server after a
// send's latency, which varies on a loaded machine, where copies that
// come back late for their slots also wait again (relay-lab bench
// --figures ratelimit measures it).
func TestRateLimitAcrossReplicas(t *testing.T) {
	srv := newMailServer(t)
	const n, rate, burst = 500, 50, 1
	s := startProviders(t, 3, map[string]string{
		"SMTP_HOST": "127.0.0.1", "SMTP_PORT": srv.port(), "SMTP_RATE": strconv.Itoa(rate), "SMTP_BURST": strconv.Itoa(burst),
		"HISTORY_DSN": storetest.DSN(t, storetest.Postgres), "RETRY_DEFERRALS": "20",
	})
	ids := s.sendEmails(t, n, func(int) string { return "ada@example.com" }, 0)
	var got map[string][]time.Time
	var arrivals []time.Time
	// 10 s at the rate; the deadline is there to end a test that lost
	// emails, not to time them.
	retrytest.Eventually(t, 3*time.Minute, func() bool {
		got, _, arrivals = srv.snapshot()
		return len(got) >= n
	}, "not every email arrived")
	if parked := s.parked(t); len(parked) != 0 {
		t.Fatalf("%d parked, want none: %+v", len(parked), parked[0])
	}
	for _, id := range ids {
		if len(got[id]) != 1 {
			t.Errorf("%s arrived %d times, want once", id, len(got[id]))
		}
	}
	slices.SortFunc(arrivals, func(a, b time.Time) int { return a.Compare(b) })
	most, fixed := mostInASecond(arrivals)
	limit := rate + rate/10 + burst
	if fixed > limit {
		t.Errorf("the server saw %d emails in one second, want at most %d", fixed, limit)
	}
	took := arrivals[len(arrivals)-1].Sub(arrivals[0])
	t.Logf("%d emails in %s (%.1f/s): at most %d in any second of the clock, %d in any sliding one-second window; limit %d/s",
		len(arrivals), took.Round(time.Millisecond), float64(len(arrivals)-1)/took.Seconds(), fixed, most, rate)
}

// mostInASecond is the most arrivals (sorted) in any one-second window
// starting at an arrival, and in any whole second of the clock.
func mostInASecond(arrivals []time.Time) (sliding, fixed int) {
	j := 0
	for i := range arrivals {
		for j < len(arrivals) && arrivals[j].Sub(arrivals[i]) < time.Second {
			j++
		}
		sliding = max(sliding, j-i)
	}
	per := map[int64]int{}
	for _, a := range arrivals {
		per[a.Unix()]++
		fixed = max(fixed, per[a.Unix()])
	}
	return sliding, fixed
}

// TestPermanentRefusalOnePass: a 550 from the primary parks the email
// after one attempt, never tried on the secondary, unless the primary is
// marked as one that may be wrong about it.
func TestPermanentRefusalOnePass(t *testing.T) {
	tests := []struct {
		name        string
		mayBeWrong  string
		wantParked  bool
		wantOnOther int
	}{
		{"parked after one attempt", "false", true, 0},
		{"a primary that may be wrong: the secondary delivers", "true", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			primary, secondary := newMailServer(t), newMailServer(t)
			primary.refuse = "nobody"
			s := startProviders(t, 1, twoServers(primary, secondary, map[string]string{"SMTP_1_PERMANENT_MAY_BE_WRONG": tt.mayBeWrong}))
			ids := s.sendEmails(t, 1, func(int) string { return "nobody@example.com" }, 0)
			var parked []retry.DeadLetter
			retrytest.Eventually(t, 20*time.Second, func() bool {
				got, _, _ := secondary.snapshot()
				parked = s.parked(t)
				return len(parked)+len(got) >= 1
			}, "the email neither parked nor delivered")
			_, tries1, _ := primary.snapshot()
			got2, tries2, _ := secondary.snapshot()
			if tries1[ids[0]] != 1 {
				t.Errorf("the primary saw %d attempts, want 1", tries1[ids[0]])
			}
			if tries2[ids[0]] != tt.wantOnOther || len(got2) != tt.wantOnOther {
				t.Errorf("the secondary saw %d attempts (%d delivered), want %d", tries2[ids[0]], len(got2), tt.wantOnOther)
			}
			var last []notification.Event
			retrytest.Eventually(t, 10*time.Second, func() bool {
				last = append(s.attempts(retry.Parked), s.attempts(retry.Delivered)...)
				return len(last) > 0
			}, "no event of the attempt")
			if want := map[bool]string{true: "primary", false: "secondary"}[tt.wantParked]; len(last) != 1 || last[0].Provider != want || last[0].Attempt != 1 {
				t.Errorf("events %+v, want one, of attempt 1, through %s", last, want)
			}
			if tt.wantParked {
				if len(parked) != 1 || parked[0].Reason != retry.ReasonPermanent || parked[0].Retries != 0 {
					t.Fatalf("parked %+v, want one permanent failure after one attempt", parked)
				}
				if !strings.Contains(parked[0].LastError, "550") {
					t.Errorf("parked with %q, want the server's 550", parked[0].LastError)
				}
			} else if len(parked) != 0 {
				t.Errorf("parked %+v, want none", parked)
			}
		})
	}
}
