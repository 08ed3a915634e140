package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// Broker is the configuration every process that touches the pipeline
// shares: where the broker is, how the topology is named and shaped, and
// the retry policy.
type Broker struct {
	AMQPURL string `env:"AMQP_URL" envDefault:"amqp://guest:guest@localhost:5672/" help:"the broker, an amqp:// or amqps:// URL"`
	// AMQPURLs lists the nodes of a RabbitMQ cluster, one URL each. When
	// set, it replaces AMQPURL: see URLs.
	AMQPURLs     URLList `env:"AMQP_URLS" help:"a comma-separated list of amqp:// or amqps:// URLs, one per node of a cluster (a comma in a password is %2C); replaces AMQP_URL when set. Each connection starts at a node picked at random and moves to the next when it loses its node"`
	Prefix       string  `env:"TOPOLOGY_PREFIX" help:"a name prefix such as test-42. for every exchange and queue, so runs can share a broker"`
	QueueType    string  `env:"QUEUE_TYPE" envDefault:"classic" help:"classic or quorum (quorum dead-letters at least once)"`
	DelayBackend string  `env:"DELAY_BACKEND" envDefault:"auto" help:"auto, plugin, ttl, levels or native: how a retry waits (see docs/retries.md)"`
	Handoff      string  `env:"RETRY_HANDOFF" envDefault:"stages" help:"stages (a failure goes through the error and requeue stages of relay retrier) or direct (each worker counts a failure and publishes it to its wait itself, one confirmed publish per retry; the retrier still runs, for the nacks a worker falls back to)"`
	MetricsAddr  string  `env:"METRICS_ADDR" help:"a host:port such as :9100 where workers and the retrier serve Prometheus /metrics (empty: none; the API serves its own)"`
	// ManagementURL reaches the broker's management HTTP API, which lets
	// relay move aside a message too large for an AMQP frame.
	ManagementURL string `env:"MANAGEMENT_URL" help:"the broker's management HTTP API, used to move aside a message too large for an AMQP frame and, by the retry stages, to watch for dead letters a quorum queue holds and does not forward: an http:// or https:// URL with credentials such as http://guest:guest@localhost:15672; empty: derived from the first broker URL when it names the default port 5672 (same host and credentials, port 15672), none for a broker on another port, whose API is not on 15672; off: none, and such a message stalls its queue until removed by hand"`

	// Lanes spreads each channel's work queue over that many queues.
	Lanes int `env:"WORK_LANES" envDefault:"1" help:"a whole number from 1 to 64 (0 counts as 1): how many queues each channel's work is spread over, by receiver (a webhook's endpoint or its URL's host, an email's or an SMS's recipient), each consumed on its own with CONCURRENCY handlers, so that one receiver's backlog waits in its lane and not in front of the others' (see docs/guarantees.md, fair delivery); every process of a deployment must have the same value"`

	RetryDelays     string        `env:"RETRY_DELAYS" help:"a comma-separated list of durations such as 500ms,5s,1m,5m, the wait before each retry (empty: 500ms,5s,1m,5m unless RETRY_INITIAL is set)"`
	RetryMax        int           `env:"RETRY_MAX" help:"a whole number of retries before a message is parked, 0 for the schedule's length (5 for exponential); past the schedule the last delay repeats"`
	RetryInitial    time.Duration `env:"RETRY_INITIAL" help:"a duration such as 1s, the first delay of an exponential backoff (leave RETRY_DELAYS empty)"`
	RetryMultiplier float64       `env:"RETRY_MULTIPLIER" help:"a number of 1 or more such as 2, the exponential growth factor (0: 2)"`
	RetryCap        time.Duration `env:"RETRY_CAP" help:"a duration such as 10m, the longest exponential delay (0: none)"`
	RetryJitter     float64       `env:"RETRY_JITTER" help:"a fraction between 0 and 1, such as 0.2, by which each delay is spread either way (plugin and levels backends)"`
	RetryDeferrals  int           `env:"RETRY_DEFERRALS" envDefault:"10" help:"a whole number: how often a message may wait as a downstream asked (Retry-After, a 429) without spending a retry; 0 for never"`
	RetryDeadline   time.Duration `env:"RETRY_DEADLINE" envDefault:"24h" help:"a duration such as 24h: past this age, counted from the first publish, a failure parks the message whatever its count; 0 for none"`

	// Types lists the notification types; each type's own settings are
	// read by ReadDynamic into TypeSettings.
	Types string `env:"NOTIFICATION_TYPES" help:"a comma-separated list of notification types such as otp,receipt (lowercase letters, digits and _, up to 32), each with a retry schedule of its own that a notification names in its \"type\": RETRY_<TYPE>_DELAYS and RETRY_<TYPE>_MAX (the type's name in capitals, such as RETRY_OTP_DELAYS; unset: RETRY_DELAYS's and RETRY_MAX's) and RETRY_<TYPE>_EXPIRY (a duration such as 10m: a copy not delivered that long after it was accepted is parked as expired rather than sent late; unset or 0: none). Empty: one schedule for every notification. The delay backend must follow a schedule per message: not native"`
	// TypeSettings holds the variables of the types Types lists, by name
	// (RETRY_OTP_DELAYS), as ReadDynamic read them; nil when none is set.
	TypeSettings map[string]string
}

