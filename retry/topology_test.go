package retry

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestStepName(t *testing.T) {
	tests := map[time.Duration]string{
		500 * time.Millisecond: "500ms", 5 * time.Second: "5s", time.Minute: "1m", 90 * time.Second: "90s",
		2 * time.Hour: "2h", 1500 * time.Millisecond: "1500ms",
	}
	for d, want := range tests {
		if got := StepName(d); got != want {
			t.Errorf("StepName(%s) = %q, want %q", d, got, want)
		}
	}
}

// names lists a plan's exchanges and queues, the delay levels apart:
// levels counts the level queues.
func names(p Plan) (exchanges, queues []string, levels int) {
	for _, e := range p.Exchanges {
		if !strings.Contains(e.Name, "wait.level.") && !strings.HasSuffix(e.Name, "wait.deliver") {
			exchanges = append(exchanges, e.Name+":"+e.Kind)
		}
	}
	for _, q := range p.Queues {
		if strings.Contains(q.Name, "wait.level.") {
			levels++
			continue
		}
		queues = append(queues, q.Name)
	}
	return
}

func TestPlan(t *testing.T) {
	policy := Policy{Delays: []time.Duration{500 * time.Millisecond, 5 * time.Second}}
	tests := []struct {
		name          string
		topo          Topology
		wantExchanges []string
		wantQueues    []string
		wantLevels    int
	}{
		{"plugin", Topology{Routes: testRoutes, Backend: Plugin, Policy: policy},
			[]string{"notification-exchange:direct", "error-exchange:fanout", "wait-exchange:x-delayed-message", "dead-letter-exchange:headers"},
			[]string{"email-queue", "webhook-queue", "error-queue", "requeue-queue", "dead-letter-queue"}, 0},
		{"ttl with prefix: its steps, and the levels for any other wait", Topology{Routes: testRoutes, Prefix: "t.", Backend: TTL, Policy: policy},
			[]string{"t.notification-exchange:direct", "t.error-exchange:fanout", "t.wait-exchange:direct", "t.dead-letter-exchange:headers"},
			[]string{"t.email-queue", "t.webhook-queue", "t.error-queue", "t.requeue-queue", "t.wait.500ms", "t.wait.5s", "t.dead-letter-queue"}, levelCount},
		{"levels", Topology{Routes: testRoutes, Backend: Levels, Policy: policy},
			[]string{"notification-exchange:direct", "error-exchange:fanout", "dead-letter-exchange:headers"},
			[]string{"email-queue", "webhook-queue", "error-queue", "requeue-queue", "dead-letter-queue"}, levelCount},
		{"native: no requeue-queue, the levels for deferrals", Topology{Routes: testRoutes, Backend: Native, QueueType: Quorum, Policy: Policy{Delays: []time.Duration{time.Second, 2 * time.Second}}},
			[]string{"notification-exchange:direct", "error-exchange:fanout", "dead-letter-exchange:headers"},
			[]string{"email-queue", "webhook-queue", "error-queue", "dead-letter-queue"}, levelCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, qs, levels := names(tt.topo.Plan())
			if levels != tt.wantLevels {
				t.Errorf("%d level queues, want %d", levels, tt.wantLevels)
			}
			if diff := cmp.Diff(tt.wantExchanges, ex); diff != "" {
				t.Errorf("exchanges (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantQueues, qs); diff != "" {
				t.Errorf("queues (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanArguments(t *testing.T) {
	topo := Topology{Routes: testRoutes, Backend: TTL, QueueType: Quorum, Policy: Policy{Delays: []time.Duration{time.Second}}}
	args := map[string]map[string]any{}
	for _, q := range topo.Plan().Queues {
		args[q.Name] = q.Args
	}
	want := map[string]any{"x-queue-type": "quorum", "x-dead-letter-strategy": "at-least-once",
		"x-overflow": "reject-publish", "x-dead-letter-exchange": "error-exchange"}
	if diff := cmp.Diff(want, args["email-queue"]); diff != "" {
		t.Errorf("email-queue args (-want +got):\n%s", diff)
	}
	wantWait := map[string]any{"x-queue-type": "quorum", "x-dead-letter-strategy": "at-least-once",
		"x-overflow": "reject-publish", "x-message-ttl": int64(1000), "x-dead-letter-exchange": "",
		"x-dead-letter-routing-key": "requeue-queue"}
	if diff := cmp.Diff(wantWait, args["wait.1s"]); diff != "" {
		t.Errorf("wait.1s args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"x-queue-type": "quorum"}, args["error-queue"]); diff != "" {
		t.Errorf("error-queue args (-want +got):\n%s", diff)
	}
	classic := Topology{Routes: testRoutes, Backend: Plugin}
	for _, q := range classic.Plan().Queues {
		if _, ok := q.Args["x-dead-letter-strategy"]; ok {
			t.Errorf("classic queue %s has a dead-letter strategy", q.Name)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		topo    Topology
		wantErr string
	}{
		{"ok", Topology{Routes: testRoutes, Backend: TTL}, ""},
		{"auto unresolved", Topology{Routes: testRoutes, Backend: Auto}, "resolved"},
		{"unknown backend", Topology{Routes: testRoutes, Backend: "redis"}, "want plugin, ttl, levels or native"},
		{"unknown queue type", Topology{Routes: testRoutes, Backend: TTL, QueueType: "stream"}, "want classic or quorum"},
		{"duplicate route", Topology{Backend: TTL, Routes: []Route{{Queue: "a", Key: "a"}, {Queue: "a", Key: "b"}}}, "twice"},
		{"route without key", Topology{Backend: TTL, Routes: []Route{{Queue: "a", Key: ""}}}, "routing key"},
		{"too many lanes", Topology{Backend: TTL, Routes: []Route{{Queue: "a", Key: "a", Lanes: MaxLanes + 1}}}, "lanes"},
		{"negative lanes", Topology{Backend: TTL, Routes: []Route{{Queue: "a", Key: "a", Lanes: -1}}}, "lanes"},
		{"a lane named as another route", Topology{Backend: TTL, Routes: []Route{{Queue: "a", Key: "a", Lanes: 2}, {Queue: "a.lane-1", Key: "b"}}}, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.topo.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestMermaidFollowsPlan(t *testing.T) {
	topo := Topology{Routes: testRoutes, Backend: TTL, Policy: Policy{Delays: []time.Duration{time.Second}}}
	m := topo.Plan().Mermaid()
	for _, want := range []string{
		"flowchart LR",
		"notification_exchange -->|email| email_queue",
		"email_queue -.->|dead-letter| error_exchange",
		"wait_exchange -->|1s| wait_1s",
		"wait_1s -.->|expired| requeue_queue",
		"dead_letter_exchange -->|all| dead_letter_queue",
		"error_queue ==>|error stage: retry| wait_exchange",
		"requeue_queue ==>|requeue stage| webhook_queue",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, m)
		}
	}
}

// testRoutes are the work queues of the tests' topologies.
var testRoutes = []Route{{Queue: "email-queue", Key: "email"}, {Queue: "webhook-queue", Key: "webhook"}}

func TestDeliveryLimit(t *testing.T) {
	quorum := amqp.Table{"x-queue-type": "quorum"}
	tests := []struct {
		name    string
		version string
		args    amqp.Table
		want    amqp.Table
	}{
		{"3.10 quorum: no default limit, -1 would drop", "3.10.8", quorum, quorum},
		{"4.0 quorum: the default limit lifted", "4.0.5", quorum, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(-1)}},
		{"4.3 quorum", "4.3.6", quorum, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(-1)}},
		{"4.3 classic", "4.3.6", amqp.Table{}, amqp.Table{}},
		{"a limit of its own", "4.3.6", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(3)}, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(3)}},
		{"unknown version", "", quorum, quorum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DeliveryLimit(tt.version, tt.args)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DeliveryLimit(%q) (-want +got):\n%s", tt.version, diff)
			}
		})
	}
	if _, ok := quorum["x-delivery-limit"]; ok {
		t.Error("DeliveryLimit changed the arguments it was given")
	}
}

// TestLanes: a route of several lanes declares a queue per lane, bound
// with a key of its own; Lane picks one by a key, always the same for the
// same key, and spreads keys over every lane; RouteOf finds the route of
// each lane; the events' channel and the stages' destinations cover them.
func TestLanes(t *testing.T) {
	topo := Topology{Prefix: "p.", Backend: Levels, Routes: []Route{{Queue: "webhook-queue", Key: "webhook", Lanes: 4}, {Queue: "email-queue", Key: "email"}}}
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	var queues []string
	for _, r := range topo.WorkRoutes() {
		queues = append(queues, r.Queue+" "+r.Key)
	}
	want := []string{"p.webhook-queue webhook", "p.webhook-queue.lane-1 webhook.lane-1", "p.webhook-queue.lane-2 webhook.lane-2",
		"p.webhook-queue.lane-3 webhook.lane-3", "p.email-queue email"}
	if !slices.Equal(queues, want) {
		t.Fatalf("WorkRoutes = %q, want %q", queues, want)
	}
	bound := map[string]string{}
	for _, b := range topo.Plan().Bindings {
		if b.Exchange == topo.Ingress() {
			bound[b.Queue] = b.Key
		}
	}
	for _, r := range topo.WorkRoutes() {
		if bound[r.Queue] != r.Key {
			t.Errorf("%s bound with %q, want %q", r.Queue, bound[r.Queue], r.Key)
		}
		if !topo.Destination(r.Queue) {
			t.Errorf("%s is no destination of the stages", r.Queue)
		}
		if route, ok := topo.RouteOf(r.Queue); !ok || route.Key != strings.SplitN(r.Key, ".", 2)[0] {
			t.Errorf("RouteOf(%s) = %+v, %v", r.Queue, route, ok)
		}
	}
	if _, ok := topo.RouteOf("p.webhook-queue.lane-4"); ok {
		t.Error("RouteOf found a lane past the route's last")
	}
	used := map[int]int{}
	for i := range 400 {
		by := fmt.Sprintf("receiver-%d", i)
		l := topo.Lane("webhook", by)
		if again := topo.Lane("webhook", by); again != l {
			t.Fatalf("Lane(%q) = %+v, then %+v", by, l, again)
		}
		if bound[l.Queue] != l.Key {
			t.Fatalf("Lane(%q) = %+v, a key that does not route to its queue", by, l)
		}
		used[l.Lane]++
	}
	for n := range 4 {
		if used[n] < 50 {
			t.Errorf("lane %d got %d of 400 receivers, want about 100: %v", n, used[n], used)
		}
	}
	if l := topo.Lane("email", "ada@example.com"); l.Queue != "p.email-queue" || l.Key != "email" {
		t.Errorf("a route of one lane: Lane = %+v", l)
	}
	if l := topo.Lane("sms", "x"); l.Queue != "" || l.Key != "sms" {
		t.Errorf("an unknown key: Lane = %+v", l)
	}
	if topo.LanesOf("webhook") != 4 || topo.LanesOf("email") != 1 || topo.LanesOf("sms") != 0 {
		t.Errorf("LanesOf: %d %d %d", topo.LanesOf("webhook"), topo.LanesOf("email"), topo.LanesOf("sms"))
	}
}
