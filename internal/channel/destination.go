package channel

import (
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// AttrEndpoint is the endpoint id a webhook part names, on the span of its
// send.
const AttrEndpoint = attribute.Key("relay.webhook.endpoint")

// destination says where a webhook goes, for the span of its send: the
// endpoint's id, or the URL's host and port, never its path or query,
// which may carry a token.
func (w *WebhookPart) destination() []attribute.KeyValue {
	if w.Endpoint != "" {
		return []attribute.KeyValue{AttrEndpoint.String(w.Endpoint)}
	}
	u, err := url.Parse(w.URL)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	attrs := []attribute.KeyValue{semconv.ServerAddress(u.Hostname())}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(n))
	}
	return attrs
}
