package strategy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/strategy"
)

var workshopPolicy = retry.Policy{Delays: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond}}

func TestEveryStrategyIsNamedAndLaidOut(t *testing.T) {
	for _, name := range strategy.Names() {
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
			for _, q := range append([]string{l.WorkQueue, l.DeadQueue}, l.Copies...) {
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
	}
	for _, tt := range tests {
		t.Run(tt.strategy, func(t *testing.T) {
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
