package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/webhooks"
)

// Limits on a webhook part.
const (
	MaxURL     = 2048
	MaxPayload = 256 << 10
)

// WebhookPart is the webhook part: Payload is posted to URL, signed with
// WEBHOOK_SECRET, or to the registered endpoint Endpoint names, signed with
// that endpoint's own secret. A part has one or the other.
type WebhookPart struct {
	URL      string          `json:"url,omitempty"`
	Endpoint string          `json:"endpoint,omitempty"`
	Payload  json.RawMessage `json:"payload"`
}

// WebhookConfig is the webhook channel's environment.
type WebhookConfig struct {
	Secret  string        `env:"WEBHOOK_SECRET,required" secret:"true" help:"a Standard Webhooks secret such as whsec_ followed by base64"`
	Timeout time.Duration `env:"WEBHOOK_TIMEOUT" envDefault:"10s" help:"a duration such as 10s"`
	AllowConfig
	EndpointConfig
	OperatorConfig
}

// Webhook delivers signed HTTP requests (Standard Webhooks).
var Webhook = Define(Spec[WebhookPart]{
	Name:    "webhook",
	Summary: "deliver the webhook queue over signed HTTP",
	Check:   checkWebhook,
	Recipients: func(p *WebhookPart) []string {
		if p.Endpoint != "" {
			return []string{p.Endpoint}
		}
		return []string{p.URL}
	},
	Schema: `{
	  "type": "object",
	  "required": ["payload"],
	  "oneOf": [{"required": ["url"]}, {"required": ["endpoint"]}],
	  "additionalProperties": false,
	  "description": "The webhook part: payload is posted as is to url, signed with the service's WEBHOOK_SECRET, or to the endpoint endpoint names, signed with its own secret. One of url and endpoint.",
	  "properties": {
	    "url": {"type": "string", "format": "uri", "maxLength": 2048, "description": "An absolute http or https URL without credentials."},
	    "endpoint": {"type": "string", "pattern": "^ep_[a-z2-7]{26}$", "description": "The id of an endpoint (POST /v1/endpoints), which must exist and be enabled.", "examples": ["ep_3kq7ymzd5vbxw2n4c6f7h2j4la"]},
	    "payload": {"description": "Any JSON value of at most 262144 bytes."}
	  }
	}`,
	Env: []any{&WebhookConfig{}},
	Open: func(getenv func(string) string, store Store) (Send[WebhookPart], func() error, error) {
		var cfg WebhookConfig
		if err := config.Parse(getenv, &cfg); err != nil {
			return nil, nil, err
		}
		allow, err := allowList(getenv, cfg.AllowConfig)
		if err != nil {
			return nil, nil, err
		}
		sig, err := signer(cfg.Secret)
		if err != nil {
			return nil, nil, err
		}
		if err := cfg.EndpointConfig.check(); err != nil {
			return nil, nil, err
		}
		if err := cfg.OperatorConfig.Check(getenv); err != nil {
			return nil, nil, err
		}
		opSig, err := cfg.OperatorConfig.signer()
		if err != nil {
			return nil, nil, err
		}
		s := webhooks.NewSender(webhooks.Config{Timeout: cfg.Timeout, Allow: allow}, sig)
		// The store is used from the first delivery to an endpoint: a
		// worker that only sees bare URLs never touches it.
		endpoints := func(ctx context.Context) (endpointStore, error) { return store(ctx) }
		w := newWebhookSender(s, cfg.EndpointConfig, endpoints, EndpointCacheTTL, time.Now)
		w.operatorURL, w.operator = cfg.OperatorConfig.URL, opSig
		return w.deliver, nothing, nil
	},
	Demo: func(d Downstreams) map[string]string {
		// Loopback, where the flaky receiver listens, and nothing else
		// inside the network: the demo's setting, never a production one.
		return map[string]string{"WEBHOOK_ALLOW_CIDRS": DemoAllowCIDRs}
	},
})

// DemoAllowCIDRs is the demo's WEBHOOK_ALLOW_CIDRS: loopback, where the
// flaky downstreams listen, and nothing else inside the network.
const DemoAllowCIDRs = "127.0.0.0/8,::1/128"

// nothing is the close function of senders that hold nothing open.
func nothing() error { return nil }

func checkWebhook(w *WebhookPart, bad func(field, format string, args ...any)) {
	switch {
	case w.URL != "" && w.Endpoint != "":
		bad("endpoint", "give url or endpoint, not both")
	case w.Endpoint != "":
		if !IsEndpointID(w.Endpoint) {
			bad("endpoint", "%q is not an endpoint id such as ep_3kq7ymzd5vbxw2n4c6f7h2j4la", w.Endpoint)
		}
	default:
		checkURL("url", w.URL, bad)
	}
	switch {
	case len(bytes.TrimSpace(w.Payload)) == 0:
		bad("payload", "a JSON payload is required")
	case len(w.Payload) > MaxPayload:
		bad("payload", "at most %d bytes", MaxPayload)
	case !json.Valid(w.Payload):
		bad("payload", "is not valid JSON")
	}
}

