package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/relay-demo/relay/retry"
)

// The paragraphs of "What limits each figure" for the figures of issue
// #16: batch ingest, the retry hand-offs and their broker CPU, and the
// broker's memory with messages waiting. Every number comes from the
// report's rows.

// explainBatch says what limits the batch ingest.
func (r *Report) explainBatch() string {
	row, _ := r.anyRow(FigBatchRate)
	p := "**Ingest in batches.** " + r.compare(FigBatchRate, "notifications/s", "confirmed publishes/s") +
		fmt.Sprintf(". The API took %d notifications per `POST /v1/notifications/batch` from %d keep-alive clients at once "+
			"(%s notifications per side); it decodes and checks each item as `POST /v1/notifications` checks its body, "+
			"publishes them all at once and awaits their confirms together, so the HTTP round trip, the token check and "+
			"the request's log line are paid once per %d notifications. What a batch does not share is per notification: "+
			"two persistent, confirmed publishes, the channel copy and the history's accepted record, where the raw side "+
			"publishes one message; and the history feed the API runs, which consumes each accepted record and stores it in "+
			"its SQLite history. Per notification the broker spent %s against %s per raw publish (%s), and this process %s "+
			"against %s (%s), with %s allocations against %s. Both sides share the machine's %d cores (busy: %s, this process "+
			"and the broker together), so the rate is a matter of CPU per notification: %s.",
			r.Options.BatchSize, r.Options.BatchClients, thousands(int64(r.Options.batchNotifications())), r.Options.BatchSize,
			r.cost(FigBatchRate, true, brokerCPU), r.cost(FigBatchRate, false, brokerCPU), r.costRatio(FigBatchRate, brokerCPUOf),
			r.cost(FigBatchRate, true, cpu), r.cost(FigBatchRate, false, cpu), r.costRatio(FigBatchRate, cpuOf),
			r.cost(FigBatchRate, true, allocs), r.cost(FigBatchRate, false, allocs), r.Machine.Cores, r.busy(FigBatchRate),
			r.totalCPU(FigBatchRate))
	if r.missed(FigBatchRate) {
		p += fmt.Sprintf(" The goal (%s) is not met%s, and batching cannot meet it alone: it shares the cost of a "+
			"request, not that of a notification, and relay's notification is two messages to raw's one, each confirmed, "+
			"plus a row in the history.", row.Target.describe(row.Unit, row.Baseline), r.missedOn(FigBatchRate))
	}
	return p
}

// explainStages says what limits a round trip through the stages.
func (r *Report) explainStages() string {
	p := "**Retry round trip through the stages.** " + r.compare(FigRetryRate, "round trips/s", "round trips/s") +
		". A raw retry is the broker's own work: the nack dead-letters the message into a TTL queue, which " +
		"dead-letters it back when the TTL expires; the client only nacks and acks. relay's round trip has two " +
		"hops more, each a consumer that publishes the next copy, waits for the broker's confirm and only then " +
		"acks: the error stage (count the attempt, pick the delay, publish to the wait queue) and the requeue stage " +
		"(publish back to the work queue, mandatory, so a vanished queue parks the message instead of losing it). " +
		"The broker therefore queues, delivers and settles about twice as many messages per round trip, plus two " +
		"confirmed publishes with relay's headers. "
	if r.has(FigRetryBrokerCPU) {
		p += "Its CPU per round trip (its own row, target " + r.targetOf(FigRetryBrokerCPU) + "): " + r.compareCPU(FigRetryBrokerCPU)
	} else {
		p += "Its CPU per round trip: " + r.cost(FigRetryRate, true, brokerCPU) + " against " + r.cost(FigRetryRate, false, brokerCPU)
	}
	p += fmt.Sprintf("; this process's: %s against %s. That is the price of a "+
		"retry count that survives RabbitMQ 3.13, of confirmed hand-offs and of parking. CPU in use on the %d cores "+
		"while the rate was measured, this process and the broker together: %s; the broker alone: %s. ",
		r.cost(FigRetryRate, true, cpu), r.cost(FigRetryRate, false, cpu), r.Machine.Cores, r.busy(FigRetryRate), r.brokerCores(FigRetryRate))
	if r.missed(FigRetryRate) {
		p += fmt.Sprintf("The goal (%s) is not met%s: the two hops are the measured reason, costing the broker %s "+
			"the raw loop's CPU per round trip and this process %s, on cores the two sides share. ", r.targetOf(FigRetryRate), r.missedOn(FigRetryRate), r.costRatio(FigRetryRate, brokerCPUOf), r.costRatio(FigRetryRate, cpuOf))
		if r.has(FigDirectRate) {
			p += "The direct hand-off, next, removes both hops. "
		}
	} else {
		p += fmt.Sprintf("The goal (%s) is %s. ", r.targetOf(FigRetryRate), r.goal(FigRetryRate))
	}
	p += fmt.Sprintf("The extra latency is the time a message took to come back beyond its scheduled delay (%s), timed "+
		"with %d round trips in flight so queueing does not swamp it: relay's two hops add a consume, a confirmed "+
		"publish and an ack each. ", r.Options.Delay, r.Options.Window)
	return p + r.compare(FigRetryP99, "ms at p99", "ms") + "."
}

