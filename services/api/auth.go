package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/peer"
	"github.com/relay-demo/relay/internal/problem"
)

// identityKey is the context key of the authenticated client's identity.
type identityKey struct{}

// visitorKey marks the context of a public dashboard's visitor: a request
// without a token that requireToken let through.
type visitorKey struct{}

// visitor reports whether ctx is a public dashboard's visitor's, who sees
// the notifications redacted (see viewFor).
func visitor(ctx context.Context) bool { return ctx.Value(visitorKey{}) != nil }

// identity is the hex SHA-256 of the bearer token a request authenticated
// with, or "" when authentication is off. Idempotency keys are scoped to
// it, so two clients' keys never meet.
func identity(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(string)
	return id
}

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
func requireToken(tokens []string, failures *limiter, now func() time.Time, visitors bool) func(http.Handler) http.Handler {
	match := tokenMatcher(tokens)
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
			id, ok := match(token)
			if !ok {
				fail(unauthorized("the bearer token is not one the API accepts", `Bearer realm="relay", error="invalid_token"`))
				return
			}
			ctx := context.WithValue(r.Context(), identityKey{}, id)
			next.ServeHTTP(w, r.WithContext(ctx))
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

// tokenMatcher returns the check of a presented token against tokens:
// each is compared, in constant time, with the presented one, both hashed
// first so their lengths do not matter, and every comparison runs
// whatever the earlier ones found. It returns the token's identity (see
// identity) and whether it is one of tokens.
func tokenMatcher(tokens []string) func(token string) (id string, ok bool) {
	hashes := make([][sha256.Size]byte, len(tokens))
	for i, t := range tokens {
		hashes[i] = sha256.Sum256([]byte(t))
	}
	return func(token string) (string, bool) {
		sum := sha256.Sum256([]byte(token))
		match := 0
		for i := range hashes {
			match |= subtle.ConstantTimeCompare(sum[:], hashes[i][:])
		}
		return hex.EncodeToString(sum[:]), match == 1
	}
}
