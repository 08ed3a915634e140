package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/webhooks"
)

// MaxSMSText bounds a text message: ten concatenated segments.
const MaxSMSText = 1600

// SMSPart is the text-message part: To in E.164 form, such as
// +15551234567.
type SMSPart struct {
	To   string `json:"to"`
	Text string `json:"text"`
}

// SMSConfig is the sms channel's environment: one HTTP gateway, or an
// ordered list of them (SMS_PROVIDERS), that takes {"type": "sms", "to",
// "text"} as JSON, signed like a webhook with a key of its own.
type SMSConfig struct {
	URL       string        `env:"SMS_URL" help:"the gateway's http or https URL; required unless SMS_PROVIDERS names numbered gateways"`
	Secret    string        `env:"SMS_SECRET" secret:"true" help:"the gateway's own Standard Webhooks secret, whsec_ followed by base64, never the same as WEBHOOK_SECRET; required unless every numbered gateway has its SMS_<n>_SECRET"`
	Timeout   time.Duration `env:"SMS_TIMEOUT" envDefault:"10s" help:"a duration such as 10s"`
	Rate      float64       `env:"SMS_RATE" envDefault:"0" help:"messages a second the gateway takes, counted across every worker replica (shared through the history store, DATA_DIR or HISTORY_DSN); 0 for no limit"`
	Burst     int           `env:"SMS_BURST" envDefault:"1" help:"how many messages may go at once within SMS_RATE, 1 or more"`
	Providers int           `env:"SMS_PROVIDERS" envDefault:"0" help:"how many numbered gateways to fail over along, in order: SMS_1_URL … SMS_<n>_URL, each with its own _SECRET (default SMS_SECRET), _TIMEOUT (default SMS_TIMEOUT), _NAME (default sms<n>), _RATE, _BURST (default SMS_BURST) and _PERMANENT_MAY_BE_WRONG; 0 for the one gateway of SMS_URL"`
	Failures  int           `env:"SMS_BREAKER_FAILURES" envDefault:"5" help:"transient failures in a row that open a gateway's circuit, sending the messages to the next gateway; 0 for no circuit breaker (the default with one gateway, SMS_PROVIDERS=0)"`
	Cooldown  time.Duration `env:"SMS_BREAKER_COOLDOWN" envDefault:"5s" help:"how long an open circuit waits before its first probe, doubling while probes fail (up to 5m)"`
	AllowConfig
}

// smsNumbered are the variables of each numbered gateway, after its
// SMS_<n>_ prefix.
var smsNumbered = []string{"URL", "SECRET", "TIMEOUT", "NAME", "RATE", "BURST", "PERMANENT_MAY_BE_WRONG"}

// SMSProviderVariables lists the numbered variables SMS_PROVIDERS brings
// in, SMS_1_URL to SMS_16_PERMANENT_MAY_BE_WRONG.
func SMSProviderVariables() []string {
	var out []string
	for n := 1; n <= maxProviders; n++ {
		for _, v := range smsNumbered {
			out = append(out, fmt.Sprintf("SMS_%d_%s", n, v))
		}
	}
	return out
}

// GatewayRequestType is the "type" of every body relay posts to an SMS
// gateway. It is signed with the rest, so a gateway that accepts only
// this type takes no request signed for another purpose.
const GatewayRequestType = "sms"

// gatewayRequest is the body posted to a gateway.
type gatewayRequest struct {
	Type string `json:"type"`
	SMSPart
}

// smsGateway is one gateway of the sms channel.
type smsGateway struct {
	name       string
	url        string
	sig        *webhooks.Signer
	timeout    time.Duration
	rate       *store.Rate
	mayBeWrong bool
}

