package apiclient

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Flags are the flags of every command that calls the API: --api and
// --token.
type Flags struct {
	// API is the API's base URL.
	API string
	// Token is the bearer token.
	Token string
}

// Register adds --api and --token to fs, with defaults: api (DefaultBase
// when empty) and token. The commands take them from RELAY_API and
// API_TOKENS (see Token) in their environment, which the usage text names.
func (f *Flags) Register(fs *flag.FlagSet, api, token string) {
	if api == "" {
		api = DefaultBase
	}
	fs.StringVar(&f.API, "api", api, "API base `url` (env RELAY_API)")
	fs.StringVar(&f.Token, "token", token, "bearer `token` (env API_TOKENS, its first entry)")
}

// Client returns a client of the API the flags name.
func (f *Flags) Client() *Client { return New(f.API, f.Token, nil) }

// Explain rewrites the errors a user fixes with a flag so that they name
// it: an API that does not answer (--api) and a refused token (--token).
// It returns any other error as it is.
func (f *Flags) Explain(err error) error {
	switch {
	case errors.Is(err, ErrUnreachable):
		return fmt.Errorf("%w; is `relay api` (or `relay all`) running there? --api (or RELAY_API) sets where to look", err)
	case errors.Is(err, ErrUnauthorized) && f.Token == "":
		return fmt.Errorf("%w; the API wants a bearer token: pass one of its API_TOKENS with --token (or API_TOKENS)", err)
	case errors.Is(err, ErrUnauthorized):
		return fmt.Errorf("%w; pass a token the API at %s accepts with --token (or API_TOKENS)", err, f.API)
	}
	return err
}

// Token is the bearer token a command takes from its environment: the
// first entry of API_TOKENS, the variable the API reads its tokens from,
// so one setting serves both. The retired API_TOKEN is still read when
// API_TOKENS is unset, with a warning on warn.
func Token(getenv func(string) string, warn io.Writer) string {
	for _, t := range strings.Split(getenv("API_TOKENS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			return t
		}
	}
	if t := getenv("API_TOKEN"); t != "" {
		fmt.Fprintln(warn, "relay: API_TOKEN is read for now but retired: set API_TOKENS, the variable the API reads")
		return t
	}
	return ""
}
