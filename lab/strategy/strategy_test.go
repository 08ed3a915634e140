package strategy_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/lab/strategy"
	"github.com/relay-demo/relay/retry"
)

var workshopPolicy = retry.Policy{Delays: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond}}

// everyName is every strategy New accepts: the designs and the direct
// hand-offs of the pipeline strategies.
func everyName() []string {
	names := strategy.Names()
	for _, h := range strategy.Handoffs() {
		names = append(names, h+strategy.DirectSuffix)
	}
	return names
}

func TestEveryStrategyIsNamedAndLaidOut(t *testing.T) {
	for _, name := range everyName() {
		t.Run(name, func(t *testing.T) {
			s, err := strategy.New(name, strategy.Options{Prefix: "p.", Policy: workshopPolicy})
			if err != nil {
				t.Fatal(err)
			}
			if s.Name() != name {
				t.Errorf("Name() = %q", s.Name())
			}
			if s.Describe() == "" {
				t.Error("no description")
			}
			p := s.Plan()
			var queues []string
			for _, q := range p.Queues {
				queues = append(queues, q.Name)
			}
			for _, e := range p.Exchanges {
				if !strings.HasPrefix(e.Name, "p.") {
					t.Errorf("exchange %q lacks the prefix", e.Name)
				}
			}
			l := s.Layout()
			if len(l.Consumed) == 0 || l.Consumed[0] != l.WorkQueue {
				t.Errorf("consumed queues %v: the work queue comes first", l.Consumed)
			}
			for _, q := range append(append([]string{l.WorkQueue, l.DeadQueue}, l.Copies...), l.Consumed...) {
				if q != "" && !slices.Contains(queues, q) {
					t.Errorf("layout queue %q is not in the plan %v", q, queues)
				}
			}
			if l.Exchange != "p.notification-exchange" || l.Key != "webhook" || l.WorkQueue != "p.webhook-queue" {
				t.Errorf("layout %+v: every strategy shares the ingress", l)
			}
		})
	}
}

func TestNewRejectsUnknownNamesAndBadPolicies(t *testing.T) {
	if _, err := strategy.New("retry-harder", strategy.Options{}); err == nil {
		t.Error("unknown strategy accepted")
	}
	if _, err := strategy.New("ttl-tiers", strategy.Options{Policy: retry.Policy{Delays: []time.Duration{-time.Second}}}); err == nil {
		t.Error("negative delay accepted")
	}
}

// queueArgs finds the arguments of a queue in the strategy's plan.
func queueArgs(t *testing.T, name, queue string) map[string]any {
	t.Helper()
	s, err := strategy.New(name, strategy.Options{Policy: workshopPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range s.Plan().Queues {
		if q.Name == queue {
			return q.Args
		}
	}
	t.Fatalf("%s has no queue %q", name, queue)
	return nil
}

func TestPlansDeclareWhatEachDesignNeeds(t *testing.T) {
	tests := []struct {
		strategy, queue string
		want            map[string]any
	}{
		{"naive-requeue", "webhook-queue", nil},
		{"naive-requeue-once", "webhook-queue", map[string]any{"x-dead-letter-exchange": "dead-letter-exchange"}},
		{"dlx-requeue", "webhook-queue", map[string]any{"x-dead-letter-exchange": "error-exchange"}},
		{"ttl-wait-queue", "wait-queue", map[string]any{"x-dead-letter-exchange": "requeue-exchange", "x-message-ttl": int64(250)}},
		// No queue TTL: each message carries its own expiration.
		{"per-message-ttl", "wait-queue", map[string]any{"x-dead-letter-exchange": "requeue-exchange"}},
		{"ttl-tiers", "wait.750ms", map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "requeue-queue", "x-message-ttl": int64(750)}},
		{"quorum-delivery-limit", "webhook-queue", map[string]any{
			"x-queue-type": "quorum", "x-delivery-limit": int64(3), "x-dead-letter-exchange": "dead-letter-exchange",
			"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
		}},
		{"retry-aware-dlx", "wait-queue", map[string]any{"x-dead-letter-exchange": "requeue-exchange", "x-message-ttl": int64(250)}},
		// Level 3 holds a message 2^3 ms and hands it to level 2's exchange.
		{"delay-levels", "wait.level.03", map[string]any{"x-dead-letter-exchange": "wait.level.02", "x-message-ttl": int64(8)}},
		{"delay-levels", "wait.level.00", map[string]any{"x-dead-letter-exchange": "wait.deliver", "x-message-ttl": int64(1)}},
		{"delay-levels", "wait.level.31", map[string]any{"x-dead-letter-exchange": "wait.level.30", "x-message-ttl": int64(1) << 31}},
		// The work queue waits itself: min(250ms × attempt, 750ms), three
		// retries, then error-exchange, whose stage parks.
		{"native-delayed-retry", "webhook-queue", map[string]any{
			"x-queue-type": "quorum", "x-dead-letter-exchange": "error-exchange",
			"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
			"x-delayed-retry-type": "failed", "x-delayed-retry-min": int64(250), "x-delayed-retry-max": int64(750),
			"x-delivery-limit": int64(3),
		}},
		{"native-delayed-retry", "error-queue", map[string]any{"x-queue-type": "quorum"}},
	}
	for _, tt := range tests {
		t.Run(tt.strategy+"/"+tt.queue, func(t *testing.T) {
			got := map[string]any(queueArgs(t, tt.strategy, tt.queue))
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s arguments (-want +got):\n%s", tt.queue, diff)
			}
		})
	}
}

