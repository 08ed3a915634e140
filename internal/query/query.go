// Package query reads a request's query string strictly. net/url's
// URL.Query drops a pair it cannot parse (one holding a ';', or a bad
// %-escape) and the error with it, so "?source=email-queue;" reads as no
// source at all and a filter silently widens; here such a pair is an
// error the route answers with a 422.
package query

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// MaxSearch is the longest search text (q=) the list routes take, in
// characters: a longer one is a 422 rather than a pattern the database
// may find too complex.
const MaxSearch = 256

// Field is the name a bad query string is reported under, when no single
// parameter is to blame.
const Field = "query"

// Values parses r's query string. It returns every pair it could parse,
// and an error naming the first it could not.
func Values(r *http.Request) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err == nil {
		return v, nil
	}
	msg := err.Error()
	var escape url.EscapeError
	switch {
	case errors.As(err, &escape):
		msg = "a bad %-escape (" + strings.TrimPrefix(err.Error(), "invalid URL escape ") + "): escape '%' as %25"
	case strings.Contains(err.Error(), "semicolon"):
		msg = "a ';' between or inside parameters: separate parameters with '&' and escape ';' as %3B"
	}
	return v, errors.New(msg)
}
