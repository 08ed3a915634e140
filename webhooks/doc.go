// Package webhooks delivers relay's webhook notifications over HTTP.
//
// Every delivery is signed as the Standard Webhooks specification describes
// (https://www.standardwebhooks.com/): a webhook-id, a webhook-timestamp,
// and a webhook-signature holding an HMAC-SHA256 of id, timestamp and body
// under a shared "whsec_" secret. Signer also verifies, for receivers and
// tests written in Go.
//
// Webhook URLs come from outside, so a Sender refuses, at dial time and on
// the resolved IP, to connect to any address that is not globally
// reachable: every block of the IANA IPv4 and IPv6 special-purpose
// registries that is not (loopback, private, link-local, shared CGNAT,
// documentation, benchmarking, local-use NAT64, 6to4 and the rest; see
// guard.go), multicast, and IPv6 outside global unicast, in IPv4, IPv6,
// IPv4-mapped and NAT64 form. A Guard with an allow-list lets chosen
// networks through as well. The Sender uses no proxy and follows no
// redirects, which would let a receiver steer it past that check.
//
// Send's error is ready for a retry pipeline without this package knowing
// one: nil for a 2xx answer; plain, or with a RetryAfter() time.Duration
// method when the receiver sent Retry-After, for 408, 429, 5xx, timeouts and
// connection failures; with a Permanent() bool method that returns true for
// any other status, a redirect, a forbidden address or a malformed request.
// relay's retry package recognises both methods (see IsPermanent and
// RetryAfter here).
package webhooks
