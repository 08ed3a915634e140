package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SecretBytes is the length of the keys NewSecret makes: 32 bytes (256
// bits), the size of the HMAC-SHA256 output.
const SecretBytes = 32

// NewSecret returns a fresh random secret, "whsec_" followed by the base64
// of SecretBytes random bytes: fit to sign with (see CheckSecret), and the
// form every Standard Webhooks library reads.
func NewSecret() string {
	key := make([]byte, SecretBytes)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Headers returns the webhook-id, webhook-timestamp and webhook-signature
// headers for one message signed by every one of signers: their
// signatures, space-separated, in the order given. Sent while a secret is
// rotated, with the new and the old signer, it is accepted by a receiver
// that verifies with either secret (the Standard Webhooks specification
// lets a receiver try each signature). Nil signers are skipped.
func Headers(id string, ts time.Time, body []byte, signers ...*Signer) http.Header {
	h := make(http.Header, 3)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	sigs := make([]string, 0, len(signers))
	for _, s := range signers {
		if s != nil {
			sigs = append(sigs, s.Sign(id, ts, body))
		}
	}
	if len(sigs) > 0 {
		h.Set(HeaderSignature, strings.Join(sigs, " "))
	}
	return h
}

// SameKey reports whether secrets a and b sign with the same key, however
// each is written ("whsec_" or not, padded or not). A secret that does
// not decode shares a key with nothing.
func SameKey(a, b string) bool {
	ka, errA := decodeSecret(a)
	kb, errB := decodeSecret(b)
	return errA == nil && errB == nil && hmac.Equal(ka, kb)
}