// typeSettings are the variables of each notification type, after its
// RETRY_<TYPE>_ prefix.
var typeSettings = []string{"DELAYS", "MAX", "EXPIRY"}

// typeName is what a notification type may be called: a token safe in a
// variable's name, a header and a metric label.
var typeName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// ReadDynamic reads the settings of each type NOTIFICATION_TYPES lists
// (RETRY_<TYPE>_DELAYS, _MAX, _EXPIRY). It implements Dynamic.
func (b *Broker) ReadDynamic(getenv func(string) string) {
	b.TypeSettings = nil
	if strings.TrimSpace(b.Types) == "" {
		return
	}
	for _, name := range strings.Split(b.Types, ",") {
		for _, s := range typeSettings {
			key := typeVar(strings.TrimSpace(name), s)
			if v := getenv(key); v != "" {
				if b.TypeSettings == nil {
					b.TypeSettings = map[string]string{}
				}
				b.TypeSettings[key] = v
			}
		}
	}
}

// TypeVariables lists the variables of each type types (a value of
// NOTIFICATION_TYPES) names, RETRY_OTP_DELAYS and the rest, for tools that
// check an environment against what relay reads. A name that is not a
// safe token brings in none: the start refuses it anyway.
func TypeVariables(types string) []string {
	var out []string
	for _, name := range strings.Split(types, ",") {
		if name = strings.TrimSpace(name); typeName.MatchString(name) {
			for _, s := range typeSettings {
				out = append(out, typeVar(name, s))
			}
		}
	}
	return out
}

// typeVar names the setting s of type name: RETRY_OTP_DELAYS.
func typeVar(name, s string) string { return "RETRY_" + strings.ToUpper(name) + "_" + s }

// TypeNames are the notification types NOTIFICATION_TYPES lists, in its
// order, or an error naming the setting: a name that is not a safe token,
// or one listed twice.
func (b Broker) TypeNames() ([]string, error) {
	if strings.TrimSpace(b.Types) == "" {
		return nil, nil
	}
	const want = "a comma-separated list of type names such as otp,receipt, each of lowercase letters, digits and _, starting with a letter, up to 32 long"
	var out []string
	for i, raw := range strings.Split(b.Types, ",") {
		name := strings.TrimSpace(raw)
		if !typeName.MatchString(name) {
			return nil, Invalid("NOTIFICATION_TYPES", b.Types, fmt.Sprintf("%s (entry %d, %q, is not)", want, i+1, name))
		}
		if slices.Contains(out, name) {
			return nil, Invalid("NOTIFICATION_TYPES", b.Types, fmt.Sprintf("%s, each once (%q is listed twice)", want, name))
		}
		out = append(out, name)
	}
	return out, nil
}