// WebhookEndpoint returns the endpoint id n's webhook part names, or ""
// for none: no webhook part, a bare URL, or a part that does not decode.
func WebhookEndpoint(n *notification.Notification) string {
	var p WebhookPart
	if raw, ok := n.Parts[Webhook.Name()]; !ok || decodeStrict(raw, &p) != nil {
		return ""
	}
	return p.Endpoint
}

// AllowList returns the networks WEBHOOK_ALLOW_CIDRS, parsed into cfg,
// lets webhooks reach besides the public internet: what the API checks an
// endpoint's URL against when it is registered, as the webhook worker's
// address guard does when it dials. Its errors name the variable.
func AllowList(getenv func(string) string, cfg AllowConfig) ([]netip.Prefix, error) {
	return allowList(getenv, cfg)
}

// CheckEndpointURL says what is wrong with the URL of an endpoint, or
// returns "": it must be an absolute http or https URL without
// credentials, and its host must not read as an IPv4 address in a
// non-standard form. Where the host leads is the address guard's to judge
// (see webhooks.Guard).
func CheckEndpointURL(raw string) string {
	var problems []string
	checkURL("url", raw, func(_, format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) })
	return strings.Join(problems, "; ")
}

// checkURL checks a URL relay will post to.
func checkURL(field, raw string, bad func(field, format string, args ...any)) {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		bad(field, "a URL is required")
	case len(raw) > MaxURL:
		bad(field, "at most %d bytes", MaxURL)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		bad(field, "%q is not an absolute http or https URL", raw)
	case u.User != nil:
		bad(field, "credentials in the URL are not allowed")
	case !validPort(u.Port()):
		bad(field, "port %q: a port is a number from 1 to 65535", u.Port())
	default:
		if problem := checkHost(u.Host); problem != "" {
			bad(field, "%s", problem)
		}
	}
}

// validPort reports whether the port of a URL (u.Port()) is absent or a
// number a connection can be made to: 0 and anything past 65535 can only
// fail, and would be retried until parked.
func validPort(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// checkHost says what is wrong with the host of a webhook URL (u.Host,
// port and brackets included), or returns "" for an ordinary host name,
// a canonical IPv4 address or a bracketed IPv6 literal; the sender's
// dial-time guard judges where those lead.
//
// It refuses numbers that browsers (the WHATWG URL standard) and
// inet_aton read as an IPv4 address but that are not a canonical dotted
// quad, as netip.ParseAddr defines it: 2130706433, 0x7f000001,
// 017700000001, 127.1, 0x7f.1, 0177.0.0.1, 1.2.3.04, 127.0.0.1. (with a
// trailing dot), and the fullwidth forms browsers fold to those. Such a
// host means different addresses to different parsers, and is how
// address filters are usually slipped past; nobody registers a real
// endpoint that way. A host name is numeric in that sense when its last
// label is, as in the URL standard: all digits, or 0x and hex digits.
func checkHost(hostport string) string {
	host := (&url.URL{Host: hostport}).Hostname()
	if strings.HasPrefix(hostport, "[") {
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() {
			return fmt.Sprintf("host %q: brackets may hold only an IPv6 address", hostport)
		}
		return ""
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		return ""
	}
	// Browsers apply Unicode's width folding before parsing, so
	// "１２７．０．０．１" is 127.0.0.1 to them.
	folded := strings.Map(func(r rune) rune {
		switch {
		case r == '\u3002' || r == '\uff0e' || r == '\uff61': // ideographic and fullwidth full stops
			return '.'
		case r >= '\uff01' && r <= '\uff5e': // fullwidth ASCII
			return r - 0xfee0
		}
		return r
	}, host)
	labels := strings.Split(folded, ".")
	if len(labels) > 1 && labels[len(labels)-1] == "" {
		labels = labels[:len(labels)-1]
	}
	if !isIPv4Number(labels[len(labels)-1]) {
		return ""
	}
	return fmt.Sprintf("host %q reads as an IPv4 address in a non-standard form: write the address as four decimal numbers such as 192.0.2.1, or use a host name", host)
}

// isIPv4Number reports whether a host label is a number as the URL
// standard's IPv4 parser reads one: decimal (octal with a leading 0), or
// hexadecimal after 0x, where "0x" alone is 0.
func isIPv4Number(label string) bool {
	digits, base := label, "0123456789"
	if len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
		digits, base = label[2:], "0123456789abcdefABCDEF"
	} else if label == "" {
		return false
	}
	for _, c := range digits {
		if !strings.ContainsRune(base, c) {
			return false
		}
	}
	return true
}
