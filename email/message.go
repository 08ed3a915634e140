package email

import (
	"errors"
	"fmt"
	netmail "net/mail"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"
)

// HeaderNotificationID names the header that carries the notification id as
// it is, for people and filters that look for it without decoding a
// Message-ID.
const HeaderNotificationID = "X-Notification-ID"

// ErrInvalidMessage is wrapped by every error about a Message that cannot be
// sent as it stands. Sending it again would fail the same way.
var ErrInvalidMessage = errors.New("invalid email message")

// Message is the email part of one notification.
type Message struct {
	// ID is the notification id. It names the email in errors and is the
	// source of its Message-ID and X-Notification-ID headers.
	ID string
	// To lists the recipients; at least one is required.
	To []string
	// Subject is the subject line.
	Subject string
	// Text and HTML are the bodies. Either may be empty, not both; with
	// both the email is multipart/alternative and the reader's client picks
	// the one it can show. HTML alone gets a text alternative made from
	// it: its text, with the target of each link.
	Text, HTML string
}

// newMsg builds the go-mail message for m, sent from from at now.
func newMsg(m Message, from *netmail.Address, now time.Time) (*mail.Msg, error) {
	switch {
	case m.ID == "":
		return nil, fmt.Errorf("%w: notification id is empty", ErrInvalidMessage)
	case len(m.To) == 0:
		return nil, fmt.Errorf("%w: no recipients", ErrInvalidMessage)
	case m.Text == "" && m.HTML == "":
		return nil, fmt.Errorf("%w: neither a text nor an html body", ErrInvalidMessage)
	}

	msg := mail.NewMsg(mail.WithNoDefaultUserAgent())
	msg.FromMailAddress(from)
	if err := msg.To(m.To...); err != nil {
		return nil, fmt.Errorf("%w: recipients: %w", ErrInvalidMessage, err)
	}
	// go-mail's own folding would start a long encoded subject on a
	// line of its own (see subjectValue).
	msg.SetGenHeaderPreformatted(mail.HeaderSubject, subjectValue(string(mail.HeaderSubject), m.Subject))
	msg.SetDateWithValue(now.UTC())
	msg.SetGenHeader(mail.HeaderMessageID, MessageID(m.ID, from.Address))
	msg.SetGenHeader(mail.Header(HeaderNotificationID), m.ID)
	text := m.Text
	if text == "" {
		text = plainText(m.HTML)
	}
	switch {
	case text != "" && m.HTML != "":
		msg.SetBodyString(mail.TypeTextPlain, text)
		msg.AddAlternativeString(mail.TypeTextHTML, m.HTML)
	case text != "":
		msg.SetBodyString(mail.TypeTextPlain, text)
	default:
		// HTML without a word of text, such as a lone image.
		msg.SetBodyString(mail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// MessageID returns the Message-ID header value for notification id sent
// from the address from: "<id@domain>", with domain taken from from (or
// "relay" when from has no usable domain). Every copy of one notification
// therefore carries the same Message-ID, and a receiver or an operator can
// tell a re-send from a new email.
//
// Bytes of id that a msg-id does not allow, and dots that would lead,
// trail or double up, are written as "=XX" (their hex value); "=" itself is
// escaped too, so two different ids never share a Message-ID.
func MessageID(id, from string) string {
	domain := "relay"
	if a, err := netmail.ParseAddress(from); err == nil {
		// A parsed address always has an @; its domain is a dot-atom or a
		// domain literal, both valid on a msg-id's right side once ASCII.
		if d := a.Address[strings.LastIndexByte(a.Address, '@')+1:]; d != "" && isASCII(d) {
			domain = d
		}
	}
	return "<" + msgIDLeft(id) + "@" + domain + ">"
}

// msgIDLeft makes id into the dot-atom-text of a msg-id's left side
// (RFC 5322, section 3.6.4).
func msgIDLeft(id string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(id))
	for i := 0; i < len(id); i++ {
		c := id[i]
		keep := isAtext(c) && c != '='
		if c == '.' {
			keep = i > 0 && i < len(id)-1 && id[i-1] != '.'
		}
		if keep {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0x0f])
	}
	return b.String()
}

// isAtext reports whether c is an atext character of RFC 5322.
func isAtext(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