// TypePolicies builds the retry policy of each notification type from
// def, the default policy, and the type's own settings, naming the
// variable at fault. A setting a type leaves unset is def's.
func (b Broker) TypePolicies(def retry.Policy) (map[string]retry.Policy, error) {
	names, err := b.TypeNames()
	if err != nil || len(names) == 0 {
		return nil, err
	}
	out := make(map[string]retry.Policy, len(names))
	for _, name := range names {
		p := def
		if key := typeVar(name, "DELAYS"); b.TypeSettings[key] != "" {
			d, err := retry.ParseDelays(b.TypeSettings[key])
			if err != nil {
				return nil, Invalid(key, b.TypeSettings[key], "a comma-separated list of positive durations such as 500ms,5s,1m ("+err.Error()+")")
			}
			p.Delays, p.Initial = d, 0
			if longest := slices.Max(d); longest > retry.MaxDelay {
				return nil, Invalid(key, b.TypeSettings[key], fmt.Sprintf("waits of at most 49 days (%s is longer than any delay backend waits)", longest))
			}
		}
		if key := typeVar(name, "MAX"); b.TypeSettings[key] != "" {
			n, err := strconv.Atoi(b.TypeSettings[key])
			if err != nil || n < 0 {
				return nil, Invalid(key, b.TypeSettings[key], "a whole number of retries, 0 for the schedule's length")
			}
			p.MaxRetries = n
		}
		if key := typeVar(name, "EXPIRY"); b.TypeSettings[key] != "" {
			d, err := time.ParseDuration(b.TypeSettings[key])
			if err != nil || d < 0 {
				return nil, Invalid(key, b.TypeSettings[key], "a duration such as 10m, 0 for none")
			}
			p.Expiry = d
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("configuration: type %s: %w", name, err)
		}
		out[name] = p
	}
	return out, nil
}

// Derived returns what RETRY_MAX=0, an empty RETRY_DELAYS and an empty
// MANAGEMENT_URL stand for: the schedule's length, the default schedule
// and the management API derived from the first broker URL. It implements
// Deriver, so the start-up log shows them; it contacts nothing.
func (b Broker) Derived() map[string]string {
	out := map[string]string{}
	if p, err := b.Policy(); err == nil {
		if b.RetryMax == 0 {
			out["RETRY_MAX"] = strconv.Itoa(p.Retries())
		}
		if b.RetryDelays == "" && b.RetryInitial == 0 {
			delays := make([]string, len(retry.DefaultDelays))
			for i, d := range retry.DefaultDelays {
				delays[i] = shortDuration(d)
			}
			out["RETRY_DELAYS"] = strings.Join(delays, ",")
		}
	}
	if strings.TrimSpace(b.ManagementURL) == "" && len(b.URLs()) > 0 {
		m, err := retry.ManagementFor(b.URLs()[0])
		switch {
		case err == nil:
			out["MANAGEMENT_URL"] = m.URL
		case errors.Is(err, retry.ErrManagementUnknown):
			out["MANAGEMENT_URL"] = "off" // ManagementMissing says why
		}
	}
	return out
}

// shortDuration writes d as the docs do: 1m rather than 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// URLList is a comma-separated list of broker URLs, such as AMQP_URLS.
// Its String form, which the start-up log shows, masks every password
// with retry.RedactURL. A comma inside a user name or password is written
// %2C.
type URLList []string

// UnmarshalText splits a comma-separated list. It accepts anything: the
// entries are checked by Broker.Topology, whose error can name the one at
// fault without quoting the others' passwords.
func (l *URLList) UnmarshalText(text []byte) error {
	*l = nil
	for _, s := range strings.Split(string(text), ",") {
		*l = append(*l, strings.TrimSpace(s))
	}
	return nil
}