// smsGateways reads the gateways: the one of SMS_URL, or SMS_1_* …
// SMS_<n>_* when SMS_PROVIDERS is n.
func smsGateways(getenv func(string) string, cfg SMSConfig) ([]smsGateway, error) {
	var sig *webhooks.Signer
	if cfg.Secret != "" {
		var err error
		if sig, err = gatewaySigner(getenv, "SMS_SECRET", cfg.Secret); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.Providers < 0 || cfg.Providers > maxProviders:
		return nil, config.Invalid("SMS_PROVIDERS", fmt.Sprint(cfg.Providers), fmt.Sprintf("a number of numbered gateways from 1 to %d, or 0 for the one of SMS_URL", maxProviders))
	case getenv(fmt.Sprintf("SMS_%d_URL", cfg.Providers+1)) != "":
		key := fmt.Sprintf("SMS_%d_URL", cfg.Providers+1)
		return nil, fmt.Errorf("configuration: %s is set but SMS_PROVIDERS=%d: set SMS_PROVIDERS to the number of gateways, or unset %s", key, cfg.Providers, key)
	}
	if cfg.Providers == 0 {
		if cfg.URL == "" {
			return nil, errors.New("configuration: SMS_URL is required: the gateway's http or https URL (or SMS_PROVIDERS with SMS_1_URL …)")
		}
		if err := checkGatewayURL("SMS_URL", cfg.URL); err != nil {
			return nil, err
		}
		if sig == nil {
			return nil, errNoSMSSecret("SMS_SECRET")
		}
		rate, err := parseRate("SMS_", cfg.Rate, cfg.Burst)
		if err != nil {
			return nil, err
		}
		return []smsGateway{{name: "sms", url: cfg.URL, sig: sig, timeout: cfg.Timeout, rate: rate}}, nil
	}
	var out []smsGateway
	names := map[string]string{}
	for n := 1; n <= cfg.Providers; n++ {
		prefix := fmt.Sprintf("SMS_%d_", n)
		v := func(key string) string { return getenv(prefix + key) }
		g := smsGateway{name: v("NAME"), url: v("URL"), sig: sig, timeout: cfg.Timeout}
		if g.url == "" {
			return nil, fmt.Errorf("configuration: %sURL is required: SMS_PROVIDERS=%d names gateways 1 to %d", prefix, cfg.Providers, cfg.Providers)
		}
		if err := checkGatewayURL(prefix+"URL", g.url); err != nil {
			return nil, err
		}
		if g.name == "" {
			g.name = fmt.Sprintf("sms%d", n)
		}
		if err := checkProviderName(prefix+"NAME", g.name); err != nil {
			return nil, err
		}
		if other, dup := names[g.name]; dup {
			return nil, config.Invalid(prefix+"NAME", g.name, "a name no other gateway has ("+other+"NAME has it)")
		}
		names[g.name] = prefix
		if secret := v("SECRET"); secret != "" {
			var err error
			if g.sig, err = gatewaySigner(getenv, prefix+"SECRET", secret); err != nil {
				return nil, err
			}
		}
		if g.sig == nil {
			return nil, errNoSMSSecret(prefix + "SECRET (or SMS_SECRET, for every gateway)")
		}
		common := providerSettings{timeout: g.timeout}
		if err := common.read(v, prefix, cfg.Burst); err != nil {
			return nil, err
		}
		g.timeout, g.mayBeWrong, g.rate = common.timeout, common.mayBeWrong, common.rate
		out = append(out, g)
	}
	return out, nil
}

// gatewaySigner is the signer of the gateway secret key names. The key
// must not be WEBHOOK_SECRET's: every receiver of a bare webhook URL holds
// that one, and could sign requests the gateway takes for relay's.
func gatewaySigner(getenv func(string) string, key, secret string) (*webhooks.Signer, error) {
	if err := webhooks.CheckSecret(secret); err != nil {
		return nil, config.Invalid(key, "***", fmt.Sprintf("a Standard Webhooks secret: whsec_ followed by the base64 of a random key of %d bytes or more (%v)", webhooks.MinKeyBytes, err))
	}
	if webhooks.SameKey(secret, getenv("WEBHOOK_SECRET")) {
		return nil, fmt.Errorf("configuration: %s is the same key as WEBHOOK_SECRET: every receiver of a bare webhook URL holds WEBHOOK_SECRET and could sign SMS gateway requests with it; give the gateway a key of its own (echo \"whsec_$(head -c 32 /dev/urandom | base64)\")", key)
	}
	s, err := webhooks.NewSigner(secret)
	if err != nil {
		return nil, config.Invalid(key, "***", "a Standard Webhooks secret")
	}
	return s, nil
}

// errNoSMSSecret is the error of a gateway without a secret.
func errNoSMSSecret(key string) error {
	return fmt.Errorf("configuration: %s is required: the SMS gateway's own Standard Webhooks secret, whsec_ followed by the base64 of a random key of %d bytes or more, not WEBHOOK_SECRET", key, webhooks.MinKeyBytes)
}

