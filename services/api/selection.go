package api

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// selection is which parked messages a dead-letter request names: the
// query of GET /v1/dead-letters and the body of a replay, a purge or a
// job say it with the same names, and a job keeps it as its JSON. Every
// field set narrows the selection.
type selection struct {
	Source string `json:"source,omitempty"`
	ID     string `json:"id,omitempty"`
	// Recipient narrows the selection to the copies for one recipient
	// (x-recipient): alone, that recipient's parked copies of every
	// notification.
	Recipient string `json:"recipient,omitempty"`
	// Channel selects the copies of one channel, parked from any of its
	// lanes.
	Channel string `json:"channel,omitempty"`
	// Reason selects one park reason (x-dead-reason).
	Reason string `json:"reason,omitempty"`
	// Endpoint selects the webhook copies for one endpoint id.
	Endpoint string `json:"endpoint,omitempty"`
	// Since and Until (RFC 3339) select by when a copy was parked: at or
	// after since, before until.
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`
	// Error selects the copies whose last error holds this text, in any
	// case.
	Error string `json:"error,omitempty"`
	// Tenant selects one tenant's copies (x-tenant), "default" the
	// default tenant's: an operator's choice. A tenant's token acts on
	// its own tenant's copies only, whether it names it or not (see
	// scopeOf).
	Tenant string `json:"tenant,omitempty"`
	All    bool   `json:"all,omitempty"`
}

// selectionFields are the names of selection's fields, in the order the
// errors name them.
var selectionFields = []string{"source", "id", "recipient", "channel", "reason", "endpoint", "since", "until", "error", "tenant"}

// selectionFromQuery reads a selection from query parameters (all is
// not one of them).
func selectionFromQuery(get func(string) string) selection {
	return selection{Source: get("source"), ID: get("id"), Recipient: get("recipient"), Channel: get("channel"), Reason: get("reason"),
		Endpoint: get("endpoint"), Since: get("since"), Until: get("until"), Error: get("error"), Tenant: get("tenant")}
}

// tenantScope is whose parked copies a dead-letter request or job acts
// on: one tenant's ("" the default tenant's), or, for an operator who
// chose none, every tenant's.
type tenantScope struct {
	tenant string
	all    bool
}

// scopeOf is the scope of s for the request of ctx: a tenant's token gets
// its own tenant's copies whatever s says, and is refused another
// tenant's name (as GET /v1/notifications refuses it); an operator gets
// the tenant s names, or every tenant.
func scopeOf(ctx context.Context, s selection) (tenantScope, notification.Invalid) {
	named := s.Tenant
	switch {
	case s.Tenant == "", s.Tenant == "default":
		named = ""
	case !tenantName.MatchString(s.Tenant):
		return tenantScope{}, notification.Invalid{{Field: "tenant", Message: "a tenant's name: " + tenantNameForm + ", or default"}}
	}
	who := principalOf(ctx)
	switch {
	case !who.operator && s.Tenant != "" && named != who.tenant:
		return tenantScope{}, notification.Invalid{{Field: "tenant", Message: "only an operator's token may choose a tenant"}}
	case !who.operator:
		return tenantScope{tenant: who.tenant}, nil
	case s.Tenant == "":
		return tenantScope{all: true}, nil
	}
	return tenantScope{tenant: named}, nil
}

// narrow returns f narrowed to sc's tenant: the copies whose x-tenant is
// that tenant, or that carry none for the default tenant. It is what
// keeps a tenant's replay or purge of "all" to its own copies.
func (sc tenantScope) narrow(f retry.Filter) retry.Filter {
	if sc.all {
		return f
	}
	h := maps.Clone(f.Headers)
	if h == nil {
		h = map[string]string{}
	}
	h[notification.HeaderTenant] = sc.tenant
	f.Headers = h
	return f
}

// String names sc in logs: a tenant, "default" or "all".
func (sc tenantScope) String() string {
	switch {
	case sc.all:
		return "all"
	case sc.tenant == "":
		return "default"
	}
	return sc.tenant
}

// seenBy reports whether the request of ctx may see what sc acts on: an
// operator sees every scope, a tenant's token only its own tenant's.
func (sc tenantScope) seenBy(ctx context.Context) bool {
	if sc.all {
		return principalOf(ctx).operator
	}
	return sees(ctx, sc.tenant)
}

// narrowed reports whether any field but all is set.
func (s selection) narrowed() bool {
	all := s
	all.All = false
	return all != selection{}
}

// maxErrorText bounds the error text a selection searches for: relay
// keeps at most 512 bytes of an error in a header.
const maxErrorText = 512

// filter turns s into the filter it names, under topology t, or names
// each field that is wrong. It does not check that s selects something
// (see checkSelected): a listing may select everything.
func (s selection) filter(t retry.Topology) (retry.Filter, notification.Invalid) {
	var bad notification.Invalid
	f := retry.Filter{ID: s.ID, Source: sourceQueue(t, s.Source), Copy: s.Recipient, Route: s.Channel, Reason: s.Reason, Error: s.Error}
	if s.Channel != "" && !slices.ContainsFunc(t.Routes, func(r retry.Route) bool { return r.Key == s.Channel }) {
		bad = append(bad, notification.FieldError{Field: "channel", Message: "no channel " + quote(s.Channel) + ": one of " + orList(routeKeys(t))})
	}
	if s.Reason != "" && !slices.Contains(retry.Reasons, s.Reason) {
		bad = append(bad, notification.FieldError{Field: "reason", Message: "no park reason " + quote(s.Reason) + ": one of " + orList(retry.Reasons)})
	}
	if s.Endpoint != "" {
		if !channel.IsEndpointID(s.Endpoint) {
			bad = append(bad, notification.FieldError{Field: "endpoint", Message: quote(s.Endpoint) + " is not an endpoint id such as ep_3kq7ymzd5vbxw2n4c6f7h2j4la"})
		}
		f.Where = endpointIs(s.Endpoint)
	}
	at := func(field, v string) time.Time {
		if v == "" {
			return time.Time{}
		}
		ts, err := time.Parse(time.RFC3339, v)
		if err != nil {
			bad = append(bad, notification.FieldError{Field: field, Message: "an RFC 3339 time such as 2026-03-14T09:26:53Z, not " + quote(v)})
		}
		return ts
	}
	f.Since, f.Until = at("since", s.Since), at("until", s.Until)
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		bad = append(bad, notification.FieldError{Field: "until", Message: "must be after since"})
	}
	if len(s.Error) > maxErrorText {
		bad = append(bad, notification.FieldError{Field: "error", Message: "at most 512 bytes: relay keeps no longer error"})
	}
	return f, bad
}

// checkSelected names what is wrong with the selection of a replay, a
// purge or a job: nothing selected, or all together with a narrower
// choice.
func (s selection) checkSelected() notification.Invalid {
	switch {
	case s.All && s.narrowed():
		return notification.Invalid{{Field: "all", Message: "all selects every parked message: leave out " + orList(selectionFields) + ", or leave out all"}}
	case !s.All && !s.narrowed():
		return notification.Invalid{{Field: "source", Message: "name a source queue, an id, a recipient, a channel, a reason, an endpoint, a time range or an error, or set all to true"}}
	}
	return nil
}

// endpointIs selects the webhook copies whose body names endpoint id:
// relay's copy carries whom it goes to in its part, not in a header.
func endpointIs(id string) func(retry.DeadLetter) bool {
	return func(p retry.DeadLetter) bool {
		if !retry.BodyIsJSON(p.ContentType, p.ContentEncoding, p.Body) {
			return false
		}
		var n struct {
			Webhook struct {
				Endpoint string `json:"endpoint"`
			} `json:"webhook"`
		}
		return json.Unmarshal(p.Body, &n) == nil && n.Webhook.Endpoint == id
	}
}

// routeKeys are the channels of t's routes.
func routeKeys(t retry.Topology) []string {
	keys := make([]string, len(t.Routes))
	for i, r := range t.Routes {
		keys[i] = r.Key
	}
	return keys
}

// quote is s in double quotes, shortened for an error message.
func quote(s string) string {
	if r := []rune(s); len(r) > 80 {
		s = string(r[:79]) + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}