// String returns the list with every password masked.
func (l URLList) String() string {
	out := make([]string, len(l))
	for i, u := range l {
		out[i] = retry.RedactURL(u)
	}
	return strings.Join(out, ",")
}

// URLs returns the addresses of the broker's nodes: AMQP_URLS when it is
// set, else AMQP_URL alone. Hand them to retry.SuperviseAny, which spreads
// processes across the nodes and moves on to the next when one is lost,
// or to retry.DialAny.
func (b Broker) URLs() []string {
	if len(b.AMQPURLs) > 0 {
		return b.AMQPURLs
	}
	return []string{b.AMQPURL}
}

// checkURLs checks AMQP_URL, or every entry of AMQP_URLS when it is set,
// so that a malformed broker URL is blamed on its variable at start
// rather than on the dial, or on the MANAGEMENT_URL derived from it.
func (b Broker) checkURLs() error {
	if len(b.AMQPURLs) == 0 {
		if why := badURL(b.AMQPURL); why != "" {
			return Invalid("AMQP_URL", retry.RedactURL(b.AMQPURL), "an amqp:// or amqps:// URL such as amqp://guest:guest@localhost:5672/ (it "+why+")")
		}
		return nil
	}
	const want = "a comma-separated list of amqp:// or amqps:// URLs, one per node, such as amqp://guest:guest@rabbit-1:5672/,amqp://guest:guest@rabbit-2:5672/"
	for i, raw := range b.AMQPURLs {
		entry := fmt.Sprintf("entry %d of %d", i+1, len(b.AMQPURLs))
		if raw == "" {
			return Invalid("AMQP_URLS", b.AMQPURLs.String(), want+" ("+entry+" is empty)")
		}
		if why := badURL(raw); why != "" {
			return Invalid("AMQP_URLS", b.AMQPURLs.String(), want+" ("+entry+" "+why+")")
		}
	}
	return nil
}

// badURL says what is wrong with raw as a broker URL, or "".
func badURL(raw string) string {
	for _, scheme := range []string{"amqp", "amqps"} {
		if strings.HasPrefix(raw, scheme+"//") || strings.HasPrefix(raw, scheme+":/") && !strings.HasPrefix(raw, scheme+"://") {
			return "lacks the \"://\" after " + scheme
		}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "does not parse: percent-encode reserved characters such as % @ : / , in the user name and password"
	case u.Scheme != "amqp" && u.Scheme != "amqps":
		return "has the scheme " + strconv.Quote(u.Scheme)
	case u.Hostname() == "":
		return "names no host"
	}
	return ""
}

// Policy builds the retry policy, naming the variable at fault.
func (b Broker) Policy() (retry.Policy, error) {
	p := retry.Policy{MaxRetries: b.RetryMax, Initial: b.RetryInitial, Multiplier: b.RetryMultiplier, Cap: b.RetryCap, Jitter: b.RetryJitter,
		Deferrals: b.RetryDeferrals, Deadline: b.RetryDeadline}
	if b.RetryDelays != "" {
		d, err := retry.ParseDelays(b.RetryDelays)
		if err != nil {
			return p, Invalid("RETRY_DELAYS", b.RetryDelays, "a comma-separated list of positive durations such as 500ms,5s,1m,5m ("+err.Error()+")")
		}
		p.Delays = d
	}
	switch {
	case b.RetryMax < 0:
		return p, Invalid("RETRY_MAX", fmt.Sprint(b.RetryMax), "0 or more")
	case b.RetryInitial < 0:
		return p, Invalid("RETRY_INITIAL", b.RetryInitial.String(), "a positive duration")
	case b.RetryCap < 0:
		return p, Invalid("RETRY_CAP", b.RetryCap.String(), "a positive duration")
	case b.RetryMultiplier != 0 && b.RetryMultiplier < 1:
		return p, Invalid("RETRY_MULTIPLIER", fmt.Sprint(b.RetryMultiplier), "a number of 1 or more")
	case b.RetryJitter < 0 || b.RetryJitter > 1:
		return p, Invalid("RETRY_JITTER", fmt.Sprint(b.RetryJitter), "a fraction between 0 and 1")
	case b.RetryDeferrals < 0:
		return p, Invalid("RETRY_DEFERRALS", fmt.Sprint(b.RetryDeferrals), "0 (never) or more")
	case b.RetryDeadline < 0:
		return p, Invalid("RETRY_DEADLINE", b.RetryDeadline.String(), "0 (none) or a positive duration")
	}
	// In the environment 0 means none; in a Policy, the default.
	if p.Deferrals == 0 {
		p.Deferrals = -1
	}
	if p.Deadline == 0 {
		p.Deadline = -1
	}
	return p, p.Validate()
}

