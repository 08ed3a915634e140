//go:build integration

package worker_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/webhooks"
)

// answer is one failing response of a scripted webhook receiver.
type answer struct {
	status     int
	retryAfter string // the Retry-After header, "" for none
}

// TestRetryAfterSpendsNoRetry runs the real webhook worker and retrier
// against a receiver that fails as scripted, then answers 200. A 429 with
// Retry-After is a deferral: the copy comes back no sooner than asked and
// with its x-retry-count unchanged. A 503 without it is a retry: the copy
// comes back after the schedule's delay with its count raised.
//
// Two taps show the counts. One on error-exchange receives each failed
// delivery as the worker handed it on, with the headers the worker was
// given. One on wait-exchange receives each copy the stages send to wait,
// whose headers the requeue stage forwards to the worker's next delivery.
func TestRetryAfterSpendsNoRetry(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		script []answer // the failures, in order; then 200
		// wantSeen is the x-retry-count of each failed delivery, as
		// the worker was given it (error-exchange tap).
		wantSeen []int
		// wantNext is the x-retry-count of the copy sent back after
		// each failure: the next delivery's (wait-exchange tap).
		wantNext []int
		// wantGap is the least time between each failed attempt and
		// the next one.
		wantGap []time.Duration
	}{
		{
			name: "429 with Retry-After waits as asked and spends no retry", script: []answer{{429, "2"}},
			wantSeen: []int{0}, wantNext: []int{0}, wantGap: []time.Duration{2 * time.Second},
		},
		{
			name: "503 without Retry-After spends a retry", script: []answer{{503, ""}},
			wantSeen: []int{0}, wantNext: []int{1}, wantGap: []time.Duration{200 * time.Millisecond},
		},
		{
			// With one retry allowed, a 429 that spent it would get the
			// 503 after it parked as max-retries, never delivered.
			name: "after a 429, a 503 still has the only retry", env: map[string]string{"RETRY_MAX": "1"},
			script:   []answer{{429, "2"}, {503, ""}},
			wantSeen: []int{0, 0}, wantNext: []int{0, 1}, wantGap: []time.Duration{2 * time.Second, 200 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, tt.env)
			webhookQueue := s.topo.Name("webhook-queue")
			failed := tapExchange(t, s, s.topo.Name(retry.ErrorExchange), "")
			var steps []string
			for _, step := range s.topo.Policy.Steps() {
				steps = append(steps, retry.StepName(step))
			}
			waiting := tapExchange(t, s, s.topo.Name(retry.WaitExchange), steps...)
			// A wait that is none of the steps (a Retry-After) goes
			// through the delay levels, and leaves them by this exchange.
			exact := tapExchange(t, s, s.topo.Name("wait.deliver"), "#")
			rcv := &receiver{script: tt.script, got: map[string][]time.Time{}}
			srv := httptest.NewServer(rcv)
			t.Cleanup(srv.Close)

			id := s.send(t, 1, srv.URL+"/hook")[0]
			attempts := len(tt.script) + 1
			retrytest.Eventually(t, 20*time.Second, func() bool {
				return len(rcv.attempts(id)) >= attempts || len(s.parked(t)) > 0
			}, "the webhook never reached its receiver %d times", attempts)

			for _, p := range s.parked(t) {
				t.Fatalf("%s parked as %s after %d retries (%s), want the webhook delivered", p.ID, p.Reason, p.Retries, p.LastError)
			}
			at := rcv.attempts(id)
			if len(at) != attempts {
				t.Fatalf("the receiver got %d requests, want %d", len(at), attempts)
			}
			for i, want := range tt.wantGap {
				gap := at[i+1].Sub(at[i])
				// The wait asked for starts once the answer is in, and
				// is never cut short.
				if gap < want {
					t.Errorf("attempt %d came %s after a %d, want at least %s", i+2, gap.Round(time.Millisecond), tt.script[i].status, want)
				}
				t.Logf("after the %d: next attempt %s later (at least %s asked)", tt.script[i].status, gap.Round(time.Millisecond), want)
			}

			// What the worker was given on each failed delivery.
			seen := failed.of(id, webhookQueue)
			if len(seen) != len(tt.wantSeen) {
				t.Fatalf("the worker handed on %d failures, want %d", len(seen), len(tt.wantSeen))
			}
			for i, h := range seen {
				if got := retry.RetryCount(h); got != tt.wantSeen[i] {
					t.Errorf("failed delivery %d carried %s %v, want %d", i+1, retry.HeaderRetryCount, h[retry.HeaderRetryCount], tt.wantSeen[i])
				}
				if ra := tt.script[i].retryAfter; ra != "" {
					secs, _ := strconv.Atoi(ra)
					if got, _ := intHeader(h, retry.HeaderRetryAfter); got != secs*1000 {
						t.Errorf("failed delivery %d: %s = %v, want the receiver's %ss", i+1, retry.HeaderRetryAfter, h[retry.HeaderRetryAfter], ra)
					}
				}
			}

			// What each next delivery is given: every copy sent to wait
			// after attempt n carries the count attempt n+1 sees.
			next := map[int][]int{}
			for _, h := range append(waiting.of(id, webhookQueue), exact.of(id, webhookQueue)...) {
				n, _ := intHeader(h, retry.HeaderAttempts)
				next[n] = append(next[n], retry.RetryCount(h))
			}
			for n, want := range tt.wantNext {
				counts := next[n+1]
				if len(counts) == 0 {
					t.Errorf("no copy went to wait after attempt %d", n+1)
				}
				t.Logf("after attempt %d (a %d): %d copies to wait, %s %v", n+1, tt.script[n].status, len(counts), retry.HeaderRetryCount, counts)
				for _, got := range counts {
					if got != want {
						t.Errorf("after attempt %d (a %d) the copy sent back carried %s %d, want %d",
							n+1, tt.script[n].status, retry.HeaderRetryCount, got, want)
					}
				}
			}
			if len(next) != len(tt.wantNext) {
				t.Errorf("copies went to wait after attempts %v, want after the first %d", sortedKeys(next), len(tt.wantNext))
			}
		})
	}
}

