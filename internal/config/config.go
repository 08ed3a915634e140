// Package config parses a service's environment into its Config struct with
// caarlos0/env, from the getenv function the service was given, so tests can
// run a service with an environment of their own.
//
// Fields carry an `env` tag (the variable), optionally `envDefault`, a
// `help` tag with the accepted form and what it means (quoted in error
// messages after "want", and listed by `relay <service> --help` and the
// tables of docs/configuration.md, which cmd/relay generates) and
// `secret:"true"` (masked in the start-up log). A struct whose zero
// settings stand for derived values implements Deriver, so the start-up
// log shows those values.
package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/caarlos0/env/v11"

	"github.com/relay-demo/relay/retry"
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
		readDynamic(reflect.ValueOf(cfg), getenv)
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
			msg := fmt.Sprintf("%s=%q is not valid", f.key, mask(f.key, vars[f.key], f.secret))
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

// Dynamic is implemented by a configuration that also reads variables
// whose names its own settings choose: Broker reads RETRY_<TYPE>_DELAYS
// and the like for each type NOTIFICATION_TYPES lists, as SMTP_PROVIDERS
// brings in SMTP_<n>_HOST. Parse calls ReadDynamic, embedded structs
// included, once the tagged fields are set; it only keeps what it reads,
// and the configuration's own checks judge it.
type Dynamic interface {
	ReadDynamic(getenv func(string) string)
}

// readDynamic calls ReadDynamic on v, or on the first struct embedded in
// it that implements Dynamic.
func readDynamic(v reflect.Value, getenv func(string) string) {
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || !v.CanAddr() {
		return
	}
	if d, ok := v.Addr().Interface().(Dynamic); ok {
		d.ReadDynamic(getenv)
		return
	}
	for i := 0; i < v.NumField(); i++ {
		if f := v.Type().Field(i); f.Anonymous && f.IsExported() && f.Type.Kind() == reflect.Struct {
			readDynamic(v.Field(i), getenv)
		}
	}
}

// Invalid builds the error for a value that parsed but is not acceptable.
func Invalid(key, value, want string) error {
	return fmt.Errorf("configuration: %s=%q is not valid: want %s", key, value, want)
}

type field struct {
	key, help string
	secret    bool
}

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
		out[f.Name] = field{key: strings.Split(f.Tag.Get("env"), ",")[0], help: f.Tag.Get("help"), secret: f.Tag.Get("secret") == "true"}
	}
	return out
}

// Deriver is implemented by a configuration some of whose settings, left
// at zero, stand for a value derived from the others: RETRY_MAX=0 for the
// length of the retry schedule, an empty MANAGEMENT_URL for one derived
// from AMQP_URL. Masked shows the derived values in their place, so the
// start-up log says what the service runs with.
type Deriver interface {
	// Derived returns, keyed by variable, the value each such setting
	// left at zero stands for. It does no I/O: it runs before the
	// service contacts anything. A value it cannot derive (from settings
	// that are not valid) is left out.
	Derived() map[string]string
}

// Masked returns the configuration as key, value pairs for a start-up log.
// Fields tagged `secret:"true"` show as "***" when set; URLs, and every
// variable named *_URL whatever it holds, are masked by retry.RedactURL:
// a URL loses its password, and a value that does not parse as one shows
// no more than its scheme. A setting left at a zero that stands for a
// derived value shows that value (see Deriver), masked the same way.
func Masked(cfg any) []any {
	return masked(reflect.Indirect(reflect.ValueOf(cfg)), map[string]string{})
}

// masked walks v, an embedded struct's fields included, with the derived
// values of the structs around it.
func masked(v reflect.Value, derived map[string]string) []any {
	if d, ok := v.Interface().(Deriver); ok {
		for k, val := range d.Derived() {
			// The outer struct's word stands: it may shadow an embedded
			// struct's Derived with its own.
			if _, set := derived[k]; !set {
				derived[k] = val
			}
		}
	}
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
				out = append(out, masked(v.Field(i), derived)...)
			}
			continue
		}
		val := fmt.Sprint(v.Field(i).Interface())
		if d, ok := derived[key]; ok && v.Field(i).IsZero() {
			val = d
		}
		out = append(out, key, mask(key, val, f.Tag.Get("secret") == "true"))
	}
	return out
}

// mask renders the value of variable key for a log line or an error.
func mask(key, val string, secret bool) string {
	switch {
	case val == "":
		return ""
	case secret:
		return "***"
	case val == "off":
		// A keyword some *_URL variables take (MANAGEMENT_URL), not a URL
		// that could hold a password.
		return val
	case strings.HasSuffix(key, "_URL") || strings.Contains(val, "://"):
		// A malformed URL is masked too: it is the one a password is
		// most likely to leak from, half-parsed.
		return retry.RedactURL(val)
	}
	return val
}