func TestDelayedExchangeDrawsThePluginExchange(t *testing.T) {
	s, err := strategy.New("delayed-exchange", strategy.Options{Policy: workshopPolicy})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, e := range s.Plan().Exchanges {
		kinds[e.Name] = e.Kind
	}
	if kinds["wait-exchange"] != "x-delayed-message" {
		t.Errorf("wait-exchange is %q, want x-delayed-message", kinds["wait-exchange"])
	}
}

// TestDelayLevelsDeclare65WaitObjects counts what binary delay levels cost
// on the broker: 32 queues, their 32 exchanges and the deliver exchange.
func TestDelayLevelsDeclare65WaitObjects(t *testing.T) {
	s, err := strategy.New("delay-levels", strategy.Options{Policy: workshopPolicy})
	if err != nil {
		t.Fatal(err)
	}
	p := s.Plan()
	wait := 0
	for _, e := range p.Exchanges {
		if strings.HasPrefix(e.Name, "wait.") {
			wait++
			if e.Kind != "topic" {
				t.Errorf("exchange %s is %s, want topic: the levels route on words of the key", e.Name, e.Kind)
			}
		}
	}
	for _, q := range p.Queues {
		if strings.HasPrefix(q.Name, "wait.") {
			wait++
		}
	}
	if wait != 65 {
		t.Errorf("%d wait objects, want 65", wait)
	}
}

func TestNativeDelayedRetryNeedsRabbitMQ43(t *testing.T) {
	tests := []struct {
		version string
		want    string // "" when the broker can run it
	}{
		{"3.10.8", "not runnable on RabbitMQ 3.10.8: needs 4.3 with quorum queues"},
		{"3.13.7", "not runnable on RabbitMQ 3.13.7: needs 4.3 with quorum queues"},
		{"4.2.1", "not runnable on RabbitMQ 4.2.1: needs 4.3 with quorum queues"},
		{"", "not runnable on RabbitMQ (version not reported): needs 4.3 with quorum queues"},
		{"garbled", "not runnable on RabbitMQ garbled: needs 4.3 with quorum queues"},
		{"4.3.0", ""},
		{"4.3.0-rc.1", ""},
		{"4.10.2", ""},
		{"5.0.0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			err := strategy.NativeSupport(tt.version)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("err = %v, want %q", err, tt.want)
			case tt.want != "" && !errors.Is(err, strategy.ErrUnsupported):
				t.Errorf("%v is not ErrUnsupported: the workshop would fail instead of skipping", err)
			}
		})
	}
}

// TestNativeDelayedRetryRefusesBeforeDeclaring declares on a connection that
// reports RabbitMQ 3.10.8 and nothing else: the strategy must read the
// version the connection reports and stop before touching the broker.
func TestNativeDelayedRetryRefusesBeforeDeclaring(t *testing.T) {
	s, err := strategy.New("native-delayed-retry", strategy.Options{Policy: workshopPolicy})
	if err != nil {
		t.Fatal(err)
	}
	old := &amqp.Connection{Properties: amqp.Table{"version": "3.10.8", "product": "RabbitMQ"}}
	err = s.Declare(context.Background(), old)
	var nr *strategy.NotRunnable
	if !errors.As(err, &nr) || nr.Version != "3.10.8" || !errors.Is(err, strategy.ErrUnsupported) {
		t.Fatalf("Declare on 3.10.8 = %v, want a NotRunnable naming 3.10.8", err)
	}
}

func TestDirectHandoffIsAVariantOfThePipeline(t *testing.T) {
	for _, base := range strategy.Handoffs() {
		t.Run(base, func(t *testing.T) {
			s, err := strategy.New(base+"/direct", strategy.Options{Policy: workshopPolicy})
			if err != nil {
				t.Fatal(err)
			}
			if !strategy.Known(base + "/direct") {
				t.Error("not Known")
			}
			if !strings.Contains(s.Describe(), "Direct hand-off") {
				t.Errorf("Describe does not say it hands off directly: %s", s.Describe())
			}
			// No requeue stage: the wait routes back to the work queue.
			for _, q := range s.Plan().Queues {
				if q.Name == "requeue-queue" {
					t.Error("the direct hand-off declares requeue-queue")
				}
			}
		})
	}
	for _, name := range []string{"naive-requeue/direct", "native-delayed-retry/direct", "retry-harder/direct", "delay-levels/direct/direct"} {
		if strategy.Known(name) {
			t.Errorf("%s is Known", name)
		}
		if _, err := strategy.New(name, strategy.Options{Policy: workshopPolicy}); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func TestExpiration(t *testing.T) {
	tests := []struct {
		base time.Duration
		n    int
		want string
	}{
		{250 * time.Millisecond, 1, "250"},
		{250 * time.Millisecond, 4, "1000"},
		{3 * time.Second, 3, "9000"},
		// Below a millisecond the broker would expire at once.
		{time.Microsecond, 2, "2"},
		{time.Second, 0, "1000"},
	}
	for _, tt := range tests {
		if got := strategy.Expiration(tt.base, tt.n); got != tt.want {
			t.Errorf("Expiration(%s, %d) = %q, want %q", tt.base, tt.n, got, tt.want)
		}
	}
}

func TestParksOncePerCycle(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		want  []int // the failure counts, 1 to 9, that park
	}{
		{"limit 3", 3, []int{3, 6, 9}},
		{"limit 1 parks every failure", 1, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"limit 0 counts as 1", 0, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"limit above the count never parks", 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for count := 1; count <= 9; count++ {
				if strategy.Parks(count, tt.limit) {
					got = append(got, count)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parking counts (-want +got):\n%s", diff)
			}
		})
	}
}