// explainDirect says what limits a round trip with the direct hand-off.
func (r *Report) explainDirect() string {
	p := "**Retry with the direct hand-off.** " + r.compare(FigDirectRate, "round trips/s", "round trips/s") + ". "
	if r.has(FigRetryRate) {
		p += "The raw loop is the one above, measured in the same rounds. "
	}
	p += "relay's consumer counts the failure as the error stage " +
		"would, publishes the message itself, with relay's headers (`x-retry-count`, `x-original-queue`, " +
		"`x-first-failed-at`, `x-last-error`), to a TTL wait queue of the step's and its own (`wait.<step>.<queue>`, " +
		"mandatory), waits for the broker's confirm and acks; when the TTL expires the broker dead-letters the message " +
		"straight back to the work queue. No error stage, no requeue stage: the round trip is the raw loop's but for one " +
		"confirmed publish from the client where raw nacks and the broker moves the message itself, and that publish is " +
		"what limits it, three ways. On the broker, a message to parse, route, persist and confirm instead of one to " +
		"dead-letter from memory: per round trip " + r.compareCPU(FigDirectBrokerCPU) + " (the broker CPU row, target " +
		r.targetOf(FigDirectBrokerCPU) + "). " + fmt.Sprintf("In this process, the publish, its confirm and relay's "+
		"bookkeeping (a Message, a logger with the message's fields, the outcome events): %s against %s, %s "+
		"allocations against %s. In time: the failed delivery stays unacked until its confirm comes back (the "+
		"handler that failed it is free meanwhile: relay's consumer runs %d handlers, `--concurrency`, and a worker "+
		"for each of the %d deliveries of its prefetch window), so the rate is at most %d ÷ the time a failure is "+
		"held; at the rates measured that time was %s, where raw's nack holds nothing. CPU in use on the %d "+
		"cores, this process and the broker together: %s; the broker alone: %s. ",
		r.cost(FigDirectRate, true, cpu), r.cost(FigDirectRate, false, cpu), r.cost(FigDirectRate, true, allocs),
		r.cost(FigDirectRate, false, allocs), r.Options.Concurrency, r.window(), r.window(), r.handlerHold(FigDirectRate),
		r.Machine.Cores, r.busy(FigDirectRate), r.brokerCores(FigDirectRate))
	if r.missed(FigDirectRate) {
		p += fmt.Sprintf("The goal (%s) is not met%s: the measured reason is that one confirmed publish per retry, "+
			"whose confirm holds the delivery and whose handling costs the broker %s the raw loop's CPU. ",
			r.targetOf(FigDirectRate), r.missedOn(FigDirectRate), r.costRatio(FigDirectRate, brokerCPUOf))
	} else {
		p += fmt.Sprintf("The goal (%s) is %s. ", r.targetOf(FigDirectRate), r.goal(FigDirectRate))
	}
	return p + "A direct retry's wait starts once relay's publish is confirmed and ends in the broker's own " +
		"dead-lettering, as raw's does: " + r.compare(FigDirectP50, "ms at p50", "ms") + "; " +
		strings.TrimPrefix(r.compare(FigDirectP99, "ms at p99", "ms"), "relay against raw, ") + "."
}

