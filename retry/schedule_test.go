package retry

import (
	"errors"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	policy := Policy{Delays: []time.Duration{time.Second, 5 * time.Second, time.Minute}}
	tests := []struct {
		name      string
		backend   Backend
		handoff   Handoff
		delay     time.Duration
		exchange  string
		key       string
		wait      time.Duration
		mandatory bool
		original  bool // the route names the work queue in HeaderOriginalQueue
		err       error
	}{
		{name: "levels, exact", backend: Levels, delay: 1500*time.Millisecond + 700*time.Microsecond,
			exchange: "p.wait.level.10", wait: 1500 * time.Millisecond, mandatory: true, original: true},
		{name: "levels, direct", backend: Levels, handoff: Direct, delay: 3 * time.Second,
			exchange: "p.wait.level.11", wait: 3 * time.Second, mandatory: true},
		{name: "plugin, no mandatory", backend: Plugin, delay: 42 * time.Second,
			exchange: "p.wait-exchange", key: "requeue", wait: 42 * time.Second, original: true},
		{name: "ttl, between steps: exactly, in the levels", backend: TTL, delay: 2 * time.Second,
			exchange: "p.wait.level.10", wait: 2 * time.Second, mandatory: true, original: true},
		{name: "ttl, a step exactly", backend: TTL, delay: time.Minute,
			exchange: "p.wait-exchange", key: "1m", wait: time.Minute, mandatory: true, original: true},
		{name: "ttl, past the longest step: exactly, in the levels", backend: TTL, delay: 2 * time.Minute,
			exchange: "p.wait.level.16", wait: 2 * time.Minute, mandatory: true, original: true},
		{name: "native, in the levels to the work queue", backend: Native, delay: time.Second,
			exchange: "p.wait.level.09", wait: time.Second, mandatory: true},
		{name: "too long", backend: Levels, delay: MaxDelay + time.Millisecond, err: ErrDelayTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := Topology{Prefix: "p.", Routes: testRoutes, Backend: tt.backend, Handoff: tt.handoff, Policy: policy, QueueType: Quorum}
			queue := topo.WorkRoutes()[0].Queue
			d, err := topo.Delay(queue, tt.delay)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Exchange != tt.exchange || (tt.key != "" && d.Key != tt.key) || d.Wait != tt.wait || d.Mandatory != tt.mandatory {
				t.Errorf("Delay = %+v, want exchange %s key %s wait %s mandatory %v", d, tt.exchange, tt.key, tt.wait, tt.mandatory)
			}
			if got := d.Headers[HeaderOriginalQueue]; (got == queue) != tt.original {
				t.Errorf("%s = %v, want it set: %v", HeaderOriginalQueue, got, tt.original)
			}
		})
	}
	topo := Topology{Routes: testRoutes, Backend: Levels}
	if _, err := topo.Delay("dead-letter-queue", time.Second); err == nil {
		t.Error("Delay to a queue that is not a work queue: no error")
	}
}

func TestCancel(t *testing.T) {
	err := Cancel(errors.New("cancelled by the client"))
	if !IsCancelled(err) || IsPermanent(err) {
		t.Errorf("IsCancelled = %v, IsPermanent = %v; want true, false", IsCancelled(err), IsPermanent(err))
	}
	if Cancel(nil) != nil || IsCancelled(errors.New("x")) {
		t.Error("Cancel(nil) or a plain error counts as cancelled")
	}
}
