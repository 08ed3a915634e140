package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewSecret(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if a == b {
		t.Fatalf("two secrets alike: %q", a)
	}
	for _, s := range []string{a, b} {
		if err := CheckSecret(s); err != nil {
			t.Errorf("CheckSecret(NewSecret()) = %v", err)
		}
		key, err := decodeSecret(s)
		if err != nil || len(key) != SecretBytes {
			t.Errorf("key of %d bytes (%v), want %d", len(key), err, SecretBytes)
		}
	}
}

// TestHeadersRotation signs with an old and a new secret: a receiver with
// either accepts, one with a third secret refuses.
func TestHeadersRotation(t *testing.T) {
	oldS, newS, other := mustSigner(t, NewSecret()), mustSigner(t, NewSecret()), mustSigner(t, NewSecret())
	ts := fixedNow()
	body := []byte(`{"a":1}`)
	h := Headers("msg_1", ts, body, newS, nil, oldS)
	sigs := strings.Fields(h.Get(HeaderSignature))
	if len(sigs) != 2 || sigs[0] != newS.Sign("msg_1", ts, body) || sigs[1] != oldS.Sign("msg_1", ts, body) {
		t.Fatalf("webhook-signature = %q, want the new signature, a space, the old one", h.Get(HeaderSignature))
	}
	for name, v := range map[string]*Signer{"old": oldS, "new": newS} {
		if err := v.Verify(h, body, ts); err != nil {
			t.Errorf("receiver with the %s secret: %v", name, err)
		}
	}
	if err := other.Verify(h, body, ts); !errors.Is(err, ErrSignature) {
		t.Errorf("receiver with another secret: %v, want ErrSignature", err)
	}
	if got := Headers("msg_1", ts, body).Get(HeaderSignature); got != "" {
		t.Errorf("no signers: webhook-signature = %q, want none", got)
	}
}

// TestSendRequestSigners checks that a request's own signers replace the
// Sender's.
func TestSendRequestSigners(t *testing.T) {
	senderS, oldS, newS := mustSigner(t, NewSecret()), mustSigner(t, NewSecret()), mustSigner(t, NewSecret())
	srv, got := newReceiver(t)
	s := newTestSender(t, Config{}, senderS)
	req := Request{URL: srv.URL, ID: "msg_1", Payload: json.RawMessage(`{}`), Signers: []*Signer{newS, oldS}}
	if _, err := s.Send(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := got()[0]
	for name, v := range map[string]*Signer{"old": oldS, "new": newS} {
		if err := v.Verify(r.Header, []byte(r.Body), fixedNow()); err != nil {
			t.Errorf("receiver with the %s secret: %v", name, err)
		}
	}
	if err := senderS.Verify(r.Header, []byte(r.Body), fixedNow().Add(time.Second)); !errors.Is(err, ErrSignature) {
		t.Errorf("receiver with the sender's own secret: %v, want ErrSignature", err)
	}
}