// explainNative says what a round trip on RabbitMQ 4.3's delayed retry
// costs, next to the broker's dead-letter loop and relay's direct
// hand-off on the same queue type in the same run, or why it was not
// measured.
func (r *Report) explainNative() string {
	row, _ := r.anyRow(FigNativeRate)
	if row.Note != "" {
		return "**Retry with the native backend.** " + row.Note + ": RabbitMQ 4.3's delayed retry (`x-delayed-retry-*` " +
			"queue arguments of quorum queues) is what it uses, and this broker is " + r.Broker + "."
	}
	p := "**Retry with the native backend** (RabbitMQ 4.3's delayed retry, quorum queues only). " +
		r.compare(FigNativeRate, "round trips/s", "round trips/s") + ". Both sides consume one quorum queue declared " +
		fmt.Sprintf("with `x-delayed-retry-type: failed`, `x-delayed-retry-min` and `-max` of %s and a delivery limit; ", r.Options.Delay) +
		"a failure is a `basic.reject` with requeue (a reject, not a nack: on 4.3 only a reject raises the delivery count " +
		"the delay follows), the queue keeps the message for the delay in its own log and delivers it again with " +
		"`x-delivery-count` 1, and the second delivery is acked. There is no client publish per retry and no second " +
		"queue: relay's side differs from raw's only in its consumer's bookkeeping (the attempt read from " +
		"`x-delivery-count`, the outcome events, a logger): this process's CPU per round trip " +
		r.cost(FigNativeRate, true, cpu) + " against " + r.cost(FigNativeRate, false, cpu) + ", the broker's " +
		r.compareCPU(FigNativeBrokerCPU) + ". "
	q := row.Queue
	ttl, okTTL := r.Row(q, FigRetryRate)
	direct, okDirect := r.Row(q, FigDirectRate)
	rateCPU := func(v *float64, c *Cost) string {
		if v == nil {
			return "—"
		}
		s := thousands(int64(*v)) + " round trips/s"
		if c != nil && c.BrokerCPUPerMsg > 0 {
			s += fmt.Sprintf(" at %.0f µs of broker CPU each", float64(c.BrokerCPUPerMsg)/1e3)
		}
		return s
	}
	if okTTL || okDirect {
		p += "In the same run, on " + q + " queues: "
		var parts []string
		if okTTL {
			parts = append(parts, "the raw dead-letter loop (nack, a TTL wait queue, dead-lettered back) "+rateCPU(ttl.Raw, ttl.RawCost))
		}
		if okDirect {
			parts = append(parts, "relay's direct hand-off "+rateCPU(direct.Relay, direct.RelayCost))
		}
		parts = append(parts, "the raw native loop "+rateCPU(row.Raw, row.RawCost), "relay's native backend "+rateCPU(row.Relay, row.RelayCost))
		p += strings.Join(parts, "; ") + ". "
		if okDirect && direct.Relay != nil && row.Relay != nil {
			p += fmt.Sprintf("relay native ÷ relay direct: %.2f×", *row.Relay / *direct.Relay)
			if okTTL && ttl.Raw != nil && row.Raw != nil {
				p += fmt.Sprintf("; raw native ÷ raw dead-letter loop: %.2f×", *row.Raw / *ttl.Raw)
			}
			p += ". "
		}
	}
	return strings.TrimSpace(p)
}

