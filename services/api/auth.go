package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// identityKey is the context key of the authenticated client's identity.
type identityKey struct{}

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
func requireToken(tokens []string) func(http.Handler) http.Handler {
	hashes := make([][sha256.Size]byte, len(tokens))
	for i, t := range tokens {
		hashes[i] = sha256.Sum256([]byte(t))
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, ok := bearer(r.Header.Get("Authorization"))
			if !ok {
				writeProblem(w, unauthorized("send Authorization: Bearer <token>", `Bearer realm="relay"`))
				return
			}
			sum := sha256.Sum256([]byte(token))
			match := 0
			for i := range hashes {
				match |= subtle.ConstantTimeCompare(sum[:], hashes[i][:])
			}
			if match != 1 {
				writeProblem(w, unauthorized("the bearer token is not one the API accepts", `Bearer realm="relay", error="invalid_token"`))
				return
			}
			ctx := context.WithValue(r.Context(), identityKey{}, hex.EncodeToString(sum[:]))
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
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