// schedule names the variables that set the schedule.
func (b Broker) schedule() string {
	if b.RetryDelays == "" && b.RetryInitial > 0 {
		return "RETRY_INITIAL / RETRY_MULTIPLIER / RETRY_CAP"
	}
	return "RETRY_DELAYS"
}

// Topology checks the broker's addresses and the pipeline's settings and
// builds the topology with routes. DELAY_BACKEND=auto stays Auto: it is
// resolved against the broker when the pipeline runs (retry.Resolve). No
// broker is contacted.
func (b Broker) Topology(routes []retry.Route) (retry.Topology, error) {
	if err := b.checkURLs(); err != nil {
		return retry.Topology{}, err
	}
	p, err := b.Policy()
	if err != nil {
		return retry.Topology{}, err
	}
	types, err := b.TypePolicies(p)
	if err != nil {
		return retry.Topology{}, err
	}
	if b.Lanes < 0 || b.Lanes > retry.MaxLanes { // 0: unset, one lane
		return retry.Topology{}, Invalid("WORK_LANES", fmt.Sprint(b.Lanes), fmt.Sprintf("a whole number from 1 to %d", retry.MaxLanes))
	}
	if b.Lanes > 1 {
		routes = slices.Clone(routes)
		for i := range routes {
			routes[i].Lanes = b.Lanes
		}
	}
	t := retry.Topology{Prefix: b.Prefix, Routes: routes, QueueType: retry.QueueType(b.QueueType), Backend: retry.Backend(b.DelayBackend), Policy: p,
		CopyHeader: notification.HeaderRecipient, TenantHeader: notification.HeaderTenant}
	if len(types) > 0 {
		t.Types, t.TypeHeader = types, notification.HeaderType
	}
	switch t.QueueType {
	case retry.Classic, retry.Quorum:
	default:
		return t, Invalid("QUEUE_TYPE", b.QueueType, "classic or quorum")
	}
	if _, err := retry.FeaturesOf(t.Backend); err != nil && t.Backend != retry.Auto {
		return t, Invalid("DELAY_BACKEND", b.DelayBackend, "auto, plugin, ttl, levels or native")
	}
	switch b.Handoff {
	case "stages", "":
		t.Handoff = retry.ViaStages
	case "direct":
		t.Handoff = retry.Direct
	default:
		return t, Invalid("RETRY_HANDOFF", b.Handoff, "stages or direct")
	}
	// Auto's choice is checked when it is made; every backend expresses
	// what the levels backend does.
	check := t
	if check.Backend == retry.Auto {
		check.Backend = retry.Levels
	}
	switch err := check.Validate(); {
	case err == nil:
	case errors.Is(err, retry.ErrDelayTooLong):
		return t, Invalid(b.schedule(), p.String(), "waits of at most 49 days ("+err.Error()+")")
	case errors.Is(err, retry.ErrNotLinear):
		return t, Invalid(b.schedule(), p.String(), "a linear schedule for DELAY_BACKEND=native, or DELAY_BACKEND=levels ("+err.Error()+")")
	case t.Backend == retry.Native && len(types) > 0:
		return t, Invalid("NOTIFICATION_TYPES", b.Types, "empty with DELAY_BACKEND=native, whose work queues wait one schedule for every message; or DELAY_BACKEND=levels, ttl or plugin, which follow each type's ("+err.Error()+")")
	case t.Backend == retry.Native && t.QueueType != retry.Quorum:
		return t, Invalid("QUEUE_TYPE", b.QueueType, "quorum: DELAY_BACKEND=native is RabbitMQ 4.3's delayed retry for quorum queues")
	case errors.Is(err, retry.ErrUnsupported) && b.RetryJitter > 0:
		return t, Invalid("RETRY_JITTER", fmt.Sprint(b.RetryJitter), "0 with DELAY_BACKEND="+b.DelayBackend+", which waits the broker's own schedule ("+err.Error()+")")
	default:
		return t, fmt.Errorf("configuration: %w", err)
	}
	return t, nil
}

