package dashboard

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// Access is what a request's credentials allow on the dashboard.
type Access int

const (
	// Anonymous is a request without a bearer token. It is refused, or on
	// a public dashboard served without error texts, payloads and headers.
	Anonymous Access = iota
	// Refused is a request with a bearer token the API does not accept.
	// It is refused, public dashboard or not, so a mistyped token is
	// noticed.
	Refused
	// Authenticated is a request with a token the API accepts, or any
	// request when the API runs without authentication.
	Authenticated
)

// problemBase starts the type of every problem the dashboard answers
// with, as the API's problems do.
const problemBase = "https://relay.dev/problems/"

// problem is an RFC 9457 problem detail.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Errors names each invalid query parameter of a 422.
	Errors []fieldError `json:"errors,omitempty"`

	retryAfter   int    // seconds; a Retry-After header when set
	authenticate string // a WWW-Authenticate header when set
}

// fieldError is one invalid query parameter.
type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func writeProblem(w http.ResponseWriter, p problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	if p.authenticate != "" {
		h.Set("WWW-Authenticate", p.authenticate)
	}
	body, _ := json.Marshal(p) // strings and numbers: always encodes
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

func unauthorized(detail, challenge string) problem {
	return problem{Type: problemBase + "unauthorized", Title: "Missing or invalid bearer token",
		Status: http.StatusUnauthorized, Detail: detail, authenticate: challenge}
}

// allow decides what r may see: full is true with a valid token (or no
// authentication at all), false for a visitor without one on a public
// dashboard. When ok is false, the 401 has been written.
func (s *server) allow(w http.ResponseWriter, r *http.Request) (full, ok bool) {
	switch s.Authenticate(r) {
	case Authenticated:
		return true, true
	case Refused:
		writeProblem(w, unauthorized("the bearer token is not one the API accepts", `Bearer realm="relay", error="invalid_token"`))
		return false, false
	}
	if s.Public {
		return false, true
	}
	writeProblem(w, unauthorized("send Authorization: Bearer <token>, a token from the API's API_TOKENS", `Bearer realm="relay"`))
	return false, false
}

// clientOf is the address a request comes from, without its port: what
// the per-client cap counts. Behind a proxy, every client is the proxy.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limiter counts the open event streams, in total and per client.
type limiter struct {
	max, perClient int

	mu      sync.Mutex
	total   int
	clients map[string]int
}

func newLimiter(total, perClient int) *limiter {
	return &limiter{max: total, perClient: perClient, clients: map[string]int{}}
}

// acquire takes a place for a stream from client, or says why there is
// none; release gives the place back.
func (l *limiter) acquire(client string) (release func(), refusal *problem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tooMany := func(detail string) *problem {
		return &problem{Type: problemBase + "too-many-streams", Title: "Too many event streams",
			Status: http.StatusTooManyRequests, Detail: detail, retryAfter: 5}
	}
	switch {
	case l.total >= l.max:
		return nil, tooMany("the dashboard serves " + strconv.Itoa(l.max) + " event streams already (DASHBOARD_MAX_STREAMS); try again later")
	case l.clients[client] >= l.perClient:
		return nil, tooMany("this address has " + strconv.Itoa(l.perClient) + " event streams open already (DASHBOARD_MAX_STREAMS_PER_CLIENT); close one first")
	}
	l.total++
	l.clients[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.clients[client]--; l.clients[client] <= 0 {
				delete(l.clients, client)
			}
		})
	}, nil
}

// open is the number of streams open.
func (l *limiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}
