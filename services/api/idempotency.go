package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
)

// DefaultIdempotencyTTL is how long an Idempotency-Key is remembered when
// nothing else is configured.
const DefaultIdempotencyTTL = 24 * time.Hour

// HistoryStore is what the API reads, claims and cancels in the
// notification history; *store.Store is one.
type HistoryStore interface {
	CancelStore
	ProviderStore
	Get(ctx context.Context, id string) (*notification.View, error)
	List(ctx context.Context, q store.Query) (store.Page, error)
	Claim(ctx context.Context, scope, key string, fingerprint []byte, id string, now time.Time, ttl time.Duration) (store.Claim, error)
	Complete(ctx context.Context, scope, key string, response []byte) error
	Release(ctx context.Context, scope, key string) error
	Ping(ctx context.Context) error
}

// keyClaim is a request's hold on its Idempotency-Key.
type keyClaim struct {
	scope, key, id string
	// done is the answer of the earlier request with the same key and
	// body: give it again, publish nothing.
	done []byte
}

// fingerprint identifies a request's content: the notification as the
// API reads it, before it has an id or a time, so that whitespace and key
// order in the JSON do not matter.
func fingerprint(n *notification.Notification, w when) []byte {
	c := *n
	c.ID, c.CreatedAt = "", time.Time{}
	b, _ := json.Marshal(c)
	// When it goes out, as asked: another send_at is another request. A
	// notification sent at once hashes as it always did.
	if w.SendAt != nil {
		b = append(b, "\x00send_at="+*w.SendAt...)
	}
	if w.Delay != nil {
		b = append(b, "\x00delay="+*w.Delay...)
	}
	// Its type too, which the copies' bodies do not hold.
	if n.Type != "" {
		b = append(b, "\x00type="+n.Type...)
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// pendingPoll is how often a request waits on another that holds its key.
const pendingPoll = 25 * time.Millisecond

// claimKey claims key for n. A repeat of a completed request gets its
// answer back (done); the same key with another body is a 422; a repeat
// of a request still publishing waits for it, up to the publish timeout,
// then is told to try again (409).
func claimKey(ctx context.Context, deps Deps, scope, key string, n *notification.Notification, w when) (*keyClaim, *Problem) {
	fp := fingerprint(n, w)
	deadline := time.Now().Add(deps.PublishTimeout)
	for {
		c, err := deps.History.Claim(ctx, scope, key, fp, n.ID, deps.Now(), deps.IdempotencyTTL)
		if err != nil {
			deps.Log.Error("claim Idempotency-Key", "error", err)
			return nil, unavailable("the Idempotency-Key could not be checked: the history store is unavailable")
		}
		switch c.State {
		case store.ClaimNew:
			return &keyClaim{scope: scope, key: key, id: n.ID}, nil
		case store.ClaimDone:
			return &keyClaim{scope: scope, key: key, id: c.ID, done: c.Response}, nil
		case store.ClaimMismatch:
			return nil, newProblem(ProblemKeyReused, http.StatusUnprocessableEntity, "Idempotency-Key reused",
				"this Idempotency-Key was used within the last "+deps.IdempotencyTTL.String()+" for a different notification ("+c.ID+"); use a new key for new content")
		case store.ClaimPending:
			if deps.Now().Sub(c.CreatedAt) > 2*deps.PublishTimeout {
				// Its request can no longer be publishing: the process that
				// held it stopped in between. Free the key and claim again.
				deps.Log.Warn("freeing an Idempotency-Key its request abandoned", "id", c.ID)
				if err := deps.History.Release(ctx, scope, key); err != nil {
					return nil, unavailable("the Idempotency-Key could not be checked: the history store is unavailable")
				}
				continue
			}
		}
		if time.Now().After(deadline) {
			p := newProblem(ProblemKeyInFlight, http.StatusConflict, "Idempotency-Key in use",
				"a request with this Idempotency-Key is still being published; try again shortly")
			p.RetryAfter = 1
			return nil, p
		}
		t := time.NewTimer(pendingPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, unavailable("the request ended while another with the same Idempotency-Key was being published")
		case <-t.C:
		}
	}
}

// complete stores the answer for the key's repeats.
func (c *keyClaim) complete(deps Deps, body []byte) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := deps.History.Complete(ctx, c.scope, c.key, body); err != nil {
		// Published and confirmed: the client gets its 202. A repeat
		// waits for the claim to expire and then publishes again, which
		// downstreams deduplicate by id.
		deps.Log.Error("store the answer of an Idempotency-Key", "id", c.id, "error", err)
	}
}

// release frees the key of a request that was not published, so a retry
// can publish.
func (c *keyClaim) release(deps Deps) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := deps.History.Release(ctx, c.scope, c.key); err != nil {
		deps.Log.Error("release an Idempotency-Key", "id", c.id, "error", err)
	}
}

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
