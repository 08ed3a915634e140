package flaky

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/webhooks"
)

// Config is the environment of the flaky process.
type Config struct {
	// HTTPAddr is where the webhook receiver and the stats API listen.
	HTTPAddr string `env:"FLAKY_HTTP_ADDR" envDefault:":9090" help:"a listen address such as :9090"`
	// SMTPAddr is where the SMTP server listens.
	SMTPAddr string `env:"FLAKY_SMTP_ADDR" envDefault:":2525" help:"a listen address such as :2525"`
	// EmailScenario is how the SMTP server misbehaves, one of
	// ScenarioNames. Healthy by default, so nothing fails unless asked to.
	EmailScenario string `env:"FLAKY_EMAIL_SCENARIO" envDefault:"healthy" help:"one of healthy, flaky, outage, rate-limited, slow, permanent, throttled"`
	// WebhookScenario is how the webhook receiver misbehaves, one of
	// ScenarioNames. Healthy by default.
	WebhookScenario string `env:"FLAKY_WEBHOOK_SCENARIO" envDefault:"healthy" help:"one of healthy, flaky, outage, rate-limited, slow, permanent, throttled"`
	// Rate is the probability, from 0 to 1, that a flaky attempt fails.
	Rate float64 `env:"FLAKY_RATE" envDefault:"0.3" help:"a fraction between 0 and 1, such as 0.3"`
	// Seed makes the flaky scenario reproducible.
	Seed uint64 `env:"FLAKY_SEED" envDefault:"1" help:"a whole number of 0 or more"`
	// Outage is how long the outage scenario fails after start-up.
	Outage time.Duration `env:"FLAKY_OUTAGE" envDefault:"10s" help:"a duration such as 10s"`
	// Latency is how long the slow scenario holds every answer back.
	Latency time.Duration `env:"FLAKY_LATENCY" envDefault:"15s" help:"a duration such as 15s"`
	// RetryAfter is the wait the rate-limited scenario asks for.
	RetryAfter time.Duration `env:"FLAKY_RETRY_AFTER" envDefault:"2s" help:"a positive duration such as 2s"`
	// RateLimitAttempts is how many attempts of each id the rate-limited
	// scenario turns away.
	RateLimitAttempts int `env:"FLAKY_RATE_LIMIT_ATTEMPTS" envDefault:"2" help:"a whole number of 1 or more"`
	// Limit is how many messages a second the throttled scenario accepts.
	Limit int `env:"FLAKY_LIMIT" envDefault:"50" help:"a whole number of 1 or more: the messages a second the throttled scenario accepts, answering the rest 421 (SMTP) or 429"`
	// PermanentMatch marks recipients and webhook paths the permanent
	// scenario refuses for good.
	PermanentMatch string `env:"FLAKY_PERMANENT_MATCH" envDefault:"fail" help:"a substring of an address or path, such as fail"`
	// WebhookSecret makes the receiver answer 401 to webhooks without a
	// valid signature. Empty means signatures are not checked.
	WebhookSecret string `env:"WEBHOOK_SECRET" secret:"true" help:"a Standard Webhooks secret, whsec_<base64> of a random key of 24 bytes or more"`
	// SMSSecret makes the SMS gateway (PathSMS) answer 401 to requests
	// without a valid signature, or whose body is not of type sms. Empty
	// means they are not checked.
	SMSSecret string `env:"SMS_SECRET" secret:"true" help:"the SMS gateway's own Standard Webhooks secret, as the sms worker's SMS_SECRET: requests to /webhooks/sms… are checked with it, not with WEBHOOK_SECRET (empty: not checked)"`
}

// LoadConfig reads and checks the configuration from getenv. An error
// names the variable that was wrong and the form it accepts.
func LoadConfig(getenv func(string) string) (Config, error) {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks values the variables' types alone do not rule out.
func (c Config) Validate() error {
	scenarios := "one of " + strings.Join(ScenarioNames, ", ")
	switch {
	case !slices.Contains(ScenarioNames, c.EmailScenario):
		return config.Invalid("FLAKY_EMAIL_SCENARIO", c.EmailScenario, scenarios)
	case !slices.Contains(ScenarioNames, c.WebhookScenario):
		return config.Invalid("FLAKY_WEBHOOK_SCENARIO", c.WebhookScenario, scenarios)
	case !(c.Rate >= 0 && c.Rate <= 1):
		return config.Invalid("FLAKY_RATE", fmt.Sprint(c.Rate), "a fraction between 0 and 1, such as 0.3")
	case c.Outage < 0:
		return config.Invalid("FLAKY_OUTAGE", c.Outage.String(), "a duration of 0 or more, such as 10s")
	case c.Latency < 0:
		return config.Invalid("FLAKY_LATENCY", c.Latency.String(), "a duration of 0 or more, such as 15s")
	case c.RetryAfter <= 0:
		return config.Invalid("FLAKY_RETRY_AFTER", c.RetryAfter.String(), "a positive duration such as 2s")
	case c.Limit < 1:
		return config.Invalid("FLAKY_LIMIT", fmt.Sprint(c.Limit), "a whole number of 1 or more")
	case c.RateLimitAttempts < 1:
		return config.Invalid("FLAKY_RATE_LIMIT_ATTEMPTS", fmt.Sprint(c.RateLimitAttempts), "a whole number of 1 or more")
	}
	if c.WebhookSecret != "" {
		// The secret the workers sign with: the same check, so a demo
		// cannot run with a key the workers would refuse.
		if err := webhooks.CheckSecret(c.WebhookSecret); err != nil {
			// The secret itself stays out of the message.
			return fmt.Errorf("configuration: WEBHOOK_SECRET is not valid: want a Standard Webhooks secret, whsec_<base64> of a key of %d bytes or more (%w)", webhooks.MinKeyBytes, err)
		}
	}
	if c.SMSSecret != "" {
		if err := webhooks.CheckSecret(c.SMSSecret); err != nil {
			return fmt.Errorf("configuration: SMS_SECRET is not valid: want a Standard Webhooks secret, whsec_<base64> of a key of %d bytes or more (%w)", webhooks.MinKeyBytes, err)
		}
	}
	return nil
}

// scenario builds the Scenario ch plays under c, with the outage window
// opening at start.
func (c Config) scenario(ch Channel, start time.Time) Scenario {
	name := c.WebhookScenario
	if ch == Email {
		name = c.EmailScenario
	}
	return Scenario{
		Name:              name,
		Channel:           ch,
		Seed:              c.Seed,
		Rate:              c.Rate,
		Start:             start,
		Outage:            c.Outage,
		Latency:           c.Latency,
		RetryAfter:        c.RetryAfter,
		RateLimitAttempts: c.RateLimitAttempts,
		PermanentMatch:    c.PermanentMatch,
		Limit:             c.Limit,
		Window:            &Window{},
	}
}
