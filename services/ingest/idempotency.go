package ingest

import (
	"crypto/sha256"
	"net/http"
	"strings"
)

// MaxIdempotencyKey is the longest Idempotency-Key the API accepts.
const MaxIdempotencyKey = 255

// idempotentID derives the id of a notification from the client's
// identity and its Idempotency-Key: the same pair always gives the same
// id, and two identities sharing a key get different ids.
func idempotentID(identity, key string) string {
	sum := sha256.Sum256([]byte(identity + "\x00" + key))
	return IDPrefix + strings.ToLower(idEncoding.EncodeToString(sum[:]))[:26]
}

// idempotencyKey reads the Idempotency-Key header: absent is fine, but a
// present one must be 1 to MaxIdempotencyKey printable ASCII characters,
// not counting the blanks around it.
func idempotencyKey(h http.Header) (string, bool, *Problem) {
	values, present := h[http.CanonicalHeaderKey("Idempotency-Key")]
	if !present {
		return "", false, nil
	}
	if len(values) != 1 {
		return "", false, invalidHeader("send one Idempotency-Key header, not several")
	}
	key := strings.Trim(values[0], " \t") // as a header on the wire would be
	if len(key) == 0 || len(key) > MaxIdempotencyKey {
		return "", false, invalidHeader("Idempotency-Key must hold 1 to 255 printable ASCII characters")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", false, invalidHeader("Idempotency-Key must hold 1 to 255 printable ASCII characters")
		}
	}
	return key, true, nil
}
