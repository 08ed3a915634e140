package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/problem"
)

// DefaultLinkTTL is how long a one-time link's code may be redeemed.
const DefaultLinkTTL = 2 * time.Minute

// maxLinks bounds the codes waiting to be redeemed, whatever their number
// of issuers.
const maxLinks = 1000

// ErrTooManyLinks is Issue's error while maxLinks codes wait to be
// redeemed.
var ErrTooManyLinks = errors.New("too many one-time links wait to be used; try again in a few minutes")

// Links hands one of the API's tokens to the dashboard page by a one-time
// link (relay dashboard): a code that the page, opened at the link,
// exchanges once for the token (POST /dashboard/link), within the TTL.
// The link carries the code in its fragment, which a browser never sends
// to a server, and never the token. Links keeps only each code's SHA-256,
// in this process's memory: a code is redeemed at the API process that
// issued it.
type Links struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	codes map[[sha256.Size]byte]pending
}

// pending is the token a code stands for, until it expires.
type pending struct {
	token   string
	expires time.Time
}

// NewLinks returns the links of one API process: codes good for ttl
// (DefaultLinkTTL when zero or less), on the clock now (time.Now when
// nil).
func NewLinks(ttl time.Duration, now func() time.Time) *Links {
	if ttl <= 0 {
		ttl = DefaultLinkTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Links{ttl: ttl, now: now, codes: map[[sha256.Size]byte]pending{}}
}

// Issue returns a new code that stands for token until expires.
func (l *Links) Issue(token string) (code string, expires time.Time, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", time.Time{}, err
	}
	code = base64.RawURLEncoding.EncodeToString(b)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, p := range l.codes {
		if !now.Before(p.expires) {
			delete(l.codes, k)
		}
	}
	if len(l.codes) >= maxLinks {
		return "", time.Time{}, ErrTooManyLinks
	}
	expires = now.Add(l.ttl)
	l.codes[sha256.Sum256([]byte(code))] = pending{token: token, expires: expires}
	return code, expires, nil
}

// Redeem returns the token code stands for, once: a code is gone after
// its first use, whether it had expired or not.
func (l *Links) Redeem(code string) (token string, ok bool) {
	key := sha256.Sum256([]byte(code))
	l.mu.Lock()
	defer l.mu.Unlock()
	p, found := l.codes[key]
	if !found {
		return "", false
	}
	delete(l.codes, key)
	if !l.now().Before(p.expires) {
		return "", false
	}
	return p.token, true
}

// TTL is how long a code may be redeemed.
func (l *Links) TTL() time.Duration { return l.ttl }

// LinkPath is the path and fragment of the page that opens notification
// id's detail (none when id is empty) and, with a code, logs in with it
// first: "/#/n/ntf_…?code=…". The page reads the fragment as it loads.
func LinkPath(id, code string) string {
	frag := ""
	if id != "" {
		frag = "/n/" + url.PathEscape(id)
	}
	if code != "" {
		frag += "?code=" + url.QueryEscape(code)
	}
	if frag == "" {
		return "/"
	}
	return "/#" + frag
}

// maxCodeBody bounds the body of POST /dashboard/link.
const maxCodeBody = 1 << 10

// redeem is POST /dashboard/link: {"code": "…"} answered with {"token":
// "…"} once, or a 401 for a code unknown, used or expired. The code is
// in the body, so no request log or proxy sees it in a URL.
func (s *server) redeem(w http.ResponseWriter, r *http.Request) error {
	if s.Links == nil {
		return &problem.Problem{Type: problem.Base + "not-found", Title: "Not found", Status: http.StatusNotFound,
			Detail: "this dashboard takes no one-time links"}
	}
	var body struct {
		Code string `json:"code"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCodeBody)).Decode(&body); err != nil || body.Code == "" {
		return &problem.Problem{Type: problem.Base + "malformed-json", Title: "Malformed JSON", Status: http.StatusBadRequest,
			Detail: `send {"code": "…"}, the code of a one-time link`}
	}
	token, ok := s.Links.Redeem(body.Code)
	if !ok {
		return unauthorized("the link's code is not one this API issued, was used already or has expired: run relay dashboard again for a new link, or log in with a token",
			`Bearer realm="relay", error="invalid_token"`)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(struct {
		Token string `json:"token"`
	}{token})
}
