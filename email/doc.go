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
package email
