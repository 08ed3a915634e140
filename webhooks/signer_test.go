package webhooks

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The test vector published with the Standard Webhooks specification.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specUnix      = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestNewSigner(t *testing.T) {
	tests := []struct {
		name    string
		secret  string
		wantErr error
	}{
		{"whsec form", specSecret, nil},
		{"bare base64", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", nil},
		{"padded base64", "whsec_AAEC", nil},
		{"unpadded base64", "whsec_AAE", nil},
		{"surrounding space", " " + specSecret + "\n", nil},
		{"empty", "", ErrBadSecret},
		{"prefix only", "whsec_", ErrBadSecret},
		{"not base64", "whsec_not*base64!", ErrBadSecret},
		{"url alphabet", "whsec_-_-_", ErrBadSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSigner(tt.secret)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewSigner(%q) error = %v, want %v", tt.secret, err, tt.wantErr)
			}
			if err == nil && s == nil {
				t.Fatal("NewSigner returned neither a Signer nor an error")
			}
		})
	}
}

func TestCheckSecret(t *testing.T) {
	key32 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa7}, 32))
	tests := []struct {
		name    string
		secret  string
		wantErr string // "" for none
	}{
		{"spec vector, 24 bytes", specSecret, ""},
		{"32 bytes", "whsec_" + key32, ""},
		{"32 bytes unpadded", "whsec_" + strings.TrimRight(key32, "="), ""},
		{"surrounding space", " whsec_" + key32 + "\n", ""},
		{"23 bytes", "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 23)), "the key is 23 bytes, want 24 or more"},
		{"short key", "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM=", "the key is 20 bytes"},
		{"no prefix", key32, "no whsec_ prefix"},
		{"other prefix", "whsk_" + key32, "no whsec_ prefix"},
		{"prefix only", "whsec_", "empty"},
		{"empty", "", "no whsec_ prefix"},
		{"not base64", "whsec_" + key32[:10] + "*" + key32[11:], "illegal base64"},
		{"url alphabet", "whsec_" + strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 30))), "illegal base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSecret(tt.secret)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckSecret = %v, want nil", err)
				}
				if _, err := NewSigner(tt.secret); err != nil {
					t.Errorf("CheckSecret accepted a secret NewSigner refuses: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadSecret) {
				t.Fatalf("CheckSecret = %v, want ErrBadSecret", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CheckSecret = %q, want it to say %q", err, tt.wantErr)
			}
			if key := strings.TrimPrefix(strings.TrimSpace(tt.secret), "whsec_"); len(key) > 4 && strings.Contains(err.Error(), key) {
				t.Errorf("CheckSecret's error quotes the secret: %v", err)
			}
		})
	}
}

func TestNewSignerSameKeyEveryForm(t *testing.T) {
	ts := time.Unix(specUnix, 0)
	for _, secret := range []string{specSecret, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		s, err := NewSigner(secret)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Sign(specID, ts, []byte(specBody)); got != specSignature {
			t.Errorf("secret %q: Sign = %q, want %q", secret, got, specSignature)
		}
	}
}

