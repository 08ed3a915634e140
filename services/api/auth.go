package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/peer"
	"github.com/relay-demo/relay/internal/problem"
)

// visitorKey marks the context of a public dashboard's visitor: a request
// without a token that requireToken let through.
type visitorKey struct{}

// visitor reports whether ctx is a public dashboard's visitor's, who sees
// the notifications redacted (see viewFor).
func visitor(ctx context.Context) bool { return ctx.Value(visitorKey{}) != nil }

// requireToken lets a request through only with a bearer token from
// tokens. Each configured token is compared, in constant time, with the
// presented one, both hashed first so their lengths do not matter, and
// every comparison runs whatever the earlier ones found. With no tokens,
// every request is refused.
//
// With failures set, each client address may fail only at its rate: once
// its missing and wrong tokens have spent its bucket, its requests get 429
// before their token is even looked at, so guessing tokens goes no faster
// than the rate, however many requests are sent at once. A right token
// spends nothing here.
//
// With visitors (DASHBOARD_PUBLIC), a request without an Authorization
// header goes through as a visitor, neither refused nor charged: the
// routes it may not use refuse it (tokenOnly), the others redact.
func requireToken(creds []credential, failures *limiter, now func() time.Time, visitors bool) func(http.Handler) http.Handler {
	match := matcher(creds)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if visitors && r.Header.Get("Authorization") == "" {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), visitorKey{}, true)))
				return
			}
			var addr string
			if failures != nil {
				addr = peer.Addr(r)
				if ok, wait := failures.check(addr, now()); !ok {
					problem.Write(w, rateLimited(fmt.Sprintf("more than %s request(s) a second with a missing or wrong bearer token from this address; try again after Retry-After",
						perSecond(float64(failures.rate))), wait))
					return
				}
			}
			fail := func(p *Problem) {
				if failures != nil {
					failures.charge(addr, now())
				}
				problem.Write(w, p)
			}
			token, ok := bearer(r.Header.Get("Authorization"))
			if !ok {
				fail(unauthorized("send Authorization: Bearer <token>", `Bearer realm="relay"`))
				return
			}
			who, ok := match(token)
			if !ok {
				fail(unauthorized("the bearer token is not one the API accepts", `Bearer realm="relay", error="invalid_token"`))
				return
			}
			next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), who)))
		})
	}
}

// tokenOnly refuses a public dashboard's visitor as requireToken refuses
// a request without a token.
func tokenOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if visitor(r.Context()) {
			problem.Write(w, unauthorized("send Authorization: Bearer <token>", `Bearer realm="relay"`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer takes the token out of an Authorization header value.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
