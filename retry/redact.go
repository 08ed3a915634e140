package retry

import (
	"errors"
	"net/url"
	"strings"
)

// mask stands in for whatever a redaction hides.
const mask = "***"

// RedactURL returns rawURL fit for a log line or an error message. A URL
// that parses keeps everything but its password, which becomes ***
// (amqp://guest:***@localhost:5672/). A URL that does not parse shows its
// scheme only (amqp://***): where its password starts and ends is exactly
// what cannot be told. A value without a scheme:// prefix could be
// anything, a bare password included, and is masked entirely (***). The
// empty string stays empty.
func RedactURL(rawURL string) string {
	if rawURL == "" {
		return ""
	}
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || !validScheme(scheme) {
		return mask
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return scheme + "://" + mask
	}
	if _, has := u.User.Password(); !has {
		return u.String()
	}
	// Redacted writes the password as xxxxx; the user name is escaped,
	// so the first ":xxxxx@" is the password's.
	return strings.Replace(u.Redacted(), ":xxxxx@", ":"+mask+"@", 1)
}

// validScheme reports whether s is a URL scheme (RFC 3986, section 3.1):
// a letter, then letters, digits, "+", "-" and ".".
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// RedactError returns err with rawURL, and any password in it, cut out
// of its text, for errors that may quote the URL they were given, as
// amqp091-go's do. errors.Is and errors.As still see the errors inside,
// so callers can classify the error as before, but errors.Unwrap does
// not hand them out, text and all.
//
// An error from net/url is replaced whole: it quotes the URL, and its
// reason quotes the piece that failed to parse, which may be a piece of
// the password.
func RedactError(err error, rawURL string) error {
	if err == nil || rawURL == "" {
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New("the URL does not parse (percent-encode reserved characters such as % @ : / in the user name and password)")
	}
	msg := strings.ReplaceAll(err.Error(), rawURL, RedactURL(rawURL))
	for _, s := range secrets(rawURL) {
		msg = strings.ReplaceAll(msg, s, mask)
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// secrets returns the parts of rawURL that must not appear in a message:
// the password, raw and unescaped, or, when the URL does not parse,
// everything after its scheme, or all of it without one.
func secrets(rawURL string) []string {
	var out []string
	scheme, rest, ok := strings.Cut(rawURL, "://")
	switch {
	case !ok || !validScheme(scheme):
		out = append(out, rawURL)
		rest = rawURL
	default:
		if u, err := url.Parse(rawURL); err != nil {
			out = append(out, rest)
		} else if p, has := u.User.Password(); has && p != "" {
			out = append(out, p)
		}
	}
	// The password as written: between the first ":" and the last "@" of
	// the user information, which follows the last "/" before that "@".
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo := rest[:at]
		userinfo = userinfo[strings.LastIndex(userinfo, "/")+1:]
		if _, p, ok := strings.Cut(userinfo, ":"); ok && p != "" {
			out = append(out, p)
		}
	}
	return out
}

// redactedError is an error whose text had secrets cut out.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

// Is and As let errors.Is and errors.As see the original error without
// an Unwrap method that would hand it, text and all, to anyone.
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *redactedError) As(target any) bool   { return errors.As(e.err, target) }