// explainPlugin says what limits a round trip through the delayed-message
// plugin, with either hand-off, or why it was not measured.
func (r *Report) explainPlugin() string {
	handoffs := "through the stages"
	switch {
	case r.has(FigPluginRate) && r.has(FigPluginDirectRate):
		handoffs = "through the stages and with the direct hand-off"
	case r.has(FigPluginDirectRate):
		handoffs = "with the direct hand-off"
	}
	for _, f := range []string{FigPluginRate, FigPluginDirectRate} {
		if row, ok := r.anyRow(f); ok && row.Note != "" {
			if r.brokerAtLeast(4, 3) {
				return "**Retry with the delayed-message plugin.** " + row.Note + ": the broker has no " +
					"`x-delayed-message` exchange type, so the plugin was not measured, " + handoffs + ". The plugin keeps " +
					"its delayed messages in Mnesia, which " + r.Broker + " no longer has: it does not run there."
			}
			return "**Retry with the delayed-message plugin.** " + row.Note + ": the broker has no " +
				"`x-delayed-message` exchange type, so only the TTL backend was measured, " + handoffs + "."
		}
	}
	p := "**Retry with the delayed-message plugin.** The raw side republishes each failure to an `x-delayed-message` " +
		"exchange with `x-delay` and acks, without waiting for a confirm; the plugin keeps the message until the delay is " +
		"over and routes it back to the work queue. "
	if r.has(FigPluginRate) {
		p += "Through the stages, " + r.compare(FigPluginRate, "round trips/s", "round trips/s") + ": relay's error stage " +
			"publishes to the delayed exchange after counting, with a confirm, and its requeue stage adds the hop back; the " +
			"broker's CPU per round trip, " + r.compareCPU(FigPluginBrokerCPU) + " (target " + r.targetOf(FigPluginBrokerCPU) + "). "
	}
	if r.has(FigPluginDirectRate) {
		p += "With the direct hand-off, " + r.compare(FigPluginDirectRate, "round trips/s", "round trips/s") + ": relay's " +
			"consumer publishes to the delayed exchange itself, as raw does, with relay's headers, and waits for the confirm " +
			fmt.Sprintf("before it acks (with %d deliveries unacked at most, a failure is held %s at these rates); the "+
				"broker's CPU per round trip, ", r.window(), r.handlerHold(FigPluginDirectRate)) +
			r.compareCPU(FigPluginDirectBrokerCPU) + " (target " + r.targetOf(FigPluginDirectBrokerCPU) + "). "
	}
	return strings.TrimSpace(p)
}

// explainMemory says what relay and the broker hold while messages wait.
func (r *Report) explainMemory() string {
	n := r.Options.Waiting
	backends := []struct {
		name                          string
		rss, growth, node, per, alloc string
	}{
		{"TTL", FigDelayedRSS, FigDelayedGrowth, FigBrokerGrowth, FigBrokerPerMsg, FigBrokerAllocPerMsg},
		{"plugin", FigPluginDelayedRSS, FigPluginDelayedGrowth, FigPluginBrokerGrowth, FigPluginBrokerPerMsg, FigPluginAllocPerMsg},
	}
	var rss, broker []string
	for _, be := range backends {
		for _, row := range r.Rows {
			switch row.Figure {
			case be.rss:
				growth, _ := r.Row(row.Queue, be.growth)
				rss = append(rss, fmt.Sprintf("%s %s (growth %s)", backendOn(be.name, row.Queue), formatValue(row.Relay, row.Unit),
					formatValue(growth.Relay, growth.Unit)))
			case be.node:
				if row.Note != "" {
					broker = append(broker, backendOn(be.name, row.Queue)+": "+row.Note)
					continue
				}
				per, _ := r.Row(row.Queue, be.per)
				alloc, _ := r.Row(row.Queue, be.alloc)
				s := fmt.Sprintf("%s: mem_used %s MiB, %s per waiting message (allocated: %s)", backendOn(be.name, row.Queue),
					signed(row.Relay, "%+.1f"), formatValue(per.Relay, per.Unit), formatValue(alloc.Relay, alloc.Unit))
				if q, ok := r.Row(row.Queue, FigBrokerQueue); ok && be.name == "TTL" && q.Relay != nil {
					s += fmt.Sprintf(", the wait queue's own process %s (%.0f B per message)", formatValue(q.Relay, q.Unit), *q.Relay*(1<<20)/float64(max(n, 1)))
				}
				if per.Relay != nil && *per.Relay > 0 && r.BrokerMemLimit > 0 {
					s += fmt.Sprintf("; at that size, were nothing paged out, the node's mem_limit (%.0f MiB) would be reached at about %s waiting messages", mib(r.BrokerMemLimit),
						thousands(int64(float64(r.BrokerMemLimit) / *per.Relay)))
				}
				broker = append(broker, s)
			}
		}
	}
	p := fmt.Sprintf("**Memory.** %s messages waited in the delay stage of each backend while relay's stages and a "+
		"consumer ran in this process, published as the error stage sends them to wait (the API's body, relay's headers, "+
		"persistent). relay's RSS: %s; read after a garbage collection at each tenth of the pile-up and sampled while they "+
		"sat, against targets of %d MiB and %d MiB of growth. relay keeps nothing in memory for a message that waits: the "+
		"delay is the broker's, and a crashed or restarted relay loses no scheduled retry. What the RSS holds is the Go "+
		"runtime, amqp091-go's connections and buffers, and the prefetch window of each consumer (a few dozen messages), "+
		"none of which grows with the number of messages waiting. ", thousands(int64(n)), strings.Join(rss, "; "), maxRSSMiB, maxGrowthMiB)
	if len(rss) == 0 {
		p = fmt.Sprintf("**Memory.** %s messages were to wait in the delay stage of each backend. ", thousands(int64(n)))
	}
	if len(broker) == 0 {
		return p
	}
	p += "The broker's memory, read from its management API: the node's memory in use as its memory alarm counts it " +
		"(`mem_used`, the VM's RSS by default; read through `GET /api/nodes/{name}?memory=true`, which computes it when " +
		"asked rather than from the last five-second sample) once it held still before the pile-up and again once the " +
		"messages sat, and the wait queue's own `memory` once its statistics counted every message. " + strings.Join(broker, "; ") +
		". " + r.classicMemoryNote() + "; a quorum queue's process keeps a small entry per message (where it is in the " +
		"Raft log, its size) and the messages themselves are in the log, on disk and, until its write-ahead log is written " +
		"to segment files, in memory tables" + r.pluginMemoryNote() + ". " +
		"`mem_used` counts more than the data: the Erlang VM's allocators hand memory back to the system slowly, so its growth " +
		"also counts memory they took and still hold (and a backend measured after another can reuse what that one left, " +
		"so its growth can read low); the allocated figure is what they hold for data. Both count whatever else the broker " +
		"did meanwhile, other clients included, and are noise when few messages wait."
	return p
}

