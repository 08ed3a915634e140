package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the Standard Webhooks scheme. http.Header canonicalises
// them on Set ("Webhook-Id"); receivers match them case-insensitively.
const (
	// HeaderID carries the message id, the same on every attempt.
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the signing time in unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries one or more space-separated "v1,<base64>"
	// signatures.
	HeaderSignature = "webhook-signature"
)

// secretPrefix marks a Standard Webhooks symmetric secret. It is not part of
// the key: only the base64 text after it is.
const secretPrefix = "whsec_"

// tolerance is how far a webhook-timestamp may be from the verifier's clock.
// It bounds how long a captured request can be replayed, and leaves room for
// clock skew between sender and receiver.
const tolerance = 5 * time.Minute

// MinKeyBytes is the shortest key CheckSecret accepts: 24 bytes (192
// bits), the least the Standard Webhooks specification asks of a secret.
const MinKeyBytes = 24

// ErrBadSecret is returned by NewSigner for a secret that is empty or is
// not base64, and by CheckSecret for one that is not fit to sign with.
var ErrBadSecret = errors.New("bad webhook secret")

// ErrMissingHeaders is returned by Verify when webhook-id,
// webhook-timestamp or webhook-signature is absent.
var ErrMissingHeaders = errors.New("missing webhook signature headers")

// ErrTimestamp is returned by Verify when webhook-timestamp is not a unix
// time or lies more than five minutes from the verifier's clock.
var ErrTimestamp = errors.New("webhook timestamp out of tolerance")

// ErrSignature is returned by Verify when no v1 signature in
// webhook-signature matches the message.
var ErrSignature = errors.New("no matching webhook signature")

// Signer signs and verifies webhooks with a shared secret, as the Standard
// Webhooks specification describes (HMAC-SHA256, "v1" signatures). It holds
// only the key and is safe for concurrent use.
type Signer struct {
	key []byte
}

// NewSigner returns a Signer for secret, given as "whsec_" followed by the
// base64 key, or as the bare base64 key. Padding may be left off. It takes
// any key that is not empty, so a receiver can verify with whatever secret
// its sender was given; a sender's configuration should call CheckSecret
// first. Its errors never quote the secret.
func NewSigner(secret string) (*Signer, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return nil, fmt.Errorf("new signer: %w", err)
	}
	return &Signer{key: key}, nil
}

// CheckSecret reports whether secret is fit to sign with: "whsec_"
// followed by the base64 (standard alphabet, padding optional) of a key of
// at least MinKeyBytes bytes, such as a secret made of 32 random bytes:
//
//	echo "whsec_$(head -c 32 /dev/urandom | base64)"
//
// Its errors wrap ErrBadSecret and never quote the secret.
func CheckSecret(secret string) error {
	if !strings.HasPrefix(strings.TrimSpace(secret), secretPrefix) {
		return fmt.Errorf("%w: no whsec_ prefix", ErrBadSecret)
	}
	key, err := decodeSecret(secret)
	if err != nil {
		return err
	}
	if len(key) < MinKeyBytes {
		return fmt.Errorf("%w: the key is %d bytes, want %d or more", ErrBadSecret, len(key), MinKeyBytes)
	}
	return nil
}

// decodeSecret returns the key of a secret in either of NewSigner's forms.
func decodeSecret(secret string) ([]byte, error) {
	b64 := strings.TrimPrefix(strings.TrimSpace(secret), secretPrefix)
	if b64 == "" {
		return nil, fmt.Errorf("%w: empty, want whsec_<base64 key> or <base64 key>", ErrBadSecret)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		// Some secret generators drop the padding; the key is the same.
		var rawErr error
		if key, rawErr = base64.RawStdEncoding.DecodeString(b64); rawErr != nil {
			// Wrap the padded decoder's error only: it names the offending
			// byte, and the secret itself must not reach a log.
			return nil, fmt.Errorf("%w: want whsec_<base64 key> or <base64 key>: %w", ErrBadSecret, err)
		}
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty key, want whsec_<base64 key> or <base64 key>", ErrBadSecret)
	}
	return key, nil
}

// Sign returns the signature of one message, "v1," followed by the base64
// HMAC-SHA256 of "id.unixSeconds.body". Sub-second precision of ts is
// dropped, as the timestamp header carries whole seconds.
func (s *Signer) Sign(id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(s.mac(id, ts.Unix(), body))
}

// Headers returns the webhook-id, webhook-timestamp and webhook-signature
// headers for one message, ready to add to a request.
func (s *Signer) Headers(id string, ts time.Time, body []byte) http.Header {
	h := make(http.Header, 3)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, s.Sign(id, ts, body))
	return h
}

// Verify checks a received webhook: the three headers are present, the
// timestamp is within five minutes of now, and at least one of the
// space-separated signatures in webhook-signature is a v1 signature of
// body. Entries of other versions are skipped, so a sender may list a v1
// signature beside newer schemes, or sign with an old and a new secret
// while rotating.
func (s *Signer) Verify(h http.Header, body []byte, now time.Time) error {
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	var missing []string
	for _, p := range [...]struct{ name, value string }{
		{HeaderID, id}, {HeaderTimestamp, tsText}, {HeaderSignature, sigs},
	} {
		if p.value == "" {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("verify webhook: %w: %s", ErrMissingHeaders, strings.Join(missing, ", "))
	}

	unix, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("verify webhook: %w: %q is not a unix time", ErrTimestamp, tsText)
	}
	// Compare in whole seconds, the header's precision. Bounds around now
	// rather than a difference, which an absurd header value could overflow.
	window := int64(tolerance / time.Second)
	if unix < now.Unix()-window || unix > now.Unix()+window {
		return fmt.Errorf("verify webhook: %w: %d is more than %s from %d", ErrTimestamp, unix, tolerance, now.Unix())
	}

	want := s.mac(id, unix, body)
	for _, entry := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		// hmac.Equal runs in constant time, so the response time does not
		// tell an attacker how many leading bytes of a forgery were right.
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("verify webhook %s: %w", id, ErrSignature)
}

// mac computes the raw HMAC over the content the specification signs.
func (s *Signer) mac(id string, unix int64, body []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