// receiver is a webhook endpoint that answers each message's requests
// from script, then 200, and records when each arrived.
type receiver struct {
	script []answer
	mu     sync.Mutex
	got    map[string][]time.Time
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	id := req.Header.Get(webhooks.HeaderID)
	r.mu.Lock()
	r.got[id] = append(r.got[id], time.Now())
	n := len(r.got[id])
	r.mu.Unlock()
	if n > len(r.script) {
		w.WriteHeader(http.StatusOK)
		return
	}
	if a := r.script[n-1]; a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	w.WriteHeader(r.script[n-1].status)
}

// attempts returns when each request for id arrived.
func (r *receiver) attempts(id string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.got[id]...)
}

// tap collects the headers of every message an exchange routes to it.
type tap struct {
	mu     sync.Mutex
	copies []amqp.Delivery
}

// of returns the headers of the copies of message id from work queue
// queue, in the order they arrived.
func (tp *tap) of(id, queue string) []amqp.Table {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []amqp.Table
	for _, d := range tp.copies {
		if d.MessageId == id && d.Headers[retry.HeaderOriginalQueue] == queue {
			out = append(out, d.Headers)
		}
	}
	return out
}

// tapExchange binds a queue of its own to exchange with each of keys and
// collects what it receives until the test ends.
func tapExchange(t *testing.T, s *stack, exchange string, keys ...string) *tap {
	t.Helper()
	ch, err := s.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name := exchange + ".tap"
	if _, err := ch.QueueDeclare(name,
		false, // durable
		false, // autoDelete
		true,  // exclusive
		false, // noWait
		nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(name, false, false, false)
		ch.Close()
	})
	if len(keys) == 0 {
		keys = []string{""}
	}
	for _, k := range keys {
		if err := ch.QueueBind(name, k, exchange, false /* noWait */, nil); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := ch.Consume(name, "", true /* autoAck */, true /* exclusive */, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	go func() {
		for d := range ds {
			tp.mu.Lock()
			tp.copies = append(tp.copies, d)
			tp.mu.Unlock()
		}
	}()
	return tp
}

// intHeader reads an integer header of any AMQP integer type.
func intHeader(h amqp.Table, key string) (int, bool) {
	switch v := h[key].(type) {
	case int8:
		return int(v), true
	case int16:
		return int(v), true
	case int32:
		return int(v), true
	case int64:
		return int(v), true
	case int:
		return v, true
	}
	return 0, false
}

func sortedKeys(m map[int][]int) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
