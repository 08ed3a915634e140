// Package email delivers the email part of a notification over SMTP.
//
// A Sender holds one SMTP connection open between sends, so a busy worker
// does not pay for a TCP and TLS handshake per message; sends through one
// Sender run one at a time. Every error Send returns is already sorted for
// a retry pipeline: a failure no retry can fix (a 5xx reply, a message that
// cannot be built) has a method Permanent() bool that returns true (see
// IsPermanent; relay's retry package recognises it without this package
// importing it), anything else (a 4xx reply, a dropped connection, a
// timeout) is returned as it is.
//
// Each email carries a Message-ID and an X-Notification-ID header derived
// from the notification id, so a copy sent again by a retry can be matched
// to the first one.
//
// The From header is Config.From as written, display name included:
// "Relay <relay@example.com>" shows as Relay, and relay@example.com alone
// is the envelope sender (MAIL FROM). The Date header is the time Send
// built the email, that is the time of this attempt, in UTC (+0000): a
// copy sent again by a retry has a later Date and the same Message-ID.
//
// The Subject is folded so that its first line holds text: printable ASCII
// at its spaces, anything else as RFC 2047 encoded-words sized to fit
// beside "Subject: " (go-mail's own folding would leave that first line
// empty). An email with an HTML body only also gets a text/plain
// alternative made from the HTML: its text, with each link's target after
// the link's words.
package email
