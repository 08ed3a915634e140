package webhooks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// internalAddress stands in an error's text for an address inside the
// sender's own network.
const internalAddress = "(internal address)"

// RedactAddresses returns err with the addresses of the sender's own
// network cut out of its text: the DNS server that answered a lookup
// ("lookup hooks.example on 10.0.0.2:53"), the local end of a connection,
// and every address that is not globally reachable, such as the private
// address a receiver's name resolved to. Such an error reaches whoever
// sent the webhook (a history, a dashboard, an API answer), who learns
// from it nothing of the network the sender runs in. Globally reachable
// addresses stay: they are the receiver's own.
//
// errors.Is and errors.As still see the errors inside, so callers
// classify the error as before, but errors.Unwrap does not hand them out,
// text and all. An error with nothing to cut is returned as it is.
func RedactAddresses(err error) error {
	if err == nil {
		return nil
	}
	msg := redactText(err)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// redactText is err's text with the addresses RedactAddresses hides
// replaced, each error of the chain that carries one rewritten in place.
func redactText(err error) string {
	msg := err.Error()
	walk(err, func(e error) {
		var clean string
		switch x := e.(type) {
		case *net.DNSError:
			c := *x
			c.Server = ""
			clean = c.Error()
		case *net.OpError:
			c := *x
			c.Source = nil // the sender's own end
			if x.Addr != nil && !globalAddr(x.Addr) {
				c.Addr = hiddenAddr{network: x.Addr.Network()}
			}
			if x.Err != nil {
				c.Err = errors.New(redactText(x.Err))
			}
			clean = c.Error()
		case *forbiddenError:
			clean = fmt.Sprintf("%v (%s)", ErrForbiddenAddress, x.reason)
		default:
			return
		}
		msg = strings.ReplaceAll(msg, e.Error(), clean)
	})
	return msg
}

// walk calls visit on err and on every error it wraps, outermost first.
func walk(err error, visit func(error)) {
	if err == nil {
		return
	}
	visit(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, visit)
		}
	}
}

// globalAddr reports whether a is an address the zero Guard lets through:
// one on the public internet. An address that does not parse is taken
// for an internal one.
func globalAddr(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		ip, err := netip.ParseAddr(a.String())
		return err == nil && AllowedAddr(ip)
	}
	return AllowedAddr(ap.Addr())
}

// hiddenAddr is a net.Addr that says only that an address was there.
type hiddenAddr struct{ network string }

func (a hiddenAddr) Network() string { return a.network }
func (a hiddenAddr) String() string  { return internalAddress }

// redactedError is an error whose text had addresses cut out.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

// Is and As let errors.Is and errors.As see the original error without
// an Unwrap method that would hand it, text and all, to anyone.
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *redactedError) As(target any) bool   { return errors.As(e.err, target) }
