package dashboard

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/relay-demo/relay/internal/problem"
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

// Viewer is whom a request stands for on the dashboard: what its
// credentials allow, and whose notifications it sees.
type Viewer struct {
	// Access is what the request's credentials allow.
	Access Access
	// Tenant is the tenant of the request's token; "" for the default
	// tenant, whose notifications a public dashboard's visitor sees.
	Tenant string
	// Operator sees every tenant's notifications: a request with an
	// operator's token, or any request when the API runs without
	// authentication.
	Operator bool
}

// Sees reports whether v may see what belongs to tenant ("" for the
// default tenant): its own tenant's, or an operator anything.
func (v Viewer) Sees(tenant string) bool { return v.Operator || v.Tenant == tenant }

// handle adapts a route that returns its failure (see problem.Handle): a
// problem is never to be cached.
func (s *server) handle(h problem.HandlerFunc) http.HandlerFunc {
	return problem.Handle(s.Log, func(w http.ResponseWriter, r *http.Request) error {
		err := h(w, r)
		if err != nil {
			w.Header().Set("Cache-Control", "no-store")
		}
		return err
	})
}

func unauthorized(detail, challenge string) *problem.Problem {
	return &problem.Problem{Type: problem.Base + "unauthorized", Title: "Missing or invalid bearer token",
		Status: http.StatusUnauthorized, Detail: detail, Authenticate: challenge}
}

// allow decides whom r stands for: a viewer whose Access is Authenticated
// with a valid token (or no authentication at all) sees everything of its
// tenant's, a visitor without one on a public dashboard what is public of
// the default tenant's. refusal is the 401 of a request that may see
// nothing.
func (s *server) allow(r *http.Request) (v Viewer, refusal *problem.Problem) {
	v = s.Authenticate(r)
	switch v.Access {
	case Authenticated:
		return v, nil
	case Refused:
		return Viewer{Access: Refused}, unauthorized("the bearer token is not one the API accepts", `Bearer realm="relay", error="invalid_token"`)
	}
	// Whatever Authenticate said of its tenant, a request without a token
	// is the default tenant's visitor.
	v = Viewer{Access: Anonymous}
	if s.Public {
		return v, nil
	}
	return v, unauthorized("send Authorization: Bearer <token>, a token from the API's API_TOKENS", `Bearer realm="relay"`)
}

// full reports whether v sees error texts, payloads and headers: it
// presented a token the API accepts.
func (v Viewer) full() bool { return v.Access == Authenticated }

// limiter counts the open event streams, in total and per client: a
// client is a peer.Addr, as the API's rate limits count one.
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
func (l *limiter) acquire(client string) (release func(), refusal *problem.Problem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tooMany := func(detail string) *problem.Problem {
		return &problem.Problem{Type: problem.Base + "too-many-streams", Title: "Too many event streams",
			Status: http.StatusTooManyRequests, Detail: detail, RetryAfter: 5}
	}
	switch {
	case l.total >= l.max:
		return nil, tooMany("the dashboard serves " + strconv.Itoa(l.max) + " event streams already (DASHBOARD_MAX_STREAMS); try again later")
	case l.clients[client] >= l.perClient:
		return nil, tooMany("this address (an IPv6 one with its /64) has " + strconv.Itoa(l.perClient) + " event streams open already (DASHBOARD_MAX_STREAMS_PER_CLIENT); close one first")
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
