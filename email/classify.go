package email

import (
	"errors"
	"net/textproto"

	mail "github.com/wneessen/go-mail"
)

// permanent marks a send that another attempt would fail the same way. Its
// Permanent method is how a retry library tells (relay's retry package
// recognises it); errors.As finds it through any wrapping.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent reports true: no retry can help.
func (p permanent) Permanent() bool { return true }

// IsPermanent reports whether err, or an error it wraps, says no retry can
// help.
func IsPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// Classify sorts a failed send for a retry pipeline. It marks err as
// permanent (see IsPermanent) when another attempt would fail the same way: a 5xx reply
// from the server, or a message that cannot be sent as it stands. Everything
// else is returned as it is, to be retried: a 4xx reply, a connection that
// could not be opened or was lost, a timeout, a cancelled context, and any
// failure it does not recognise. Classify(nil) is nil, and an error that is
// already permanent stays so.
func Classify(err error) error {
	switch {
	case err == nil, IsPermanent(err):
		return err
	case errors.Is(err, ErrInvalidMessage):
		return permanent{err}
	case errors.Is(err, ErrConnect):
		// Opening the session says nothing about this email. A 535 for bad
		// credentials or a greeting that turns us away fails every email
		// alike until the server or the config is fixed, after which a retry
		// goes through; parking the email would lose it for nothing.
		return err
	}

	switch code := replyCode(err); {
	case code >= 500 && code <= 599:
		return permanent{err}
	case code >= 400 && code <= 499:
		return err
	}

	var se *mail.SendError
	if errors.As(err, &se) {
		switch se.Reason {
		case mail.ErrGetSender, mail.ErrGetRcpts, mail.ErrNoUnencoded:
			// go-mail turned the message down before it reached the server.
			return permanent{err}
		}
	}
	return err
}

// replyCode returns the SMTP reply code carried by err, or 0 when the server
// never answered with one (a lost connection, a timeout).
func replyCode(err error) int {
	// A go-mail SendError does not unwrap to the reply behind it, so its
	// ErrorCode is the only reliable way to the code. When several RCPTs
	// fail it holds the last one's code, so a message with both a 4xx and a
	// 5xx recipient is sorted by whichever came last.
	var se *mail.SendError
	if errors.As(err, &se) {
		return se.ErrorCode()
	}
	// Errors from go-mail's smtp package outside a send (RSET, QUIT) are the
	// server's reply itself.
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}
