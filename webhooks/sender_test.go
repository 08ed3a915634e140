package webhooks

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/relay-demo/relay/retry"
)

// fixedNow is the clock of tests that need a known time.
func fixedNow() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

// received is what a fake receiver saw of one request.
type received struct {
	Method, Path, ContentType, UserAgent string
	Header                               http.Header
	Body                                 string
}

// newReceiver starts a receiver that records each request and answers 200.
func newReceiver(t *testing.T) (*httptest.Server, func() []received) {
	t.Helper()
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{
			Method: r.Method, Path: r.URL.Path,
			ContentType: r.Header.Get("Content-Type"), UserAgent: r.Header.Get("User-Agent"),
			Header: r.Header.Clone(), Body: string(body),
		})
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

// loopback is the allow-list that lets a Sender reach httptest servers.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// newTestSender returns a Sender allowed to reach httptest servers, with
// its clock fixed at fixedNow.
func newTestSender(t *testing.T, cfg Config, signer *Signer) *Sender {
	t.Helper()
	cfg.Allow = loopback
	s := NewSender(cfg, signer)
	s.now = func() time.Time { return fixedNow() }
	return s
}

func TestSendDelivers(t *testing.T) {
	signer := mustSigner(t, specSecret)
	ts := time.Unix(specUnix, 0)
	tests := []struct {
		name      string
		cfg       Config
		req       Request
		wantUA    string
		wantStamp time.Time
	}{
		{"explicit timestamp", Config{}, Request{ID: specID, Payload: json.RawMessage(specBody), Timestamp: ts}, DefaultUserAgent, ts},
		{"zero timestamp is now", Config{UserAgent: "acme/2"}, Request{ID: "msg_2", Payload: json.RawMessage(`[1,2]`)}, "acme/2", fixedNow()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := newReceiver(t)
			tt.req.URL = srv.URL + "/hooks/in"
			resp, err := newTestSender(t, tt.cfg, signer).Send(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if resp.Status != http.StatusOK || resp.Duration <= 0 {
				t.Errorf("Response = %+v, want status 200 and a duration", resp)
			}
			reqs := got()
			if len(reqs) != 1 {
				t.Fatalf("receiver saw %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			want := received{Method: http.MethodPost, Path: "/hooks/in", ContentType: "application/json", UserAgent: tt.wantUA, Body: string(tt.req.Payload)}
			if diff := cmp.Diff(want, r, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Header" }, cmp.Ignore())); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if got, want := r.Header.Get(HeaderTimestamp), strconv.FormatInt(tt.wantStamp.Unix(), 10); got != want {
				t.Errorf("webhook-timestamp = %s, want %s", got, want)
			}
			if err := signer.Verify(r.Header, []byte(r.Body), tt.wantStamp); err != nil {
				t.Errorf("receiver cannot verify the delivery: %v", err)
			}
		})
	}
}

func TestSendSpecVectorOnTheWire(t *testing.T) {
	srv, got := newReceiver(t)
	s := newTestSender(t, Config{}, mustSigner(t, specSecret))
	_, err := s.Send(context.Background(), Request{URL: srv.URL, ID: specID, Payload: json.RawMessage(specBody), Timestamp: time.Unix(specUnix, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if sig := got()[0].Header.Get(HeaderSignature); sig != specSignature {
		t.Errorf("webhook-signature = %q, want %q", sig, specSignature)
	}
}

func TestSendUnsigned(t *testing.T) {
	srv, got := newReceiver(t)
	s := newTestSender(t, Config{}, nil)
	if _, err := s.Send(context.Background(), Request{URL: srv.URL, ID: "msg_1", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	h := got()[0].Header
	wantTS := strconv.FormatInt(fixedNow().Unix(), 10)
	if h.Get(HeaderID) != "msg_1" || h.Get(HeaderTimestamp) != wantTS || h.Get(HeaderSignature) != "" {
		t.Errorf("headers = %v, want id and timestamp without signature", h)
	}
}

func TestSendRefusesBadRequests(t *testing.T) {
	srv, got := newReceiver(t)
	tests := []struct {
		name    string
		req     Request
		wantErr string
	}{
		{"ftp scheme", Request{URL: "ftp://example.com/x", ID: "m", Payload: json.RawMessage(`{}`)}, `webhook ftp://example.com/x: bad url: scheme "ftp", want http or https`},
		{"no scheme", Request{URL: "example.com/x", ID: "m", Payload: json.RawMessage(`{}`)}, `webhook example.com/x: bad url: scheme "", want http or https`},
		{"no host", Request{URL: "http:///x", ID: "m", Payload: json.RawMessage(`{}`)}, `webhook http:///x: bad url: no host`},
		{"opaque", Request{URL: "http:example.com", ID: "m", Payload: json.RawMessage(`{}`)}, `webhook http:example.com: bad url: no host`},
		{"unparsable", Request{URL: "http://exa mple.com/?token=secret", ID: "m", Payload: json.RawMessage(`{}`)}, `webhook: bad url: invalid character " " in host name`},
		{"empty", Request{ID: "m", Payload: json.RawMessage(`{}`)}, "webhook: no url"},
		{"no id", Request{URL: srv.URL, Payload: json.RawMessage(`{}`)}, "webhook URL: request has no id"},
		{"no payload", Request{URL: srv.URL, ID: "m"}, "webhook URL m: payload is not valid JSON"},
		{"payload not json", Request{URL: srv.URL, ID: "m", Payload: json.RawMessage(`{"a":`)}, "webhook URL m: payload is not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSender(t, Config{}, mustSigner(t, specSecret))
			resp, err := s.Send(context.Background(), tt.req)
			if !retry.IsPermanent(err) {
				t.Fatalf("Send error = %v, want permanent", err)
			}
			if msg := strings.ReplaceAll(err.Error(), srv.URL, "URL"); msg != tt.wantErr {
				t.Errorf("error = %q, want %q", msg, tt.wantErr)
			}
			if resp != (Response{}) {
				t.Errorf("Response = %+v, want zero", resp)
			}
		})
	}
	if n := len(got()); n != 0 {
		t.Errorf("receiver saw %d requests, want 0", n)
	}
}

func TestSendRedirectIsNotFollowed(t *testing.T) {
	target, got := newReceiver(t)
	redirector := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	t.Cleanup(redirector.Close)

	s := newTestSender(t, Config{}, mustSigner(t, specSecret))
	resp, err := s.Send(context.Background(), Request{URL: redirector.URL + "/old", ID: "m", Payload: json.RawMessage(`{}`)})
	if !retry.IsPermanent(err) {
		t.Fatalf("Send error = %v, want permanent", err)
	}
	want := "webhook " + redirector.URL + "/old: 302 Found (redirects are not followed; configure the final URL)"
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if resp.Status != http.StatusFound {
		t.Errorf("Status = %d, want 302", resp.Status)
	}
	if n := len(got()); n != 0 {
		t.Errorf("redirect target saw %d requests, want 0", n)
	}
}

func TestSendHidesCredentialsInErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	u := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1) + "/hook?token=s3cret#frag"

	s := newTestSender(t, Config{}, mustSigner(t, specSecret))
	_, err := s.Send(context.Background(), Request{URL: u, ID: "m", Payload: json.RawMessage(`{}`)})
	want := "webhook " + srv.URL + "/hook: 500 Internal Server Error"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

// TestSendReusesConnections checks that responses are drained and closed:
// otherwise every delivery would open a new connection.
func TestSendReusesConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 32<<10))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	s := newTestSender(t, Config{}, mustSigner(t, specSecret))
	for i := range 3 {
		if _, err := s.Send(context.Background(), Request{URL: srv.URL, ID: "m" + strconv.Itoa(i), Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("server saw %d connections for 3 deliveries, want 1", n)
	}
}

func TestSendLargeResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		chunk := []byte(strings.Repeat("y", 64<<10))
		// Stream until the client hangs up, or 16 MiB.
		for range 256 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)

	s := newTestSender(t, Config{}, mustSigner(t, specSecret))
	resp, err := s.Send(context.Background(), Request{URL: srv.URL, ID: "m", Payload: json.RawMessage(`{}`)})
	if err != nil || resp.Status != http.StatusAccepted {
		t.Errorf("Send = %+v, %v, want 202 and nil", resp, err)
	}
}
