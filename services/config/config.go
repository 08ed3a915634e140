// Package config parses a service's environment into its Config struct with
// caarlos0/env, from the getenv function the service was given, so tests can
// run a service with an environment of their own.
//
// Fields carry an `env` tag (the variable), optionally `envDefault`, a
// `help` tag with the accepted form (quoted in error messages) and
// `secret:"true"` (masked in the start-up log).
package config

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"

	"github.com/caarlos0/env/v11"
)

// Parse fills cfg (a pointer to a struct with `env` tags) from getenv. An
// error names the variable that was wrong, what it held and what it
// accepts.
func Parse(getenv func(string) string, cfg any) error {
	params, err := env.GetFieldParams(cfg)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	vars := make(map[string]string, len(params))
	for _, p := range params {
		if v := getenv(p.Key); v != "" {
			vars[p.Key] = v
		}
	}
	err = env.ParseWithOptions(cfg, env.Options{Environment: vars})
	if err == nil {
		return nil
	}
	info := fieldInfo(reflect.TypeOf(cfg).Elem())
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("configuration: %w", err)
	}
	msgs := make([]string, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			f := info[pe.Name]
			msg := fmt.Sprintf("%s=%q is not valid", f.key, vars[f.key])
			if f.help != "" {
				msg += ": want " + f.help
			}
			msgs = append(msgs, msg)
			continue
		}
		msgs = append(msgs, e.Error())
	}
	return errors.New("configuration: " + strings.Join(msgs, "; "))
}

// Invalid builds the error for a value that parsed but is not acceptable.
func Invalid(key, value, want string) error {
	return fmt.Errorf("configuration: %s=%q is not valid: want %s", key, value, want)
}

type field struct{ key, help string }

// fieldInfo maps struct field names, embedded structs included, to their
// variable and accepted form.
func fieldInfo(t reflect.Type) map[string]field {
	out := map[string]field{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
			for k, v := range fieldInfo(f.Type) {
				out[k] = v
			}
			continue
		}
		out[f.Name] = field{key: strings.Split(f.Tag.Get("env"), ",")[0], help: f.Tag.Get("help")}
	}
	return out
}

// Masked returns the configuration as key, value pairs for a start-up log.
// Fields tagged `secret:"true"` show as "***" when set; URLs lose their
// password.
func Masked(cfg any) []any {
	v := reflect.Indirect(reflect.ValueOf(cfg))
	t := v.Type()
	var out []any
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key := strings.Split(f.Tag.Get("env"), ",")[0]
		if key == "" {
			if f.Type.Kind() == reflect.Struct {
				out = append(out, Masked(v.Field(i).Interface())...)
			}
			continue
		}
		val := fmt.Sprint(v.Field(i).Interface())
		switch {
		case f.Tag.Get("secret") == "true" && !v.Field(i).IsZero():
			val = "***"
		case strings.Contains(val, "://"):
			if u, err := url.Parse(val); err == nil && u.User != nil {
				if _, has := u.User.Password(); has {
					u.User = url.UserPassword(u.User.Username(), "***")
					val = u.Redacted()
				}
			}
		}
		out = append(out, key, val)
	}
	return out
}