// backendOn names a backend and, for a row of one queue type, the type.
func backendOn(backend, queue string) string {
	if queue == "" {
		return backend
	}
	return backend + " " + queue
}

// signed writes a value with its sign, or — when missing.
func signed(v *float64, format string) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf(format, *v)
}

// goal says how a figure's rows fared against their target: "met", "not
// met", or "met on classic, not met on quorum".
func (r *Report) goal(figure string) string {
	var met, missed []string
	for _, row := range r.Rows {
		if row.Figure != figure || row.Verdict == "" {
			continue
		}
		if row.Verdict == Met {
			met = append(met, row.Queue)
		} else {
			missed = append(missed, row.Queue)
		}
	}
	switch {
	case len(met)+len(missed) == 0:
		return "unmeasured"
	case len(missed) == 0:
		return Met
	case len(met) == 0:
		return NotMet
	}
	return "met on " + strings.Join(met, ", ") + ", not met on " + strings.Join(missed, ", ")
}

// missedOn writes where a figure missed its target: "" when it missed on
// every queue type that has a verdict, else " on quorum" and the like.
func (r *Report) missedOn(figure string) string {
	var met, missed []string
	for _, row := range r.Rows {
		switch {
		case row.Figure != figure:
		case row.Verdict == Met:
			met = append(met, row.Queue)
		case row.Verdict == NotMet:
			missed = append(missed, row.Queue)
		}
	}
	if len(met) == 0 {
		return ""
	}
	return " on " + strings.Join(missed, ", ")
}

// missed reports whether a row of the figure missed its target.
func (r *Report) missed(figure string) bool {
	for _, row := range r.Rows {
		if row.Figure == figure && row.Verdict == NotMet {
			return true
		}
	}
	return false
}

// targetOf describes the figure's target, from its first row with one.
func (r *Report) targetOf(figure string) string {
	for _, row := range r.Rows {
		if row.Figure == figure && row.Target != nil {
			return row.Target.describe(row.Unit, row.Baseline)
		}
	}
	return "none"
}

// compareCPU writes a broker CPU row per queue type: relay's against
// raw's, the ratio and the verdict, or the row's note.
func (r *Report) compareCPU(figure string) string {
	return r.forEachQueue(figure, func(row Row) string {
		if row.Note != "" {
			return row.Note
		}
		s := fmt.Sprintf("%s against %s", formatValue(row.Relay, row.Unit), formatValue(row.Raw, row.Unit))
		if row.Ratio != nil {
			s += fmt.Sprintf(" (%.2f×", *row.Ratio)
			if row.Verdict != "" {
				s += ", target " + row.Verdict
			}
			s += ")"
		}
		return s
	})
}