// checkGatewayURL checks that a gateway's URL is an absolute http or
// https URL.
func checkGatewayURL(key, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return config.Invalid(key, raw, "an http or https URL such as https://sms.example.com/send")
	}
	return nil
}

// e164 is an international phone number: a plus, then up to 15 digits.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

// SMS posts to an HTTP SMS gateway with the webhook sender, so it shares
// its signing, address guard and error classification. The key is the
// gateway's own (SMS_SECRET), and the signed body says what the request is
// for: {"type": "sms", "to", "text"}.
var SMS = Define(Spec[SMSPart]{
	Name:    "sms",
	Summary: "deliver the sms queue to an HTTP SMS gateway",
	Check: func(s *SMSPart, bad func(field, format string, args ...any)) {
		if !e164.MatchString(s.To) {
			bad("to", "%q is not an E.164 number such as +15551234567", s.To)
		}
		if s.Text == "" || len(s.Text) > MaxSMSText {
			bad("text", "a text of 1 to %d bytes is required", MaxSMSText)
		}
	},
	Recipients: func(p *SMSPart) []string { return []string{p.To} },
	Schema: `{
	  "type": "object",
	  "required": ["to", "text"],
	  "additionalProperties": false,
	  "properties": {
	    "to": {"type": "string", "pattern": "^\\+[1-9][0-9]{1,14}$", "description": "E.164 number, e.g. +15551234567.", "examples": ["+15551234567"]},
	    "text": {"type": "string", "minLength": 1, "maxLength": 1600}
	  }
	}`,
	Env:  []any{&SMSConfig{}},
	Open: openSMS,
	Demo: func(d Downstreams) map[string]string {
		return map[string]string{"SMS_URL": d.HTTP + "/webhooks/sms"}
	},
})

// openSMS posts through the gateways with the webhook sender, one per
// gateway for its timeout, failing over along them as the email channel
// does along its mail servers.
func openSMS(getenv func(string) string, st Store) (Send[SMSPart], func() error, error) {
	var cfg SMSConfig
	if err := config.Parse(getenv, &cfg); err != nil {
		return nil, nil, err
	}
	switch {
	case cfg.Failures < 0:
		return nil, nil, config.Invalid("SMS_BREAKER_FAILURES", fmt.Sprint(cfg.Failures), "transient failures in a row that open a gateway's circuit, 1 or more; 0 for no circuit breaker")
	case cfg.Cooldown <= 0:
		return nil, nil, config.Invalid("SMS_BREAKER_COOLDOWN", cfg.Cooldown.String(), "a positive duration such as 5s")
	}
	allow, err := allowList(getenv, cfg.AllowConfig)
	if err != nil {
		return nil, nil, err
	}
	gateways, err := smsGateways(getenv, cfg)
	if err != nil {
		return nil, nil, err
	}
	var (
		providers []Provider[SMSPart]
		limited   bool
	)
	for _, g := range gateways {
		s := webhooks.NewSender(webhooks.Config{Timeout: g.timeout, Allow: allow}, g.sig)
		send := func(ctx context.Context, id string, p *SMSPart) error {
			body, err := json.Marshal(gatewayRequest{Type: GatewayRequestType, SMSPart: *p})
			if err != nil {
				return err
			}
			_, err = s.Send(ctx, webhooks.Request{URL: g.url, ID: id, Payload: body})
			return err
		}
		limited = limited || g.rate != nil
		providers = append(providers, Provider[SMSPart]{Name: g.name, Send: send, Rate: g.rate, MayBeWrong: g.mayBeWrong})
	}
	rates := rateStore(st, limited || storeSet(getenv))
	failures := cfg.Failures
	if cfg.Providers == 0 && getenv("SMS_BREAKER_FAILURES") == "" {
		failures = 0 // one gateway, as before: every failure spends a retry
	}
	// The gateways take as many messages at once as the worker handles.
	f := newFailover("sms", providers, failures, cfg.Cooldown, 1<<16, rates,
		func(id string, p *SMSPart) string { return id + "/" + p.To }, time.Now)
	stop := f.declare()
	return f.send, func() error {
		stop()
		providerSets.remove(f.stats)
		return nil
	}, nil
}
