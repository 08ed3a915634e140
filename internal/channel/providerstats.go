package channel

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-demo/relay/retry"
)

// providerStats counts what one channel's providers did in this process.
type providerStats struct {
	mu       sync.Mutex
	order    []providerKey
	rate     map[providerKey]float64
	outcomes map[providerKey]map[string]float64
	// circuits reads each provider's circuit; set by the failover.
	circuits func() map[string]string
}

type providerKey struct{ channel, provider string }

func newProviderStats() *providerStats {
	return &providerStats{rate: map[providerKey]float64{}, outcomes: map[providerKey]map[string]float64{}}
}

func (s *providerStats) declare(channel, provider string, rate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := providerKey{channel, provider}
	s.order = append(s.order, k)
	s.rate[k] = rate
	s.outcomes[k] = map[string]float64{}
}

func (s *providerStats) count(channel, provider, outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes[providerKey{channel, provider}][outcome]++
}

func (s *providerStats) sent(channel, provider string, err error) {
	switch {
	case err == nil:
		s.count(channel, provider, "delivered")
	case retry.IsPermanent(err):
		s.count(channel, provider, "refused")
	default:
		s.count(channel, provider, "failed")
	}
}

func (s *providerStats) deferred(channel, provider string) {
	s.count(channel, provider, "rate_limited")
}

// providerSets holds the stats of every failover opened in this process,
// for the metrics; a closed sender takes its own out.
var providerSets = &statsSets{}

type statsSets struct {
	mu   sync.Mutex
	sets []*providerStats
}

func (ss *statsSets) add(s *providerStats) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sets = append(ss.sets, s)
}

func (ss *statsSets) remove(s *providerStats) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sets = slices.DeleteFunc(ss.sets, func(x *providerStats) bool { return x == s })
}

var (
	providerSendsDesc = prometheus.NewDesc("relay_provider_sends_total",
		"Sends through a channel's provider by this process: delivered, failed (transient), refused (permanent) or rate_limited (deferred by the provider's limit, not sent).",
		[]string{"channel", "provider", "outcome"}, nil)
	providerCircuitDesc = prometheus.NewDesc("relay_provider_circuit",
		"A channel's provider's circuit as this process sees it: 1 for the state it is in (closed, open or half_open).",
		[]string{"channel", "provider", "state"}, nil)
	providerRateDesc = prometheus.NewDesc("relay_provider_rate_limit",
		"The messages a second a channel's provider is limited to, across every replica; 0 for no limit.",
		[]string{"channel", "provider"}, nil)
)

// ProviderMetrics is a Prometheus collector of the providers of the
// channels this process opened: their sends, circuits and limits.
type ProviderMetrics struct{}

// Describe sends the metrics' descriptions.
func (ProviderMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- providerSendsDesc
	ch <- providerCircuitDesc
	ch <- providerRateDesc
}

// Collect sends the metrics' values now.
func (ProviderMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, p := range Providers() {
		ch <- prometheus.MustNewConstMetric(providerRateDesc, prometheus.GaugeValue, p.Rate, p.Channel, p.Name)
		for _, state := range []string{"closed", "open", "half_open"} {
			v := 0.0
			if p.Circuit == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(providerCircuitDesc, prometheus.GaugeValue, v, p.Channel, p.Name, state)
		}
		for _, outcome := range []string{"delivered", "failed", "refused", "rate_limited"} {
			ch <- prometheus.MustNewConstMetric(providerSendsDesc, prometheus.CounterValue, p.Sends[outcome], p.Channel, p.Name, outcome)
		}
	}
}

// ProviderState is one provider of a channel as this process sees it.
type ProviderState struct {
	Channel, Name string
	// Circuit is closed, open or half_open.
	Circuit string
	// Rate is its limit in messages a second; 0 for none.
	Rate float64
	// Sends counts its sends by outcome.
	Sends map[string]float64
}

// Providers lists the providers of the channels this process opened, in
// order.
func Providers() []ProviderState {
	providerSets.mu.Lock()
	sets := slices.Clone(providerSets.sets)
	providerSets.mu.Unlock()
	var out []ProviderState
	for _, s := range sets {
		circuits := map[string]string{}
		if s.circuits != nil {
			circuits = s.circuits()
		}
		s.mu.Lock()
		for _, k := range s.order {
			state := circuits[k.provider]
			if state == "" || state == "closed" {
				state = "closed"
			}
			sends := map[string]float64{}
			for o, n := range s.outcomes[k] {
				sends[o] = n
			}
			out = append(out, ProviderState{Channel: k.channel, Name: k.provider, Circuit: normalState(state), Rate: s.rate[k], Sends: sends})
		}
		s.mu.Unlock()
	}
	return out
}

// normalState spells a circuit state as the metrics do.
func normalState(s string) string {
	switch s {
	case "half-open", "half_open":
		return "half_open"
	case "open":
		return "open"
	}
	return "closed"
}
