package store_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
)

func TestParseSealKey(t *testing.T) {
	key := make([]byte, store.SealKeyLength)
	_, _ = rand.Read(key)
	tests := []struct {
		name, in string
		wantErr  string
	}{
		{name: "standard base64", in: base64.StdEncoding.EncodeToString(key)},
		{name: "unpadded, with a newline", in: base64.RawStdEncoding.EncodeToString(key) + "\n"},
		{name: "URL alphabet", in: base64.URLEncoding.EncodeToString(key)},
		{name: "too short", in: base64.StdEncoding.EncodeToString(key[:16]), wantErr: "16 bytes, want 32"},
		{name: "not base64", in: "correct horse battery staple", wantErr: "not base64"},
		{name: "empty", in: "", wantErr: "0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := store.ParseSealKey(tt.in)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("ParseSealKey = %v, want an error saying %q", err, tt.wantErr)
			case tt.wantErr == "" && (err != nil || string(got) != string(key)):
				t.Errorf("ParseSealKey = %x, %v; want the key", got, err)
			case err != nil && strings.Contains(err.Error(), tt.in) && tt.in != "":
				t.Errorf("the error %q quotes the key", err)
			}
		})
	}
}

// TestSealedSecrets: with a seal key, the endpoints' secrets are stored
// sealed, those stored in plaintext before are sealed as the store opens,
// and every one reads back as it was. Without the key, or with another, a
// sealed secret is not read; nor is one moved to another endpoint's row.
func TestSealedSecrets(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := ctxOf(t)
			dsn := storetest.DSN(t, backend)
			key, other := make([]byte, store.SealKeyLength), make([]byte, store.SealKeyLength)
			_, _ = rand.Read(key)
			_, _ = rand.Read(other)
			open := opener(t, dsn)
			stored := func(s *store.Store, id string) string {
				t.Helper()
				rows, err := store.QueryText(ctx, s, "SELECT secret || ' ' || previous_secret FROM endpoints WHERE id = '"+id+"'")
				if err != nil || len(rows) != 1 {
					t.Fatalf("read the stored secret of %s: %v %v", id, rows, err)
				}
				return rows[0][0]
			}

			// An earlier release, or a store without a key: plaintext.
			plain := open()
			if plain.Sealed() {
				t.Error("a store without a key says it seals")
			}
			createEndpoint(t, plain, ep1, t0)
			if got := stored(plain, ep1); !strings.Contains(got, secret1) {
				t.Fatalf("stored without a key: %q, want the secret in plaintext", got)
			}
			plain.Close()

			// With the key: sealed as the store opens, read as it was.
			sealed := open(store.WithSealKey(key))
			if got := stored(sealed, ep1); strings.Contains(got, "whsec_") || !strings.HasPrefix(got, "sealed:v1:") {
				t.Errorf("stored once opened with a key: %q, want it sealed", got)
			}
			if e := endpoint(t, sealed, ep1); e.Secret != secret1 {
				t.Errorf("read back: %q, want %q", e.Secret.Reveal(), secret1)
			}
			if _, err := sealed.RotateEndpointSecret(ctx, ep1, secret2, time.Hour, t0); err != nil {
				t.Fatal(err)
			}
			createEndpoint(t, sealed, ep2, t0)
			for _, id := range []string{ep1, ep2} {
				if got := stored(sealed, id); strings.Contains(got, "whsec_") {
					t.Errorf("%s stored: %q, want every secret sealed", id, got)
				}
			}
			if e := endpoint(t, sealed, ep1); e.Secret != secret2 || e.PreviousSecret != secret1 {
				t.Errorf("after a rotation: %q and %q, want %q and %q", e.Secret.Reveal(), e.PreviousSecret.Reveal(), secret2, secret1)
			}
			if page, err := sealed.ListEndpoints(ctx, store.EndpointQuery{}); err != nil || len(page.Items) != 2 {
				t.Errorf("list: %+v, %v; want both endpoints", page, err)
			}
			sealed.Close()

			if _, err := open().Endpoint(ctx, ep1); !errors.Is(err, store.ErrSealed) || !strings.Contains(err.Error(), "HISTORY_SEAL_KEY") {
				t.Errorf("read without the key: %v, want ErrSealed naming HISTORY_SEAL_KEY", err)
			}
			if _, err := open(store.WithSealKey(other)).Endpoint(ctx, ep1); err == nil || strings.Contains(err.Error(), secret1) {
				t.Errorf("read with another key: %v, want an error", err)
			}
			// A sealed secret is bound to its endpoint.
			s := open(store.WithSealKey(key))
			if _, err := store.QueryText(ctx, s, "UPDATE endpoints SET secret = (SELECT secret FROM endpoints WHERE id = '"+ep1+"') WHERE id = '"+ep2+"'"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Endpoint(ctx, ep2); err == nil {
				t.Error("a sealed secret moved to another endpoint was read")
			}
		})
	}
}

