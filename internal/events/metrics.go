package events

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-demo/relay/retry"
)

// DelayBuckets are the buckets of relay_retry_delay_seconds: 100ms to 1h.
var DelayBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// EndToEndBuckets are the buckets of relay_end_to_end_seconds: from a
// quick first-time delivery to a message parked after hours of retries.
var EndToEndBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600}

// Metrics counts pipeline decisions for Prometheus:
//
//   - relay_deliveries_total{channel,outcome}: every decision;
//   - relay_retries_total{queue,attempt}: retries scheduled, by the
//     attempt that failed;
//   - relay_deferrals_total{queue}: waits a downstream or a rate limit
//     asked for (retry.Event.Deferred), which spend no retry and are not
//     counted as retries;
//   - relay_parked_total{queue,reason}: messages parked;
//   - relay_retry_delay_seconds: the waits scheduled before retries
//     (deferrals' waits aside);
//   - relay_end_to_end_seconds{channel,outcome}: the age of messages when
//     delivered or parked (only for messages whose producer set the AMQP
//     timestamp);
//   - relay_queue_backlog_seconds{queue}: how far behind a work queue is,
//     as this process's workers last found it (see Backlog);
//   - relay_endpoint_backlog_seconds{endpoint}: how far behind each
//     registered webhook endpoint this process delivered to lately is:
//     the age of its copy taken last.
//
// The queue labels carry the queue as the event names it, with the
// topology's prefix: a prefixed run (tests, workshops) shows up apart from
// the default one. A parked message that no queue claims has queue="".
type Metrics struct {
	channels   channels
	deliveries *prometheus.CounterVec
	retries    *prometheus.CounterVec
	deferrals  *prometheus.CounterVec
	parked     *prometheus.CounterVec
	delay      prometheus.Histogram
	endToEnd   *prometheus.HistogramVec
	backlog    *Backlog
	now        func() time.Time // the clock the backlog is read by
}

// NewMetrics creates the metrics for topology t and registers them with
// reg (when reg is not nil). It panics if they are already registered
// there, as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer, t retry.Topology) *Metrics {
	m := &Metrics{
		channels: channelsOf(t),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_deliveries_total",
			Help: "Pipeline decisions about notification attempts, by channel and outcome.",
		}, []string{"channel", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_retries_total",
			Help: "Retries scheduled, by work queue and the attempt that failed.",
		}, []string{"queue", "attempt"}),
		deferrals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_deferrals_total",
			Help: "Waits a downstream (Retry-After) or a rate limit asked for, which spend no retry, by work queue.",
		}, []string{"queue"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_parked_total",
			Help: "Messages parked in the dead-letter queue, by work queue and reason.",
		}, []string{"queue", "reason"}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "relay_retry_delay_seconds",
			Help:    "Wait scheduled before a retry.",
			Buckets: DelayBuckets,
		}),
		endToEnd: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "relay_end_to_end_seconds",
			Help:    "Time from publishing a notification to its delivery or parking.",
			Buckets: EndToEndBuckets,
		}, []string{"channel", "outcome"}),
		backlog: NewBacklog(BacklogIdle),
		now:     time.Now,
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.retries, m.deferrals, m.parked, m.delay, m.endToEnd,
			backlogCollector{m})
	}
	return m
}

// backlogCollector reads a Backlog at each scrape: its figures depend on
// the time they are read at.
type backlogCollector struct{ m *Metrics }

var (
	queueBacklogDesc = prometheus.NewDesc("relay_queue_backlog_seconds",
		"How long the message a worker took last from the work queue had waited there, ready: the age of the oldest ready message then; 0 once nothing was taken for 30s.",
		[]string{"queue"}, nil)
	endpointBacklogDesc = prometheus.NewDesc("relay_endpoint_backlog_seconds",
		"How old the webhook copy for the registered endpoint a worker took last was, since it was published or fell due (its waits for retries, the circuit and limits included); an endpoint nothing was taken for in 30s is left out.",
		[]string{"endpoint"}, nil)
)

// Describe sends the backlog metrics' descriptions.
func (c backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueBacklogDesc
	ch <- endpointBacklogDesc
}

// Collect sends the backlog of each queue and endpoint, as of now.
func (c backlogCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.m.now()
	for q, s := range c.m.backlog.Queues(now) {
		ch <- prometheus.MustNewConstMetric(queueBacklogDesc, prometheus.GaugeValue, s, q)
	}
	for id, s := range c.m.backlog.Endpoints(now) {
		ch <- prometheus.MustNewConstMetric(endpointBacklogDesc, prometheus.GaugeValue, s, id)
	}
}

// Observe counts one decision. It suits the Observe fields of retry.Stages
// and retry.Consumer, directly or through Fanout.
func (m *Metrics) Observe(ev retry.Event) {
	channel := m.channels[ev.Queue]
	m.deliveries.WithLabelValues(channel, string(ev.Outcome)).Inc()
	switch ev.Outcome {
	case retry.Retrying:
		if ev.Deferred {
			m.deferrals.WithLabelValues(ev.Queue).Inc()
			break
		}
		m.retries.WithLabelValues(ev.Queue, strconv.Itoa(ev.Attempt)).Inc()
		m.delay.Observe(ev.Delay.Seconds())
	case retry.Parked:
		m.parked.WithLabelValues(ev.Queue, ev.Reason).Inc()
	}
	m.backlog.Observe(m.channels.event("", ev))
	switch ev.Outcome {
	case retry.Delivered, retry.Parked:
		if a, ok := age(ev); ok {
			m.endToEnd.WithLabelValues(channel, string(ev.Outcome)).Observe(a.Seconds())
		}
	}
}