// The per-message costs costRatio compares.
var (
	cpuOf       = func(c Cost) time.Duration { return c.CPUPerMsg }
	brokerCPUOf = func(c Cost) time.Duration { return c.BrokerCPUPerMsg }
)

// costRatio writes relay's cost ÷ raw's of a throughput figure per queue
// type, such as "3.52× (classic)".
func (r *Report) costRatio(figure string, f func(Cost) time.Duration) string {
	var parts []string
	for _, row := range r.Rows {
		if row.Figure != figure || row.RelayCost == nil || row.RawCost == nil || f(*row.RawCost) == 0 || f(*row.RelayCost) == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%.2f× (%s)", float64(f(*row.RelayCost))/float64(f(*row.RawCost)), row.Queue))
	}
	if len(parts) == 0 {
		return "unmeasured"
	}
	return strings.Join(parts, ", ")
}

// totalCPU writes, per queue type, the CPU this process and the broker
// spent together per message on each side, and their ratio.
func (r *Report) totalCPU(figure string) string {
	return r.forEachQueue(figure, func(row Row) string {
		if row.RelayCost == nil || row.RawCost == nil || row.RelayCost.BrokerCPUPerMsg == 0 || row.RawCost.BrokerCPUPerMsg == 0 {
			return "unmeasured"
		}
		relay := row.RelayCost.CPUPerMsg + row.RelayCost.BrokerCPUPerMsg
		raw := row.RawCost.CPUPerMsg + row.RawCost.BrokerCPUPerMsg
		return fmt.Sprintf("%.0f µs of CPU, this process and the broker together, against %.0f µs (%.2f×)",
			float64(relay)/1e3, float64(raw)/1e3, float64(relay)/float64(raw))
	})
}

// handlerHold writes, per queue type, how long each of relay's handlers
// held a failure at the rate measured: Concurrency ÷ rate, an upper bound
// that counts the successes' acks too.
// window is how many deliveries relay's consumer holds unacked at most:
// its prefetch, or its handlers if they are more (retry.Consumer runs a
// worker for each).
func (r *Report) window() int { return max(r.Options.Prefetch, r.Options.Concurrency) }

func (r *Report) handlerHold(figure string) string {
	var parts []string
	for _, row := range r.Rows {
		if row.Figure == figure && row.Relay != nil && *row.Relay > 0 {
			hold := time.Duration(float64(r.window()) / *row.Relay * float64(time.Second))
			parts = append(parts, fmt.Sprintf("%s (%s)", roundDuration(hold), row.Queue))
		}
	}
	if len(parts) == 0 {
		return "unmeasured"
	}
	return strings.Join(parts, ", ")
}

// pluginMemoryNote says where the delayed-message plugin keeps its
// messages, on the brokers where it runs.
func (r *Report) pluginMemoryNote() string {
	if r.brokerAtLeast(4, 3) {
		return " (the delayed-message plugin, which kept its messages in a Mnesia table, does not run on " + r.Broker + ", which has no Mnesia)"
	}
	return "; the plugin keeps every delayed message in a Mnesia table of its own, on disk and in memory"
}

// brokerAtLeast reports whether the report's broker is RabbitMQ major.minor
// or later.
func (r *Report) brokerAtLeast(major, minor int) bool {
	v, ok := strings.CutPrefix(r.Broker, "RabbitMQ ")
	return ok && retry.VersionAtLeast(v, major, minor)
}

// classicMemoryNote says where a classic queue keeps waiting messages: on
// RabbitMQ 4.3, whose classic queues are all version 2 (its release notes:
// CQv1 is removed), on disk with a small entry each in the queue's
// process; before, a version 1 queue also kept each in its process.
func (r *Report) classicMemoryNote() string {
	if r.brokerAtLeast(4, 3) {
		return "On " + r.Broker + " every classic queue is of version 2 (4.3 removed version 1): it writes " +
			"waiting messages to disk and keeps a small entry per message in its process (the wait queue's own memory above)"
	}
	return "A classic queue keeps each waiting message in its own process as well as on disk, until memory pressure (half the " +
		"memory limit) makes it page them out"
}
