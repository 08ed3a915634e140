package flaky

import (
	"strings"
	"time"
)

// The per-endpoint scenarios. A webhook posted to one of these paths, or
// below it (/webhooks/down/orders), gets that path's behaviour whatever
// FLAKY_WEBHOOK_SCENARIO says, so that webhook endpoints registered on one
// receiver behave differently side by side: the demo of relay's isolation
// of a sick endpoint from the healthy ones.
const (
	// PathOK accepts every webhook.
	PathOK = "/webhooks/ok"
	// PathDown answers every webhook 503.
	PathDown = "/webhooks/down"
	// PathHang holds every webhook without an answer until the sender
	// gives up (or HangFor has passed): the endpoint that times out.
	PathHang = "/webhooks/hang"
)

// EndpointPaths lists the per-endpoint scenario paths.
var EndpointPaths = []string{PathOK, PathDown, PathHang}

// HangFor is how long PathHang holds a webhook before it answers 504:
// longer than any sender waits.
const HangFor = time.Hour

// endpointPath returns the per-endpoint scenario path holds, or "" for a
// path under none.
func endpointPath(path string) string {
	for _, p := range EndpointPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return p
		}
	}
	return ""
}

// endpointOutcome returns the outcome of a webhook posted to path when
// the path is under a per-endpoint scenario.
func endpointOutcome(path string) (Outcome, bool) {
	switch endpointPath(path) {
	case PathOK:
		return Outcome{Accept: true, Code: httpOK}, true
	case PathDown:
		return Outcome{Code: httpUnavailable, Reason: "simulated endpoint down (" + PathDown + ")"}, true
	case PathHang:
		return Outcome{Code: httpGatewayTimeout, Reason: "simulated endpoint hanging (" + PathHang + ")", Delay: HangFor}, true
	}
	return Outcome{}, false
}
