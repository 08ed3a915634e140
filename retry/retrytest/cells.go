package retrytest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// ExpectEnv names the delay backends that must run on the broker at hand
// (space- or comma-separated): .ci/run, make test-compat and
// deploy/broker.sh run set it from .ci/cells for the node's version.
const ExpectEnv = "RELAY_EXPECT_BACKENDS"

// Cell is one delay backend with one queue type and one hand-off the
// backend allows: what the conformance suites run their scenarios on.
type Cell struct {
	Backend   retry.Backend
	QueueType retry.QueueType
	Handoff   retry.Handoff
	Features  retry.Features
}

// Name is the cell as the suites name their subtests: backend/queue/hand-off.
func (c Cell) Name() string { return fmt.Sprintf("%s/%s/%s", c.Backend, c.QueueType, c.Handoff) }

// Topology is the cell's topology, with nothing else set.
func (c Cell) Topology() retry.Topology {
	return retry.Topology{Backend: c.Backend, QueueType: c.QueueType, Handoff: c.Handoff}
}

// Cells lists every cell the broker at url runs: each backend whose
// versions and needs the broker meets, with every queue type and hand-off
// its features allow. A backend ExpectEnv names that cannot run here fails
// tb, so a node that came up as the wrong version, or without the plugin,
// never turns its cells into quiet skips; one not named is logged.
func Cells(tb testing.TB, url string) []Cell {
	tb.Helper()
	version, err := Version(url)
	if err != nil {
		tb.Fatal(err)
	}
	plugin, err := retry.HasPlugin(url)
	if err != nil {
		tb.Fatal(err)
	}
	expect := map[retry.Backend]bool{}
	for _, w := range strings.FieldsFunc(os.Getenv(ExpectEnv), func(r rune) bool { return r == ',' || r == ' ' }) {
		if _, err := retry.FeaturesOf(retry.Backend(w)); err != nil {
			tb.Fatalf("%s: %v", ExpectEnv, err)
		}
		expect[retry.Backend(w)] = true
	}
	var cells []Cell
	var names []string
	for _, b := range retry.Backends() {
		f, err := retry.FeaturesOf(b)
		if err != nil {
			tb.Fatal(err)
		}
		var why string
		switch {
		case !f.RunsOn(version):
			why = fmt.Sprintf("it runs on RabbitMQ %s, and the broker is %s", f.Versions(), version)
		case strings.Contains(f.Needs, "delayed_message") && !plugin:
			why = "the broker lacks " + f.Needs
		}
		if why != "" {
			if expect[b] {
				tb.Errorf("the %s backend must run on this broker (%s), but %s", b, ExpectEnv, why)
			}
			tb.Logf("no %s cells on this broker: %s", b, why)
			continue
		}
		for _, q := range []retry.QueueType{retry.Classic, retry.Quorum} {
			for _, h := range []retry.Handoff{retry.ViaStages, retry.Direct} {
				if f.Supports(q, h) {
					c := Cell{Backend: b, QueueType: q, Handoff: h, Features: f}
					cells = append(cells, c)
					names = append(names, c.Name())
				}
			}
		}
	}
	tb.Logf("RabbitMQ %s: cells %s", version, strings.Join(names, ", "))
	return cells
}

// TakeParked takes every message now in topo's dead-letter queue, acking
// each, into parked by message id.
func TakeParked(ch *amqp.Channel, topo retry.Topology, parked map[string]amqp.Delivery) {
	for {
		d, ok, err := ch.Get(topo.Name(retry.DeadQueue), false /* autoAck */)
		if err != nil || !ok {
			return
		}
		parked[d.MessageId] = d
		_ = d.Ack(false)
	}
}
