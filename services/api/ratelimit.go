package api

import (
	"fmt"
	"math"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/relay-demo/relay/internal/peer"
	"github.com/relay-demo/relay/internal/problem"
)

// DefaultLimiterKeys is how many tokens or client addresses a limiter
// follows at most.
const DefaultLimiterKeys = 10_000

// sweepEvery is how often a limiter drops the keys that have been idle
// long enough for their bucket to be full again.
const sweepEvery = time.Minute

// The limit on failed authentications when Deps leaves it at zero, as
// API_AUTH_FAILURE_RATE and API_AUTH_FAILURE_BURST default to: a client
// that mistyped its token sees the 401s of its first tries, while one
// that guesses gets one guess a second.
const (
	// DefaultAuthFailureRate is how many missing or wrong tokens a client
	// address may send a second.
	DefaultAuthFailureRate = 1.0
	// DefaultAuthFailureBurst is how many it may send at once.
	DefaultAuthFailureBurst = 10
)

// DefaultBurst is the burst for a rate when none is configured: twice the
// rate, at least 1.
func DefaultBurst(rate float64) int {
	return max(1, int(math.Ceil(2*rate)))
}

// limiter is a token bucket per key (golang.org/x/time/rate): each key
// may spend burst requests at once, and earns rate more a second. It
// follows at most max keys, so a flood of new keys cannot grow it without
// bound: a key whose bucket is full holds nothing worth keeping and is
// dropped first; when every key is busy, an arbitrary one goes (and starts
// again with a full bucket).
type limiter struct {
	rate  rate.Limit
	burst int
	max   int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	swept   time.Time
}

func newLimiter(perSecond float64, burst, keys int) *limiter {
	return &limiter{rate: rate.Limit(perSecond), burst: burst, max: keys, buckets: map[string]*rate.Limiter{}}
}

// wait is how long b needs to hold one token again, as of now.
func (l *limiter) wait(b *rate.Limiter, now time.Time) time.Duration {
	return time.Duration(math.Ceil((1 - b.TokensAt(now)) / float64(l.rate) * float64(time.Second)))
}

// get returns key's bucket, making a full one if need be.
func (l *limiter) get(key string, now time.Time) *rate.Limiter {
	b, ok := l.buckets[key]
	if !ok {
		l.makeRoom(now)
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[key] = b
	}
	return b
}

// take spends one of key's tokens if it has one; if not, it says how long
// until it will.
func (l *limiter) take(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.get(key, now)
	if b.AllowN(now, 1) {
		return true, 0
	}
	return false, l.wait(b, now)
}

// check says whether key holds a token, without spending it, and if not
// how long until it will. A key the limiter does not follow holds a full
// bucket, and is not followed for being checked.
func (l *limiter) check(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok || b.TokensAt(now) >= 1 {
		return true, 0
	}
	return false, l.wait(b, now)
}

// charge spends one of key's tokens, into debt if it has none: requests
// checked together and charged after all count, so the rate holds however
// many arrive at once.
func (l *limiter) charge(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.get(key, now).ReserveN(now, 1)
}

