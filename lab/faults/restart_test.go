//go:build faults

package faults_test

import (
	"os"
	"testing"
	"time"
)

// TestBrokerRestart stops and starts the broker's application twice while
// 2,000 notifications flow through `relay all` (run in-process), and checks
// that every accepted copy ends delivered or parked. QUEUE_TYPE defaults to
// quorum; FAULTS_QUEUE_TYPE=classic runs the same test on classic queues,
// whose dead-lettering the broker does not confirm.
func TestBrokerRestart(t *testing.T) {
	o := defaults()
	if q := os.Getenv("FAULTS_QUEUE_TYPE"); q != "" {
		o.queueType = q
	}
	r := newRig(t, o)
	r.startInProcess(r.env)

	const n = 2000
	l := r.send(n, 8, 150, 3*time.Minute)
	r.waitAccepted(l, n/4, time.Minute)
	restartBroker(t, r.url, 3*time.Second)
	r.waitAccepted(l, n*6/10, time.Minute)
	restartBroker(t, r.url, 3*time.Second)
	r.finish(l, true, 2*time.Minute)
	r.settle("broker restart ("+o.queueType+")", l, 2*time.Minute)
}