// TestSQLiteFilesPrivate: the database, its write-ahead log and its index
// are created readable by their owner only, and the directories relay
// creates for them likewise; Exposed names a file others may read.
func TestSQLiteFilesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "relay")
	path := filepath.Join(dir, "history.db")
	s, err := store.Open(ctxOf(t), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A write, so that the write-ahead log holds something.
	accept(t, s, "ntf_private", "email")
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(name)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", filepath.Base(name), fi.Mode(), err)
		}
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want mode 0700", d, fi.Mode(), err)
		}
	}
	if got := s.Exposed(); got != nil {
		t.Errorf("Exposed = %v, want none", got)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := s.Exposed(); len(got) != 1 || got[0] != path+" 0644" {
		t.Errorf("Exposed after chmod 644 = %v, want the database", got)
	}
	if got := storetest.Open(t, storetest.Postgres).Exposed(); got != nil {
		t.Errorf("Exposed on PostgreSQL = %v, want nil", got)
	}
}

// TestSealKeyRotation: a store given a new key and the old one as a
// fallback reads what the old key sealed; opened with WithReseal (as the
// API opens it) it seals those secrets again with the new key, after which
// the new key alone reads them and the old alone does not. Opened without
// WithReseal (as a worker opens it) it rewrites nothing.
func TestSealKeyRotation(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := ctxOf(t)
			dsn := storetest.DSN(t, backend)
			oldKey, newKey := make([]byte, store.SealKeyLength), make([]byte, store.SealKeyLength)
			_, _ = rand.Read(oldKey)
			_, _ = rand.Read(newKey)
			open := opener(t, dsn)
			readable := func(s *store.Store) bool {
				t.Helper()
				e, err := s.Endpoint(ctx, ep1)
				return err == nil && e.Secret == secret2 && e.PreviousSecret == secret1
			}

			before := open(store.WithSealKey(oldKey))
			createEndpoint(t, before, ep1, t0)
			if _, err := before.RotateEndpointSecret(ctx, ep1, secret2, time.Hour, t0); err != nil {
				t.Fatal(err)
			}
			before.Close()

			worker := open(store.WithSealKey(newKey), store.WithSealKeyFallbacks(oldKey))
			if !readable(worker) || worker.Resealed() != 0 {
				t.Errorf("a worker's store with the old key as a fallback: readable %t, resealed %d; want readable, nothing resealed", readable(worker), worker.Resealed())
			}
			if !readable(open(store.WithSealKey(oldKey))) {
				t.Error("a worker's store rewrote the secrets: the old key no longer reads them")
			}

			api := open(store.WithSealKey(newKey), store.WithSealKeyFallbacks(oldKey), store.WithReseal())
			if !readable(api) || api.Resealed() != 1 {
				t.Errorf("the API's store: readable %t, resealed %d; want readable, 1 endpoint resealed", readable(api), api.Resealed())
			}
			if !readable(open(store.WithSealKey(newKey))) {
				t.Error("after the reseal the new key alone does not read the secrets")
			}
			if _, err := open(store.WithSealKey(oldKey)).Endpoint(ctx, ep1); err == nil || !strings.Contains(err.Error(), "HISTORY_SEAL_KEY_FALLBACKS") {
				t.Errorf("the old key alone after the reseal: %v, want an error naming HISTORY_SEAL_KEY_FALLBACKS", err)
			}
			if again := open(store.WithSealKey(newKey), store.WithSealKeyFallbacks(oldKey), store.WithReseal()); again.Resealed() != 0 {
				t.Errorf("a second open resealed %d, want 0", again.Resealed())
			}
		})
	}
}

// TestSealOptions: the settings' errors name the setting and never quote a
// key; fallbacks need a key.
func TestSealOptions(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(make([]byte, store.SealKeyLength))
	tests := []struct {
		key, fallbacks string
		want           int
		wantErr        string
	}{
		{},
		{key: key, want: 1},
		{key: key, fallbacks: key + ", " + key, want: 2},
		{key: key, fallbacks: " , ", want: 1},
		{fallbacks: key, wantErr: "HISTORY_SEAL_KEY_FALLBACKS is set and HISTORY_SEAL_KEY is not"},
		{key: "sesame!", wantErr: "HISTORY_SEAL_KEY: the key is not base64"},
		{key: key, fallbacks: key + ",sesame!", wantErr: "HISTORY_SEAL_KEY_FALLBACKS, key 2: the key is not base64"},
	}
	for _, tt := range tests {
		opts, err := store.SealOptions(tt.key, tt.fallbacks)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("SealOptions(%q, %q) = %v, want an error saying %q", tt.key, tt.fallbacks, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || len(opts) != tt.want):
			t.Errorf("SealOptions(%q, %q) = %d options, %v; want %d", tt.key, tt.fallbacks, len(opts), err, tt.want)
		case err != nil && strings.Contains(err.Error(), "sesame"):
			t.Errorf("the error %q quotes a key", err)
		}
	}
}

// opener opens the store at dsn with the options given, closed when the
// test ends.
func opener(t *testing.T, dsn string) func(opts ...store.Option) *store.Store {
	return func(opts ...store.Option) *store.Store {
		t.Helper()
		s, err := store.Open(ctxOf(t), dsn, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}