// Management returns the client of the broker's management API: the one
// MANAGEMENT_URL names, else one derived from the first of URLs (same host
// and credentials, port 15672) when that names the default port; nil when
// MANAGEMENT_URL is off, or empty with a broker on another port (see
// ManagementMissing). On a cluster, every node serves the management API
// of the whole cluster; point MANAGEMENT_URL at a load balancer in front
// of them to keep it reachable while that first node is down.
func (b Broker) Management() (*retry.Management, error) {
	switch v := strings.TrimSpace(b.ManagementURL); {
	case v == "off":
		return nil, nil
	case v != "":
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, Invalid("MANAGEMENT_URL", "(not shown: it may hold a password)", "an http:// or https:// URL such as http://guest:guest@localhost:15672, or off")
		}
		vhost, err := retry.VhostOf(b.URLs()[0])
		if err != nil {
			vhost = "/"
		}
		return &retry.Management{URL: v, Vhost: vhost}, nil
	}
	// A malformed broker URL is its own variable's fault.
	if err := b.checkURLs(); err != nil {
		return nil, err
	}
	m, err := retry.ManagementFor(b.URLs()[0])
	switch {
	case errors.Is(err, retry.ErrManagementUnknown):
		return nil, nil
	case err != nil:
		return nil, Invalid(b.urlsVar(), retry.RedactURL(b.URLs()[0]), "a broker URL the management API's address can be derived from, or set MANAGEMENT_URL ("+err.Error()+")")
	}
	return m, nil
}

// ManagementMissing returns why relay runs without the management API
// though MANAGEMENT_URL is not off: it is empty and the first broker URL
// names a port other than the default, so the API's address cannot be
// derived (retry.ErrManagementUnknown). It returns nil otherwise.
func (b Broker) ManagementMissing() error {
	if strings.TrimSpace(b.ManagementURL) != "" || b.checkURLs() != nil {
		return nil
	}
	first := b.URLs()[0]
	if _, err := retry.ManagementFor(first); !errors.Is(err, retry.ErrManagementUnknown) {
		return nil
	}
	u, _ := url.Parse(first)
	scheme, user := "http", "guest:guest"
	if u.Scheme == "amqps" {
		scheme = "https"
	}
	if u.User != nil {
		user = u.User.Username() + ":<password>"
	}
	return fmt.Errorf("MANAGEMENT_URL is empty and cannot be derived from %s, which names port %s: port 15672 of %s may be another broker's. "+
		"Set MANAGEMENT_URL to this broker's management API, such as %s://%s@%s:<its management port>, or to off",
		b.urlsVar(), u.Port(), u.Hostname(), scheme, user, u.Hostname())
}

// urlsVar names the variable URLs come from.
func (b Broker) urlsVar() string {
	if len(b.AMQPURLs) > 0 {
		return "AMQP_URLS"
	}
	return "AMQP_URL"
}