// makeRoom drops idle keys now and then, and makes room for one more key.
// The lock is held.
func (l *limiter) makeRoom(now time.Time) {
	full := len(l.buckets) >= l.max
	// When full, sweep at most once a second: if every key is busy, a sweep
	// per new key would cost the whole map each time.
	if now.Sub(l.swept) >= sweepEvery || (full && now.Sub(l.swept) >= time.Second) {
		l.swept = now
		for k, b := range l.buckets {
			if b.TokensAt(now) >= float64(l.burst) {
				delete(l.buckets, k)
			}
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < l.max {
			break
		}
		delete(l.buckets, k)
	}
}

// size is how many keys the limiter follows.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// perSecond writes a rate for a message: "50", "0.5".
func perSecond(rate float64) string {
	return strconv.FormatFloat(rate, 'f', -1, 64)
}

// rateKey is the bucket a request to /v1/ spends from, and how to name
// it to the client: its bearer token's, found by requireToken, or while
// authentication is off its client address's.
func rateKey(r *http.Request) (key, whose string) {
	if id := identity(r.Context()); id != "" {
		return id, "with this token"
	}
	return "addr " + peer.Addr(r), "from this address"
}

// limitRate answers 429 to a client over its rate. Each bearer token has
// a bucket of its own; while authentication is off, each client address.
// It runs after requireToken, which has found the token's identity. Every
// request costs one token here; a request that makes notifications pays
// for the rest of its copies in chargeCopies.
func limitRate(l *limiter, now func() time.Time) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key, whose := rateKey(r)
			if ok, wait := l.take(key, now()); !ok {
				problem.Write(w, rateLimited(fmt.Sprintf("more than %s request(s) a second %s (a burst of %d at most); try again after Retry-After",
					perSecond(float64(l.rate)), whose, int(l.burst)), wait))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// chargeCopies makes a request that publishes copies notifications pay
// for every copy, not only for the request: limitRate took one token, this
// the rest, so that API_RATE_LIMIT bounds the copies a token makes however
// they are packed, one to a request or thousands in a batch. With
// API_TENANT_RATE_LIMIT the copies are also paid for, all of them, from
// the bucket of the request's tenant, which every token of the tenant
// shares (an operator's copies are the default tenant's). It answers nil
// when both buckets held them (they are spent then), else the problem to
// answer with, having spent nothing from either: 429 with Retry-After when
// the buckets will hold them, 413 when they are more than a burst, which
// no wait makes room for.
func (d Deps) chargeCopies(r *http.Request, copies int) *Problem {
	l, tl := d.perClient, d.perTenant
	if l == nil || copies <= 1 {
		l = nil // limitRate took the one copy there is
	}
	if tl == nil || copies < 1 {
		tl = nil
	}
	if l == nil && tl == nil {
		return nil
	}
	key, whose := rateKey(r)
	tenant := tenantOf(r.Context())
	if l != nil && copies > l.burst {
		return tooManyCopies(fmt.Sprintf("the request makes %d copies, and at most %d may be sent at once %s (API_RATE_BURST); send them in parts of %d copies or fewer",
			copies, l.burst, whose, l.burst))
	}
	if tl != nil && copies > tl.burst {
		return tooManyCopies(fmt.Sprintf("the request makes %d copies, and at most %d may be sent at once by %s (API_TENANT_RATE_BURST), whichever of its tokens sends them; send them in parts of %d copies or fewer",
			copies, tl.burst, tenantLabel(tenant), tl.burst))
	}
	// The tenant's bucket first: takeAll locks in the order it is given,
	// and every caller gives the same.
	waits := takeAll(d.Now(), spend{tl, tenant, copies}, spend{l, key, copies - 1})
	switch {
	case waits == nil:
		return nil
	case waits[0] > 0 && waits[0] >= waits[1]:
		return rateLimited(fmt.Sprintf("the request makes %d copies, more than %s a second %s allows now to all its tokens together (API_TENANT_RATE_LIMIT, a burst of %d at most); try again after Retry-After",
			copies, perSecond(float64(tl.rate)), tenantLabel(tenant), tl.burst), waits[0])
	default:
		return rateLimited(fmt.Sprintf("the request makes %d copies, more than %s a second %s allows now (a burst of %d at most); try again after Retry-After",
			copies, perSecond(float64(l.rate)), whose, l.burst), waits[1])
	}
}

// tenantLabel names a tenant in a message: "tenant \"acme\"", or "the
// default tenant" for "".
func tenantLabel(tenant string) string {
	if tenant == "" {
		return "the default tenant"
	}
	return fmt.Sprintf("tenant %q", tenant)
}

// spend is n tokens to take from key's bucket in l; a nil l takes none.
type spend struct {
	l   *limiter
	key string
	n   int
}

// takeAll spends every one of spends if each bucket holds its n, or
// spends nothing: then it returns, for each, how long until its bucket
// will hold its n (0 for one that holds it now). It holds the limiters'
// locks together, taken in the order given, so two limiters must always
// be given in the same order, and never one twice. Every n is at most its
// limiter's burst.
func takeAll(now time.Time, spends ...spend) []time.Duration {
	for _, s := range spends {
		if s.l != nil {
			s.l.mu.Lock()
			defer s.l.mu.Unlock()
		}
	}
	waits := make([]time.Duration, len(spends))
	short := false
	for i, s := range spends {
		if s.l == nil || s.n <= 0 {
			continue
		}
		missing := float64(s.n) - s.l.get(s.key, now).TokensAt(now)
		if missing > 0 {
			waits[i] = time.Duration(math.Ceil(missing / float64(s.l.rate) * float64(time.Second)))
			short = true
		}
	}
	if short {
		return waits
	}
	for _, s := range spends {
		if s.l != nil && s.n > 0 {
			s.l.get(s.key, now).AllowN(now, s.n)
		}
	}
	return nil
}

// limitDashboard puts the dashboard's data under the limits /v1/ has, so
// that it is no faster way to guess a token (GET /dashboard/session
// answers whether one is right) nor to read the queues. A request with a
// bearer token is checked as requireToken checks one, whatever the rate
// limit: from an address whose wrong tokens have spent its bucket, 429
// before the token is looked at; a wrong token spends one (and the
// dashboard answers 401). With a rate limit, a right token spends from
// the token's own bucket, shared with /v1/, and a request without a token
// to a data route (/dashboard/...) spends from its address's bucket. The
// page and its files are not limited.
func limitDashboard(d Deps) func(http.Handler) http.Handler {
	match := matcher(d.credentials())
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			if auth == "" && (d.perClient == nil || !strings.HasPrefix(path.Clean("/"+r.URL.Path), "/dashboard/")) {
				next.ServeHTTP(w, r)
				return
			}
			addr := peer.Addr(r)
			key, whose := "addr "+addr, "from this address"
			if auth != "" && !d.AuthOff {
				if ok, wait := d.authFailures.check(addr, d.Now()); !ok {
					problem.Write(w, rateLimited(fmt.Sprintf("more than %s request(s) a second with a missing or wrong bearer token from this address; try again after Retry-After",
						perSecond(float64(d.authFailures.rate))), wait))
					return
				}
				token, _ := bearer(auth)
				who, ok := match(token)
				if !ok {
					d.authFailures.charge(addr, d.Now())
					next.ServeHTTP(w, r) // the dashboard refuses it
					return
				}
				key, whose = who.id, "with this token"
			}
			if d.perClient == nil {
				next.ServeHTTP(w, r)
				return
			}
			if ok, wait := d.perClient.take(key, d.Now()); !ok {
				problem.Write(w, rateLimited(fmt.Sprintf("more than %s request(s) a second %s (a burst of %d at most); try again after Retry-After",
					perSecond(float64(d.perClient.rate)), whose, d.perClient.burst), wait))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
