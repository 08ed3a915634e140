// Package notification is the message relay carries: one JSON schema,
// versioned, produced by the ingest API and consumed by the workers.
//
// A notification may have an email part, a webhook part, or both. The API
// publishes one copy per channel to notification-exchange, with the
// channel as routing key and only that channel's part in the body, so each
// channel retries on its own: a failed email never re-sends the webhook.
package notification

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Version is the schema version this code reads and writes.
const Version = 1

// ContentType is the content type of every notification message.
const ContentType = "application/json"

// Limits on what a notification may hold.
const (
	MaxRecipients  = 50
	MaxSubject     = 998 // RFC 5322's line limit
	MaxBody        = 256 << 10
	MaxPayload     = 256 << 10
	MaxURL         = 2048
	MaxIDLength    = 128
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
	ChannelSMS     = "sms"
	MaxSMSText     = 1600 // ten concatenated segments
)

// Notification is one notification, or one channel's copy of it.
type Notification struct {
	V         int       `json:"v"`
	ID        string    `json:"id"`
	Channel   string    `json:"channel,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Email     *Email    `json:"email,omitempty"`
	Webhook   *Webhook  `json:"webhook,omitempty"`
	SMS       *SMS      `json:"sms,omitempty"`
}

// SMS is the text-message part: To in E.164 form, such as +15551234567.
type SMS struct {
	To   string `json:"to"`
	Text string `json:"text"`
}

// e164 is an international phone number: a plus, then up to 15 digits.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

// Email is the email part.
type Email struct {
	To      []string `json:"to"`
	Subject string   `json:"subject"`
	Text    string   `json:"text,omitempty"`
	HTML    string   `json:"html,omitempty"`
}

// Webhook is the webhook part: the payload is posted to URL as is.
type Webhook struct {
	URL     string          `json:"url"`
	Payload json.RawMessage `json:"payload"`
}

// Channels lists the channels the notification has a part for.
func (n *Notification) Channels() []string {
	var out []string
	if n.Email != nil {
		out = append(out, ChannelEmail)
	}
	if n.Webhook != nil {
		out = append(out, ChannelWebhook)
	}
	if n.SMS != nil {
		out = append(out, ChannelSMS)
	}
	return out
}

// For returns the copy of n that goes to one channel: the same id and
// time, only that channel's part.
func (n *Notification) For(channel string) *Notification {
	c := &Notification{V: Version, ID: n.ID, Channel: channel, CreatedAt: n.CreatedAt}
	switch channel {
	case ChannelEmail:
		c.Email = n.Email
	case ChannelWebhook:
		c.Webhook = n.Webhook
	case ChannelSMS:
		c.SMS = n.SMS
	}
	return c
}

// FieldError is one invalid field, named by its JSON path.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// Invalid lists every invalid field of a notification.
type Invalid []FieldError

func (e Invalid) Error() string {
	parts := make([]string, len(e))
	for i, f := range e {
		parts[i] = f.Error()
	}
	return "invalid notification: " + strings.Join(parts, "; ")
}

// Validate checks the parts the notification has; it needs at least one.
// The id and version are checked by Decode, since the API assigns them.
func (n *Notification) Validate() error {
	var errs Invalid
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if n.Email == nil && n.Webhook == nil && n.SMS == nil {
		add("email", "a notification needs at least one part: email, webhook or sms")
	}
	if s := n.SMS; s != nil {
		if !e164.MatchString(s.To) {
			add("sms.to", "%q is not an E.164 number such as +15551234567", s.To)
		}
		if s.Text == "" || len(s.Text) > MaxSMSText {
			add("sms.text", "a text of 1 to %d bytes is required", MaxSMSText)
		}
	}
	if e := n.Email; e != nil {
		switch {
		case len(e.To) == 0:
			add("email.to", "at least one recipient is required")
		case len(e.To) > MaxRecipients:
			add("email.to", "at most %d recipients, got %d", MaxRecipients, len(e.To))
		}
		for i, to := range e.To {
			if a, err := mail.ParseAddress(to); err != nil || a.Name != "" {
				add(fmt.Sprintf("email.to[%d]", i), "%q is not a plain email address such as ada@example.com", to)
			}
		}
		if strings.TrimSpace(e.Subject) == "" {
			add("email.subject", "a subject is required")
		} else if len(e.Subject) > MaxSubject || strings.ContainsAny(e.Subject, "\r\n") {
			add("email.subject", "must be one line of at most %d bytes", MaxSubject)
		}
		if e.Text == "" && e.HTML == "" {
			add("email.text", "a text or an html body is required")
		}
		if len(e.Text) > MaxBody || len(e.HTML) > MaxBody {
			add("email.text", "each body may hold at most %d bytes", MaxBody)
		}
	}
	if w := n.Webhook; w != nil {
		u, err := url.Parse(w.URL)
		switch {
		case w.URL == "":
			add("webhook.url", "a URL is required")
		case len(w.URL) > MaxURL:
			add("webhook.url", "at most %d bytes", MaxURL)
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			add("webhook.url", "%q is not an absolute http or https URL", w.URL)
		case u.User != nil:
			add("webhook.url", "credentials in the URL are not allowed")
		default:
			if problem := checkHost(u.Host); problem != "" {
				add("webhook.url", "%s", problem)
			}
		}
		switch {
		case len(bytes.TrimSpace(w.Payload)) == 0:
			add("webhook.payload", "a JSON payload is required")
		case len(w.Payload) > MaxPayload:
			add("webhook.payload", "at most %d bytes", MaxPayload)
		case !json.Valid(w.Payload):
			add("webhook.payload", "is not valid JSON")
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
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

// ErrVersion means a message of a schema version this code cannot read.
var ErrVersion = errors.New("unsupported notification version")

// Decode reads one channel's copy from a message body and validates it.
func Decode(body []byte) (*Notification, error) {
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, fmt.Errorf("decode notification: %w", err)
	}
	if n.V != Version {
		return nil, fmt.Errorf("%w: v=%d, want %d", ErrVersion, n.V, Version)
	}
	if n.ID == "" || len(n.ID) > MaxIDLength {
		return nil, Invalid{{Field: "id", Message: fmt.Sprintf("an id of 1 to %d bytes is required", MaxIDLength)}}
	}
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return &n, nil
}
