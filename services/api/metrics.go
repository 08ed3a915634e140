package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/retry"
)

// The results a publish is counted under in relay_publishes_total.
const (
	resultOK         = "ok"
	resultNacked     = "nacked"
	resultUnroutable = "unroutable"
	resultClosed     = "closed"
	resultError      = "error"
)

// metrics are the API's Prometheus collectors.
type metrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	publishes *prometheus.CounterVec
	confirm   prometheus.Histogram
}

// newMetrics registers the API's collectors on reg, or reuses the ones
// an earlier server registered there.
func newMetrics(reg *prometheus.Registry, channels channel.Set) *metrics {
	m := &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"})),
		duration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "relay_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"})),
		publishes: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_publishes_total",
			Help: "Notification copies published to the broker, by channel and result (ok, nacked, unroutable, closed, error).",
		}, []string{"channel", "result"})),
		confirm: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "relay_publish_confirm_seconds",
			Help:    "Time from publishing a notification copy to the broker's answer.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		})),
	}
	// Every channel and result shows from the start, at zero.
	for _, r := range channels.Routes() {
		for _, res := range []string{resultOK, resultNacked, resultUnroutable, resultClosed, resultError} {
			m.publishes.WithLabelValues(r.Key, res)
		}
	}
	return m
}

// register adds c to reg, or returns the equal collector reg already has.
func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("register metric: " + err.Error())
	}
	return c
}

// publishResult classifies a publish error for relay_publishes_total.
func publishResult(err error) string {
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, retry.ErrUnroutable):
		return resultUnroutable
	case errors.Is(err, retry.ErrNacked):
		return resultNacked
	case errors.Is(err, retry.ErrClosed):
		return resultClosed
	default:
		return resultError
	}
}

// middleware counts and times every request under its chi route pattern,
// which keeps the label set small whatever paths clients ask for.
func (m *metrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		defer func() {
			route := "unmatched"
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				if p := rctx.RoutePattern(); p != "" {
					route = p
				}
			}
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			method := methodLabel(r.Method)
			m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
			m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(ww, r)
	})
}

// methodLabel keeps made-up methods out of the label set.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "OTHER"
}
