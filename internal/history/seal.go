package history

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SealKeyLength is the length of a seal key in bytes: AES-256.
const SealKeyLength = 32

// ErrSealed is returned for an endpoint whose secret is sealed, read by a
// store opened without the key (WithSealKey).
var ErrSealed = errors.New("its secret is sealed and no seal key (HISTORY_SEAL_KEY) was given")

// sealedPrefix starts a sealed secret as the endpoints table holds it;
// a plaintext secret (whsec_…) never does.
const sealedPrefix = "sealed:v1:"

// ParseSealKey decodes a seal key written in base64 (standard or URL
// alphabet, padded or not), as `openssl rand -base64 32` writes one. Its
// errors never quote the key.
func ParseSealKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(s); err == nil {
			if len(key) != SealKeyLength {
				return nil, fmt.Errorf("the key is %d bytes, want %d (openssl rand -base64 32 makes one)", len(key), SealKeyLength)
			}
			return key, nil
		}
	}
	return nil, errors.New("the key is not base64 (openssl rand -base64 32 makes one)")
}

// SealOptions are the options that open a store with key, the value of
// HISTORY_SEAL_KEY (ParseSealKey): WithSealKey, or none for an empty key.
// Its errors never quote the key.
func SealOptions(key string) ([]Option, error) {
	if strings.TrimSpace(key) == "" {
		return nil, nil
	}
	k, err := ParseSealKey(key)
	if err != nil {
		return nil, err
	}
	return []Option{WithSealKey(k)}, nil
}

// Option changes how Open opens a store.
type Option func(*Store) error

// WithSealKey seals the endpoints' signing secrets at rest with key
// (ParseSealKey; AES-256-GCM, each bound to its endpoint's id), and seals
// those stored in plaintext before it, as Open opens the store. Secrets
// sealed are read back with the same key only; plaintext ones are read as
// they are, with a key or without.
func WithSealKey(key []byte) Option {
	return func(s *Store) error {
		if len(key) != SealKeyLength {
			return fmt.Errorf("seal key: %d bytes, want %d", len(key), SealKeyLength)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return fmt.Errorf("seal key: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return fmt.Errorf("seal key: %w", err)
		}
		s.sealer = aead
		return nil
	}
}

// Sealed reports whether the store seals the endpoints' secrets.
func (s *Store) Sealed() bool { return s.sealer != nil }

// sealSecret is how endpoint id's secret is stored: sealed with the
// store's key, or as it is without one.
func (s *Store) sealSecret(id, secret string) string {
	if s.sealer == nil || secret == "" {
		return secret
	}
	nonce := make([]byte, s.sealer.NonceSize(), s.sealer.NonceSize()+len(secret)+s.sealer.Overhead())
	_, _ = rand.Read(nonce) // never fails (crypto/rand)
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(s.sealer.Seal(nonce, nonce, []byte(secret), []byte(id)))
}

// openSecret reads endpoint id's secret as stored: a sealed one opened
// with the store's key, a plaintext one as it is.
func (s *Store) openSecret(id, stored string) (Secret, error) {
	sealed, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return Secret(stored), nil
	}
	if s.sealer == nil {
		return "", fmt.Errorf("endpoint %q: %w", id, ErrSealed)
	}
	raw, err := base64.RawStdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < s.sealer.NonceSize() {
		return "", fmt.Errorf("endpoint %q: its sealed secret is garbled", id)
	}
	plain, err := s.sealer.Open(nil, raw[:s.sealer.NonceSize()], raw[s.sealer.NonceSize():], []byte(id))
	if err != nil {
		return "", fmt.Errorf("endpoint %q: its secret was sealed with another key than HISTORY_SEAL_KEY, or altered", id)
	}
	return Secret(plain), nil
}

// sealStored seals the endpoints' secrets stored in plaintext, once a
// store has a key. Each row is rewritten only if it still holds what was
// read, so replicas that open at once do not undo each other.
func (s *Store) sealStored(ctx context.Context) error {
	if s.sealer == nil {
		return nil
	}
	rows, err := s.write.QueryContext(ctx, s.d.q(`SELECT id, secret, previous_secret FROM endpoints
		WHERE secret NOT LIKE 'sealed:%' OR (previous_secret <> '' AND previous_secret NOT LIKE 'sealed:%')`))
	if err != nil {
		return fmt.Errorf("read plaintext endpoint secrets: %w", err)
	}
	type row struct{ id, secret, previous string }
	var plain []row
	err = each(rows, func() error {
		var r row
		if err := rows.Scan(&r.id, &r.secret, &r.previous); err != nil {
			return err
		}
		plain = append(plain, r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read plaintext endpoint secrets: %w", err)
	}
	for _, r := range plain {
		seal := func(v string) string {
			if strings.HasPrefix(v, sealedPrefix) {
				return v
			}
			return s.sealSecret(r.id, v)
		}
		if _, err := s.write.ExecContext(ctx, s.d.q(`UPDATE endpoints SET secret = $2, previous_secret = $3
			WHERE id = $1 AND secret = $4 AND previous_secret = $5`),
			r.id, seal(r.secret), seal(r.previous), r.secret, r.previous); err != nil {
			return fmt.Errorf("seal the secret of endpoint %q: %w", r.id, err)
		}
	}
	return nil
}
