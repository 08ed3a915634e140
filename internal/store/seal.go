package store

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
// HISTORY_SEAL_KEY (ParseSealKey), and fallbacks, the comma-separated keys
// of HISTORY_SEAL_KEY_FALLBACKS: WithSealKey and WithSealKeyFallbacks, or
// none for an empty key. Fallbacks need a key. Its errors never quote a
// key.
func SealOptions(key, fallbacks string) ([]Option, error) {
	var others [][]byte
	for i, f := range strings.Split(fallbacks, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		k, err := ParseSealKey(f)
		if err != nil {
			return nil, fmt.Errorf("HISTORY_SEAL_KEY_FALLBACKS, key %d: %w", i+1, err)
		}
		others = append(others, k)
	}
	if strings.TrimSpace(key) == "" {
		if len(others) > 0 {
			return nil, errors.New("HISTORY_SEAL_KEY_FALLBACKS is set and HISTORY_SEAL_KEY is not: fallback keys only open secrets, the key seals them")
		}
		return nil, nil
	}
	k, err := ParseSealKey(key)
	if err != nil {
		return nil, fmt.Errorf("HISTORY_SEAL_KEY: %w", err)
	}
	opts := []Option{WithSealKey(k)}
	if len(others) > 0 {
		opts = append(opts, WithSealKeyFallbacks(others...))
	}
	return opts, nil
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
		aead, err := newAEAD(key)
		if err != nil {
			return fmt.Errorf("seal key: %w", err)
		}
		s.sealer = aead
		return nil
	}
}

// WithSealKeyFallbacks opens secrets sealed with any of keys besides the
// store's own (WithSealKey), and seals them again with its own as Open
// opens the store: the keys of a rotation. They never seal.
func WithSealKeyFallbacks(keys ...[]byte) Option {
	return func(s *Store) error {
		for i, key := range keys {
			aead, err := newAEAD(key)
			if err != nil {
				return fmt.Errorf("seal key fallback %d: %w", i+1, err)
			}
			s.fallbacks = append(s.fallbacks, aead)
		}
		return nil
	}
}

// WithReseal has Open seal again with the store's key every secret a
// fallback key opens (WithSealKeyFallbacks). Only the endpoints' writer,
// the API, opens its store so: a worker that still runs with the keys of
// before a rotation must not seal them back with the old key.
func WithReseal() Option {
	return func(s *Store) error {
		s.reseal = true
		return nil
	}
}

// Resealed is how many secrets Open sealed again with the store's key,
// which a fallback key had sealed.
func (s *Store) Resealed() int { return s.resealed }

// newAEAD is AES-256-GCM with key.
func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != SealKeyLength {
		return nil, fmt.Errorf("%d bytes, want %d", len(key), SealKeyLength)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
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
// with the store's key or one of its fallbacks, a plaintext one as it is.
func (s *Store) openSecret(id, stored string) (Secret, error) {
	plain, _, err := s.unseal(id, stored)
	return plain, err
}

// unseal opens a stored secret, and reports whether the store's own key
// sealed it (or it is plaintext).
func (s *Store) unseal(id, stored string) (plain Secret, own bool, err error) {
	sealed, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return Secret(stored), true, nil
	}
	if s.sealer == nil {
		return "", false, fmt.Errorf("endpoint %q: %w", id, ErrSealed)
	}
	raw, err := base64.RawStdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < s.sealer.NonceSize() {
		return "", false, fmt.Errorf("endpoint %q: its sealed secret is garbled", id)
	}
	for i, aead := range append([]cipher.AEAD{s.sealer}, s.fallbacks...) {
		if p, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(id)); err == nil {
			return Secret(p), i == 0, nil
		}
	}
	return "", false, fmt.Errorf("endpoint %q: its secret was sealed with another key than HISTORY_SEAL_KEY (and HISTORY_SEAL_KEY_FALLBACKS), or altered", id)
}

// sealStored seals the endpoints' secrets stored in plaintext, and with
// WithReseal those a fallback key sealed, with the store's key, once a
// store has one. Each
// row is rewritten only if it still holds what was read, so replicas that
// open at once do not undo each other. A secret no key opens is left as it
// is, for its read to say so.
func (s *Store) sealStored(ctx context.Context) error {
	if s.sealer == nil {
		return nil
	}
	query := `SELECT id, secret, previous_secret FROM endpoints
		WHERE secret NOT LIKE 'sealed:%' OR (previous_secret <> '' AND previous_secret NOT LIKE 'sealed:%')`
	if s.reseal && len(s.fallbacks) > 0 {
		query = `SELECT id, secret, previous_secret FROM endpoints`
	}
	rows, err := s.write.QueryContext(ctx, s.d.q(query))
	if err != nil {
		return fmt.Errorf("read the endpoints' secrets: %w", err)
	}
	type row struct{ id, secret, previous string }
	var all []row
	err = each(rows, func() error {
		var r row
		if err := rows.Scan(&r.id, &r.secret, &r.previous); err != nil {
			return err
		}
		all = append(all, r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the endpoints' secrets: %w", err)
	}
	for _, r := range all {
		changed, resealed := false, false
		seal := func(v string) string {
			if v == "" {
				return v
			}
			plain, own, err := s.unseal(r.id, v)
			if err != nil || own && strings.HasPrefix(v, sealedPrefix) || !own && !s.reseal {
				return v
			}
			changed, resealed = true, resealed || !own
			return s.sealSecret(r.id, string(plain))
		}
		secret, previous := seal(r.secret), seal(r.previous)
		if !changed {
			continue
		}
		if _, err := s.write.ExecContext(ctx, s.d.q(`UPDATE endpoints SET secret = $2, previous_secret = $3
			WHERE id = $1 AND secret = $4 AND previous_secret = $5`),
			r.id, secret, previous, r.secret, r.previous); err != nil {
			return fmt.Errorf("seal the secret of endpoint %q: %w", r.id, err)
		}
		if resealed {
			s.resealed++
		}
	}
	return nil
}