func TestSignSpecVector(t *testing.T) {
	s := mustSigner(t, specSecret)
	tests := []struct {
		name string
		ts   time.Time
		body string
		want string
	}{
		{"published vector", time.Unix(specUnix, 0), specBody, specSignature},
		{"sub-second part is dropped", time.Unix(specUnix, 999_999_999), specBody, specSignature},
		{"other time zone, same instant", time.Unix(specUnix, 0).In(time.FixedZone("x", 5*3600)), specBody, specSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Sign(specID, tt.ts, []byte(tt.body)); got != tt.want {
				t.Errorf("Sign = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	s := mustSigner(t, specSecret)
	got := s.Headers(specID, time.Unix(specUnix, 0), []byte(specBody))
	want := http.Header{
		"Webhook-Id":        {specID},
		"Webhook-Timestamp": {strconv.Itoa(specUnix)},
		"Webhook-Signature": {specSignature},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Headers (-want +got):\n%s", diff)
	}
}

func TestVerify(t *testing.T) {
	s := mustSigner(t, specSecret)
	other := mustSigner(t, "whsec_c2VjcmV0LXVzZWQtYnktc29tZW9uZS1lbHNl")
	ts := time.Unix(specUnix, 0)
	body := []byte(specBody)
	otherSig := other.Sign(specID, ts, body)

	headers := func(id, timestamp, sig string) http.Header {
		h := http.Header{}
		for k, v := range map[string]string{HeaderID: id, HeaderTimestamp: timestamp, HeaderSignature: sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h
	}
	unix := strconv.Itoa(specUnix)

	tests := []struct {
		name   string
		header http.Header
		body   string
		now    time.Time
		want   error
	}{
		{"published vector", headers(specID, unix, specSignature), specBody, ts, nil},
		{"one of several signatures", headers(specID, unix, otherSig+" "+specSignature), specBody, ts, nil},
		{"other versions skipped", headers(specID, unix, "v1a,bm90LXRoaXM= "+specSignature), specBody, ts, nil},
		{"extra spaces between entries", headers(specID, unix, "  "+otherSig+"   "+specSignature+" "), specBody, ts, nil},
		{"timestamp 5 minutes old", headers(specID, unix, specSignature), specBody, ts.Add(5 * time.Minute), nil},
		{"timestamp 5 minutes ahead", headers(specID, unix, specSignature), specBody, ts.Add(-5 * time.Minute), nil},
		{"timestamp too old", headers(specID, unix, specSignature), specBody, ts.Add(5*time.Minute + time.Second), ErrTimestamp},
		{"timestamp too new", headers(specID, unix, specSignature), specBody, ts.Add(-5*time.Minute - time.Second), ErrTimestamp},
		{"timestamp not a number", headers(specID, "yesterday", specSignature), specBody, ts, ErrTimestamp},
		{"timestamp in milliseconds", headers(specID, unix+"000", specSignature), specBody, ts, ErrTimestamp},
		{"timestamp absurdly small", headers(specID, "-9223372036854775808", specSignature), specBody, ts, ErrTimestamp},
		{"missing id", headers("", unix, specSignature), specBody, ts, ErrMissingHeaders},
		{"missing timestamp", headers(specID, "", specSignature), specBody, ts, ErrMissingHeaders},
		{"missing signature", headers(specID, unix, ""), specBody, ts, ErrMissingHeaders},
		{"no headers", http.Header{}, specBody, ts, ErrMissingHeaders},
		{"tampered body", headers(specID, unix, specSignature), `{"test": 2432232315}`, ts, ErrSignature},
		{"other id", headers("msg_other", unix, specSignature), specBody, ts, ErrSignature},
		{"other timestamp", headers(specID, strconv.Itoa(specUnix+1), specSignature), specBody, ts, ErrSignature},
		{"other secret", headers(specID, unix, otherSig), specBody, ts, ErrSignature},
		{"signature without version", headers(specID, unix, "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), specBody, ts, ErrSignature},
		{"right signature, wrong version", headers(specID, unix, "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), specBody, ts, ErrSignature},
		{"signature not base64", headers(specID, unix, "v1,!!!"), specBody, ts, ErrSignature},
		{"truncated signature", headers(specID, unix, specSignature[:20]), specBody, ts, ErrSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Verify(tt.header, []byte(tt.body), tt.now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyHeadersRoundTrip(t *testing.T) {
	s := mustSigner(t, specSecret)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, body := range []string{"", "{}", `{"unicode":"héllo","n":[1,2,3]}`, "not json at all\x00"} {
		h := s.Headers("msg_1", now, []byte(body))
		if err := s.Verify(h, []byte(body), now); err != nil {
			t.Errorf("body %q: Verify(Headers(...)) = %v", body, err)
		}
	}
}

func mustSigner(t *testing.T, secret string) *Signer {
	t.Helper()
	s, err := NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
