package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/relay-demo/relay/internal/notification"
)

// A tenant is a set of tokens whose notifications, endpoints and dead
// letters are their own: each token belongs to one, and sees and changes
// only what its tenant's tokens made. API_TOKENS are the default
// tenant's (named "" inside relay, and left out of every answer), so a
// deployment that names no tenant has one, with every token in it, and
// works as it always has. API_TENANT_TOKENS puts tokens in named tenants;
// API_OPERATOR_TOKENS are the operators', who see every tenant.

// TenantToken is a bearer token of a named tenant.
type TenantToken struct {
	Tenant string
	Token  string
}

// tenantName is what a tenant may be called: it is shown in answers,
// logs and message headers, and compared byte for byte.
var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// tenantNameForm says what tenantName accepts, for error messages.
const tenantNameForm = "1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit"

// parseTenantTokens reads API_TENANT_TOKENS' TENANT:TOKEN pairs, naming
// the pair at fault by its position, never quoting a token.
func parseTenantTokens(pairs []string) ([]TenantToken, error) {
	var out []TenantToken
	for i, p := range pairs {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		tenant, token, ok := strings.Cut(p, ":")
		tenant, token = strings.TrimSpace(tenant), strings.TrimSpace(token)
		switch {
		case !ok || token == "":
			return nil, fmt.Errorf("configuration: API_TENANT_TOKENS is not valid: pair %d of %d is not TENANT:TOKEN", i+1, len(pairs))
		case tenant == "default":
			return nil, fmt.Errorf("configuration: API_TENANT_TOKENS is not valid: pair %d of %d names tenant \"default\", which is API_TOKENS' tenant: put the token in API_TOKENS, or name another tenant", i+1, len(pairs))
		case !tenantName.MatchString(tenant):
			return nil, fmt.Errorf("configuration: API_TENANT_TOKENS is not valid: pair %d of %d names tenant %q, want %s", i+1, len(pairs), tenant, tenantNameForm)
		}
		out = append(out, TenantToken{Tenant: tenant, Token: token})
	}
	return out, nil
}

// principal is who a request authenticated as.
type principal struct {
	// id is the hex SHA-256 of the token: idempotency keys, rate limits
	// and the producer's turns are kept per token by it.
	id string
	// tenant is the token's tenant, "" for the default tenant.
	tenant string
	// operator sees and acts on every tenant.
	operator bool
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf is who ctx's request authenticated as: with authentication
// off, an operator with no identity (nothing tells clients apart then); a
// public dashboard's visitor is the default tenant's.
func principalOf(ctx context.Context) principal {
	if p, ok := ctx.Value(principalKey{}).(principal); ok {
		return p
	}
	if visitor(ctx) {
		return principal{}
	}
	return principal{operator: true}
}

// identity is the hex SHA-256 of the bearer token a request authenticated
// with, or "" when authentication is off. Idempotency keys are scoped to
// it, so two clients' keys never meet.
func identity(ctx context.Context) string { return principalOf(ctx).id }

// tenantOf is the tenant what ctx's request makes belongs to: its token's.
// An operator's belong to the default tenant.
func tenantOf(ctx context.Context) string { return principalOf(ctx).tenant }

// sees reports whether ctx's request may see what belongs to tenant: its
// own tenant's, or anything for an operator. What it may not see is
// answered as what does not exist, so a tenant learns nothing of
// another's ids.
func sees(ctx context.Context, tenant string) bool {
	p := principalOf(ctx)
	return p.operator || p.tenant == tenant
}

// credential is one accepted token and whom it stands for.
type credential struct {
	hash     [sha256.Size]byte
	tenant   string
	operator bool
}

// credentials are every token d accepts: API_TOKENS, API_TENANT_TOKENS and
// API_OPERATOR_TOKENS.
func (d Deps) credentials() []credential {
	var out []credential
	for _, t := range d.Tokens {
		out = append(out, credential{hash: sha256.Sum256([]byte(t))})
	}
	for _, t := range d.TenantTokens {
		out = append(out, credential{hash: sha256.Sum256([]byte(t.Token)), tenant: t.Tenant})
	}
	for _, t := range d.OperatorTokens {
		out = append(out, credential{hash: sha256.Sum256([]byte(t)), operator: true})
	}
	return out
}

// matcher returns the check of a presented token against creds: each is
// compared, in constant time, with the presented one, both hashed first
// so their lengths do not matter, and every comparison runs whatever the
// earlier ones found. It returns whom the token stands for and whether it
// is one of creds.
func matcher(creds []credential) func(token string) (principal, bool) {
	return func(token string) (principal, bool) {
		sum := sha256.Sum256([]byte(token))
		found := -1
		for i := range creds {
			found = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(sum[:], creds[i].hash[:]), i, found)
		}
		if found < 0 {
			return principal{}, false
		}
		c := creds[found]
		return principal{id: hex.EncodeToString(sum[:]), tenant: c.tenant, operator: c.operator}, true
	}
}

// tenantParam reads a list's tenant= parameter from v: without it, every
// tenant's (as an operator's list holds), with it one tenant's, "default"
// naming the default tenant.
func tenantParam(v url.Values) (tenant string, all bool, bad notification.Invalid) {
	t, ok := v["tenant"]
	if !ok {
		return "", true, nil
	}
	switch name := t[0]; {
	case name == "default":
		return "", false, nil
	case tenantName.MatchString(name):
		return name, false, nil
	}
	return "", false, notification.Invalid{{Field: "tenant", Message: "a tenant's name: " + tenantNameForm + ", or default"}}
}

// scopeList narrows a list of tenant (or of every tenant, all) to what
// ctx's request may see: an operator's as asked, any other's to its own
// tenant, which is all it may name.
func scopeList(ctx context.Context, tenant string, all bool) (string, bool, *Problem) {
	who := principalOf(ctx)
	switch {
	case who.operator:
		return tenant, all, nil
	case !all && tenant != who.tenant:
		return "", false, invalidQuery(notification.Invalid{{Field: "tenant", Message: "only an operator's token may choose a tenant"}})
	}
	return who.tenant, false, nil
}
